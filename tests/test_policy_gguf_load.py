"""The embedded GGUF policy loads with llama.cpp's extra buffer types off (AMX matmul segfaults in
llama-cpp-python 0.3.36 on Sapphire Rapids VMs), and the library's defaults are restored afterwards."""
import llama_cpp
import llama_cpp.llama as module

from rvt_bench.adapters.policy.gguf import _no_extra_buffer_types


def test_extra_buffer_types_off_only_during_the_load():
    before = module.llama_cpp.llama_model_default_params
    assert before().use_extra_bufts  # llama.cpp's default: on
    with _no_extra_buffer_types():
        assert module.llama_cpp.llama_model_default_params().use_extra_bufts is False
    assert module.llama_cpp.llama_model_default_params is before
    assert llama_cpp.llama_model_default_params().use_extra_bufts


def test_the_loaded_model_runs_a_decode():
    # The decode is what crashed: a short greedy completion must come back.
    from rvt_bench.adapters.policy.gguf import GGUFPolicy

    policy = GGUFPolicy(model="smollm2", n_ctx=256)
    out = policy.generate("The capital of France is", stop=["\n"], max_new_tokens=4)
    assert out.n_tokens >= 1
