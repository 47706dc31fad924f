"""Rollouts through vLLM: the openai policy with token ids against a loopback vLLM-style server,
the engine policy against vllm.LLM's surface, and GRPO with use_vllm in both modes, whose
importance-sampling check compares our returned logprobs with the trained model's own.

vLLM itself needs a GPU; tests/vllm_stand_in.py puts the tiny model behind vLLM's output
conventions (see its docstring)."""
import itertools
import sys
import threading

import pytest
import trl.trainer.grpo_trainer as grpo_trainer  # before any test puts a stand-in vllm in sys.modules

from rvt_bench.adapters.dtr1.rollout import RolloutEnv, RolloutLimits, run_rollouts
from rvt_bench.adapters.dtr1.tokens import turn_ids
from rvt_bench.adapters.policy.base import Request
from rvt_bench.adapters.policy.hf import HFPolicy
from rvt_bench.adapters.policy.openai_compat import OpenAIPolicy, served_models
from rvt_bench.adapters.policy.vllm_engine import VLLMEnginePolicy
from rvt_bench.core.types import AdapterError
from tests.test_train_grpo import ENV_SPAN, _capture, _cfg, _lora_state
from tests.vllm_stand_in import CompletionsServer, FakeLLM, ModelSampler, fake_vllm_module
from train_dtr1 import build_trainer, check_vllm_settings

MESSAGES = [{"role": "system", "content": "SYS"}, {"role": "user", "content": "find the dog"}]


@pytest.fixture(scope="module")
def tiny(tiny_r1):
    return tiny_r1


@pytest.fixture
def fake_vllm(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm_module())


@pytest.fixture
def server_for():
    servers = []

    def start(sampler):
        servers.append(CompletionsServer(sampler))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def _forward_logprobs(model, ids, start):
    """log p(ids[t] | ids[:t]) for t >= start, from one forward pass over the whole sequence."""
    import torch

    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
    return [float(logp[t - 1, ids[t]]) for t in range(start, len(ids))]


def _server_policy(server, tok, **kw):
    return OpenAIPolicy(served_models(server.url)[0], server.url, tokenizer=tok, token_ids=True, api_key="EMPTY",
                        backoff_s=0.01, max_retries=1, **kw)


# --- the two policies ---------------------------------------------------------------------------------

def test_server_policy_returns_the_sampled_ids_and_their_logprobs(tiny, server_for):
    path, tok, model = tiny
    server = server_for(ModelSampler(model, tok))
    policy = _server_policy(server, tok)
    prompt = policy.render(MESSAGES, policy.prefill)
    gen = policy.generate(prompt, ["</dt_plan>"], 12)
    body = server.bodies[-1]
    assert body["prompt"] == tok(prompt, add_special_tokens=False)["input_ids"]  # token ids, not text
    assert body["return_token_ids"] is True and body["logprobs"] == 0
    # Same greedy ids as the model decoding itself, and the model's own logprobs for them.
    ref = HFPolicy.from_loaded(model, tok).generate(prompt, ["</dt_plan>"], 12)
    assert gen.token_ids == ref.token_ids and gen.text == ref.text and gen.stop_reason == ref.stop_reason
    prompt_ids = body["prompt"]
    expected = _forward_logprobs(model, prompt_ids + list(gen.token_ids), len(prompt_ids))
    assert len(gen.logprobs) == len(gen.token_ids) == gen.n_tokens
    assert max(abs(a - b) for a, b in zip(gen.logprobs, expected)) < 1e-4


@pytest.mark.parametrize("backend", ["server", "engine"])
def test_stop_string_and_end_of_turn_follow_vllm_conventions(tiny, server_for, fake_vllm, backend):
    path, tok, model = tiny
    script = {"x": "look</think> <dt_plan>{}</dt_plan> more", "y": "done" + tok.eos_token}
    sampler = ModelSampler(model, tok, script=lambda prompt: script[prompt])
    if backend == "server":
        policy = _server_policy(server_for(sampler), tok)
    else:
        policy = VLLMEnginePolicy(llm=FakeLLM(sampler), tokenizer=tok, seed=None)
    stop = ["</dt_plan>", "</execute>"]
    first, second = policy.generate_batch([Request("x", stop, 40), Request("y", stop, 40)])
    assert (first.text, first.stop_reason, first.matched_stop) == ("look</think> <dt_plan>{}", "stop", "</dt_plan>")
    assert tok.decode(list(first.token_ids)) == "look</think> <dt_plan>{}</dt_plan>"  # the stop's tokens kept
    assert (second.text, second.stop_reason) == ("done", "eos")
    assert tok.eos_token_id not in second.token_ids and len(second.logprobs) == len(second.token_ids)
    assert second.end_token[0] == tok.eos_token_id and second.end_token[1] <= 0  # kept aside, with its logprob
    assert all(lp is not None and lp <= 0 for g in (first, second) for lp in g.logprobs)


def test_engine_policy_matches_the_server_policy_and_isolates_a_too_long_prompt(tiny, server_for, fake_vllm):
    path, tok, model = tiny
    server = _server_policy(server_for(ModelSampler(model, tok)), tok)
    llm = FakeLLM(ModelSampler(model, tok))
    engine = VLLMEnginePolicy(llm=llm, tokenizer=tok)
    prompt = engine.render(MESSAGES, engine.prefill)
    assert engine.render(MESSAGES, engine.prefill) == server.render(MESSAGES, server.prefill)
    a, b = engine.generate(prompt, ["</dt_plan>"], 10), server.generate(prompt, ["</dt_plan>"], 10)
    assert (a.text, a.token_ids, a.stop_reason) == (b.text, b.token_ids, b.stop_reason)
    assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-6

    def too_long(prompts, **kw):
        raise ValueError("The decoder prompt (length 9999) is longer than the maximum model length of 4096")
    llm.generate = too_long
    with pytest.raises(AdapterError, match="longer than the maximum model length"):
        engine.generate(prompt, ["</dt_plan>"], 10)


def test_engine_policy_reports_the_prompt_tokens_its_prefix_cache_held(tiny, fake_vllm):
    import types

    path, tok, model = tiny
    llm = FakeLLM(ModelSampler(model, tok))
    real = llm.generate

    def generate(prompts, **kw):  # vLLM's RequestOutput.num_cached_tokens (automatic prefix caching)
        return [types.SimpleNamespace(**vars(o), num_cached_tokens=16) for o in real(prompts, **kw)]

    llm.generate = generate
    engine = VLLMEnginePolicy(llm=llm, tokenizer=tok)
    prompt = engine.render(MESSAGES, engine.prefill)
    cost = engine.generate(prompt, ["</dt_plan>"], 4).cost
    assert (cost.prompt_tokens, cost.cached_tokens) == (len(engine.encode(prompt)), 16)
    assert cost.record()["prefilled"] == len(engine.encode(prompt)) - 16 and cost.prefill_s is None


def test_server_without_token_ids_is_refused_clearly(tiny):
    path, tok, model = tiny
    with pytest.raises(AdapterError, match="token_ids=true needs `tokenizer`"):
        OpenAIPolicy("m", "http://127.0.0.1:9/v1", chat_template="x", token_ids=True)
    with pytest.raises(AdapterError, match=r"the server at base_url=http://127.0.0.1:9/v1 cannot be reached"):
        served_models("http://127.0.0.1:9/v1", timeout_s=2)


# --- rollouts continue from the sampled ids ---------------------------------------------------------

PLAN = 'plan</think> <dt_plan>{"SAM2": []}</dt_plan>'
EXECUTE = "<think>look</think> <execute>print(1)</execute>"
RIGHT = '<think>done</think> <task>segmentation</task> <answer>{"instances": []}</answer>'
WRONG = '<think>done</think> <task>vqa</task> <answer>{"instances": []}</answer>'


class TwoBranchScript:
    """Plan, then alternately (per call at that point) one code round + the right task, or the
    wrong task at once: rewards vary within a group."""

    def __init__(self):
        self.branch = itertools.count()
        self.lock = threading.Lock()

    def __call__(self, prompt_text):
        turn = prompt_text.rsplit("<｜Assistant｜>", 1)[1]
        if "</dt_rep>" not in turn:
            return PLAN
        if "</results>" in turn:
            return RIGHT
        with self.lock:
            return EXECUTE if next(self.branch) % 2 == 0 else WRONG


class _Twin:
    def to_llm_json(self, max_chars):
        return '{"instances": []}'


class _Result:
    ok, output, duration_s = True, "1\n", 0.0


def test_each_generation_continues_from_the_ids_sampled_before_it(tiny, server_for):
    path, tok, model = tiny
    sampler = ModelSampler(model, tok, script=lambda p: PLAN if "</dt_rep>" not in p else (EXECUTE if "</results>" not in p else RIGHT))
    policy = _server_policy(server_for(sampler), tok)
    env = RolloutEnv(plan=lambda text: ["SAM2"], build_twin=lambda order: _Twin(), execute=lambda code, twin: _Result())
    [rollout] = run_rollouts(policy, [(MESSAGES, env)], RolloutLimits(max_new_tokens=64, max_total_tokens=256))
    assert rollout.answer == '{"instances": []}'
    reqs = sampler.requests
    assert len(reqs) == 3
    encode = policy.encode
    turn = turn_ids(encode, policy.render(MESSAGES, policy.prefill), rollout.segments)
    # Request k's prompt = the rendered prompt + every piece before it, with the policy's own ids.
    policy_pieces = [s for s in rollout.segments if s["kind"] == "policy"]
    assert reqs[0]["prompt_ids"] == turn.prompt_ids
    assert reqs[1]["prompt_ids"] == turn.prompt_ids + list(policy_pieces[0]["token_ids"]) + encode(rollout.segments[2]["text"])
    assert reqs[2]["prompt_ids"] + list(policy_pieces[2]["token_ids"]) == turn.all_ids
    assert [m for m, s in zip(turn.env_mask, turn.logprobs) if s == 0.0] and all(
        (lp == 0.0) == (m == 0) for lp, m in zip(turn.logprobs, turn.env_mask))


# --- GRPO with use_vllm ---------------------------------------------------------------------------------

EVENTS: list[str] = []  # order of weight sync, barrier and first request in the GRPO test


class RecordingVLLMGeneration:
    """Stands in for trl.generation.vllm_generation.VLLMGeneration (which needs vLLM and, for the
    weight push, NCCL): records sync_weights; colocate exposes `llm`, server a client whose server
    info reports processed logprobs."""

    llm = None

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.mode = kwargs["mode"]
        self.synced = 0
        self.vllm_client = type("Client", (), {"get_server_info": lambda self: {"model_config": {"logprobs_mode": "processed_logprobs"}}})()

    def sync_weights(self):
        self.synced += 1
        EVENTS.append("sync")

    def generate(self, *args, **kwargs):
        raise AssertionError("the DT-R1 rollout function must not use TRL's single-turn generate")


@pytest.mark.parametrize("mode", ["server", "colocate"])
def test_grpo_step_with_vllm_returns_logprobs_the_trained_model_agrees_with(tiny, tmp_path, server_for, fake_vllm, monkeypatch, mode):
    path, tok, model = tiny
    sampler = ModelSampler(model, tok, script=TwoBranchScript())
    monkeypatch.setattr(grpo_trainer, "VLLMGeneration", RecordingVLLMGeneration)
    over = {"grpo.use_vllm": "true", "grpo.vllm_mode": mode, "data.limit": 1, "grpo.num_generations": 8,
            "rollout.max_new_tokens": 64, "rollout.max_total_tokens": 256}
    if mode == "server":
        server = server_for(sampler)
        over["+grpo.vllm_server_base_url"] = server.root
    else:
        RecordingVLLMGeneration.llm = FakeLLM(sampler)
    try:
        trainer = build_trainer(_cfg(tmp_path, path, **over))
        EVENTS.clear()
        barrier = trainer.accelerator.wait_for_everyone
        monkeypatch.setattr(trainer.accelerator, "wait_for_everyone", lambda: (EVENTS.append("wait"), barrier())[1])
        first_request = sampler.complete
        monkeypatch.setattr(sampler, "complete", lambda *a: (EVENTS.append("request"), first_request(*a))[1])
        seen = _capture(trainer)
        before = _lora_state(trainer.model)
        trainer.train()
    finally:
        RecordingVLLMGeneration.llm = None
    assert trainer.vllm_generation.synced == 1  # TRL pushed the weights before the rollouts
    first = EVENTS.index("request")
    # Server mode: every rank waits for the main process's weight push before sampling.
    assert EVENTS[:first] == (["sync", "wait"] if mode == "server" else ["sync"])
    expected_policy = "OpenAIPolicy" if mode == "server" else "VLLMEnginePolicy"
    assert type(trainer.rollout_func.vllm_policy(trainer)).__name__ == expected_policy
    assert len(sampler.requests) >= 8 * 2  # 8 rollouts, each at least plan + answer
    logs = next(h for h in trainer.state.log_history if "sampling/sampling_logp_difference/max" in h)
    # vLLM's logprobs (here: the served tiny model's) line up token by token with the trained
    # model's: one shifted or env-misaligned token would differ by far more.
    assert logs["sampling/sampling_logp_difference/max"] < 1e-4
    assert abs(logs["sampling/importance_sampling_ratio/mean"] - 1.0) < 1e-4
    out = seen[0]
    n_env = 0
    for row in range(out["completion_ids"].shape[0]):
        n = int(out["completion_mask"][row].sum())
        row_ids, row_mask = out["completion_ids"][row, :n].tolist(), out["tool_mask"][row, :n].tolist()
        text = tok.decode(row_ids[:-1])
        env_chars = sum(b - a for a, b in (m.span() for m in ENV_SPAN.finditer(text)))
        env_tokens = [t for t, m in zip(row_ids, row_mask) if m == 0]
        assert len(tok.decode(env_tokens)) == env_chars > 0
        n_env += len(env_tokens)
    assert n_env > 0 and float(out["advantages"].abs().sum()) > 0
    after = _lora_state(trainer.model)
    assert any(not before[n].equal(after[n]) for n in before)


def test_use_vllm_without_vllm_installed_stops_before_loading_anything(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else importlib.machinery.PathFinder.find_spec(name))
    with pytest.raises(AdapterError, match="needs vLLM in this environment"):
        check_vllm_settings({"use_vllm": True, "vllm_mode": "server"})


def test_vllm_settings_the_multi_turn_rollout_cannot_honour_are_refused(fake_vllm):
    check_vllm_settings({"use_vllm": False, "vllm_tensor_parallel_size": 4})
    check_vllm_settings({"use_vllm": True, "vllm_mode": "server", "vllm_tensor_parallel_size": 4})
    with pytest.raises(AdapterError, match="regex"):
        check_vllm_settings({"use_vllm": True, "vllm_mode": "server", "vllm_structured_outputs_regex": "<think>.*"})
    with pytest.raises(AdapterError, match="colocate"):
        check_vllm_settings({"use_vllm": True, "vllm_mode": "colocate", "vllm_tensor_parallel_size": 2})
    with pytest.raises(AdapterError, match="sleep"):
        check_vllm_settings({"use_vllm": True, "vllm_mode": "colocate", "vllm_enable_sleep_mode": True})
    with pytest.raises(AdapterError, match="vllm_mode"):
        check_vllm_settings({"use_vllm": True, "vllm_mode": "remote"})


def test_vllm_policy_config_builds_lazily_and_names_a_missing_vllm(monkeypatch):
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from train_dtr1 import REPO_ROOT

    with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["+dataset=demo", "+model=dtr1", "policy=vllm", "policy.adapter=/ckpt"])
    policy = instantiate(cfg.policy)  # nothing loads before the first generation
    assert isinstance(policy, VLLMEnginePolicy) and policy.batch_size == 32 and policy.adapter == "/ckpt"
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(AdapterError, match="vllm is not installed"):
        policy.generate("x", ["</dt_plan>"], 4)


def test_malformed_vllm_values_are_adapter_errors_and_non_finite_logprobs_mean_unknown():
    from rvt_bench.adapters.policy.vllm_output import from_vllm

    ok = from_vllm("a", "length", None, [5, 6], [-0.5, float("-inf")], [], set(), "srv")
    assert ok.logprobs == (-0.5, None) and ok.token_ids == (5, 6)
    with pytest.raises(AdapterError, match="srv: completion token_ids are not all non-negative integers"):
        from_vllm("a", "length", None, ["5", 6], [-0.5, -0.1], [], set(), "srv")
    with pytest.raises(AdapterError, match="srv: completion logprobs are not numbers"):
        from_vllm("a", "length", None, [5, 6], ["x", -0.1], [], set(), "srv")
    with pytest.raises(AdapterError, match="2 token ids but 1 logprobs"):
        from_vllm("a", "length", None, [5, 6], [-0.5], [], set(), "srv")


class _BatchFails(VLLMEnginePolicy):
    """An engine whose batched call fails (one prompt too long): the rollout redoes the requests
    one at a time, and each must keep its prompt ids."""

    def __init__(self, llm, tok):
        super().__init__(llm=llm, tokenizer=tok, seed=None)
        self.seen = []

    def generate_batch(self, requests):
        self.seen.append([r.prompt_ids is not None for r in requests])
        if len(requests) > 1:
            raise AdapterError("prompt longer than max_model_len")
        return super().generate_batch(requests)


def test_one_at_a_time_fallback_keeps_the_sampled_prompt_ids(tiny, fake_vllm):
    path, tok, model = tiny
    sampler = ModelSampler(model, tok, script=lambda p: PLAN if "</dt_rep>" not in p else RIGHT)
    policy = _BatchFails(FakeLLM(sampler), tok)
    env = RolloutEnv(plan=lambda text: ["SAM2"], build_twin=lambda order: _Twin(), execute=lambda code, twin: _Result())
    results = run_rollouts(policy, [(MESSAGES, env), (MESSAGES, env)], RolloutLimits(max_new_tokens=64, max_total_tokens=256))
    assert all(r.answer == '{"instances": []}' for r in results)
    # Each step: the batch of two fails, then each request alone, with its prompt ids.
    assert [len(s) for s in policy.seen] == [2, 1, 1, 2, 1, 1] and all(all(s) for s in policy.seen)


class _SandboxDown:
    def __call__(self, code, twin):
        from rvt_bench.core.types import SandboxError

        raise SandboxError("the sandbox could not start: unshare failed")


def test_rollouts_ended_outside_the_policy_get_no_gradient_and_logprobs_stay_lists(tiny, fake_vllm, monkeypatch):
    from types import SimpleNamespace

    from rvt_bench.adapters.dtr1.training import DTR1RolloutFunc
    from rvt_bench.loaders.demo import DemoDataset
    from train_dtr1 import REPO_ROOT

    path, tok, model = tiny
    samples = [s for s in DemoDataset(str(REPO_ROOT / "demo"), "demo") if s.task == "segmentation"][:1]
    # Every rollout runs code (EXECUTE), and the sandbox is down. Then the model ends its turn at
    # once: the episode is that one sampled end token.
    turn = lambda p: p.rsplit("<｜Assistant｜>", 1)[1]  # noqa: E731 (the system prompt's example has every tag)
    sampler = ModelSampler(model, tok, script=lambda p: PLAN if "</dt_rep>" not in turn(p) else EXECUTE)
    trainer = SimpleNamespace(use_vllm=True, vllm_mode="colocate", processing_class=tok,
                              vllm_generation=SimpleNamespace(llm=FakeLLM(sampler)),
                              args=SimpleNamespace(temperature=1.0, top_p=1.0, top_k=0, min_p=None, repetition_penalty=1.0,
                                                   generation_kwargs=None, max_completion_length=None))
    func = DTR1RolloutFunc({f"{s.dataset}/{s.split}/{s.id}": s for s in samples}, perception=None,
                           limits=RolloutLimits(max_new_tokens=64, max_total_tokens=256))
    monkeypatch.setattr(func, "_env", lambda s: RolloutEnv(plan=lambda t: ["SAM2"], build_twin=lambda o: _Twin(), execute=_SandboxDown()))
    key = next(iter(func.samples))
    out = func([key, key], trainer)
    assert [ep.error.split(":")[0] for ep in out["episode"]] == ["sandbox", "sandbox"], [ep.error for ep in out["episode"]]
    assert all(set(m) == {0} for m in out["env_mask"])  # no gradient from these rows
    assert all(len(lp) == len(ids) for lp, ids in zip(out["logprobs"], out["completion_ids"]))

    sampler.script = lambda p: tok.eos_token
    func._vllm_policy = None
    out = func([key], trainer)
    assert out["completion_ids"][0] == [tok.eos_token_id] and out["env_mask"][0] == [1]
    assert out["logprobs"][0][-1] is not None and out["completion_ids"][0][-1] == tok.eos_token_id  # the sampled end token


def test_openai_preflight_names_a_model_the_server_does_not_serve(tiny, server_for):
    path, tok, model = tiny
    server = server_for(ModelSampler(model, tok))
    _server_policy(server, tok).preflight()  # serves "tiny"
    wrong = OpenAIPolicy("dtr1", server.url, tokenizer=tok, api_key="EMPTY")
    with pytest.raises(AdapterError, match=r"policy.model='dtr1' is not served at .*; it serves \['tiny'\]"):
        wrong.preflight()
    with pytest.raises(AdapterError, match="cannot load the tokenizer '/nonexistent/tok' \\(policy.tokenizer"):
        OpenAIPolicy("tiny", server.url, tokenizer="/nonexistent/tok", api_key="EMPTY").preflight()


def test_preflight_sends_the_configured_api_key(tiny, monkeypatch):
    from tests.loopback import JSONHandler, Loopback

    class Guarded(JSONHandler):
        def do_GET(self):
            if self.headers.get("Authorization") != "Bearer sekrit":
                return self.send_json(401, {"error": {"message": "invalid api key"}})
            self.send_json(200, {"object": "list", "data": [{"id": "dtr1", "object": "model"}]})

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = Loopback(Guarded)
    try:
        path, tok, model = tiny
        OpenAIPolicy("dtr1", server.root + "/v1", tokenizer=tok, api_key="sekrit").preflight()
        with pytest.raises(AdapterError, match="refused the API key"):
            OpenAIPolicy("dtr1", server.root + "/v1", tokenizer=tok, api_key="wrong").preflight()
    finally:
        server.close()
