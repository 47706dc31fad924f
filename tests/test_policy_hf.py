"""The transformers policy (adapters/policy/hf.py) on a tiny random Qwen2 built locally."""
import pytest
import torch

from rvt_bench.adapters.policy.base import Request
from rvt_bench.adapters.policy.hf import HFPolicy
from rvt_bench.core.types import AdapterError

MESSAGES = [{"role": "system", "content": "You plan tools."}, {"role": "user", "content": "find the dog"}]


@pytest.fixture(scope="module")
def ckpt(tiny_r1):
    return tiny_r1


@pytest.fixture(scope="module")
def policy(ckpt):
    return HFPolicy(str(ckpt[0]), dtype="float32", device="cpu")


def _prompts(policy, n=8):
    # Different lengths, so a batch pads every row but the longest.
    return [policy.render([{"role": "user", "content": "the dog " * (i + 1) + str(i)}], policy.prefill) for i in range(n)]


def test_r1_template_prefill_is_written_once(policy, ckpt):
    tok = ckpt[1]
    template = tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)
    assert policy.prefill == "<think>\n" and template.endswith("<｜Assistant｜><think>\n")
    assert policy.render(MESSAGES, "<think>\nstep one") == template + "step one"
    with pytest.raises(AdapterError, match="prefill"):
        policy.render(MESSAGES, "no think")


def test_greedy_batch_of_8_equals_8_batches_of_1(policy):
    requests = [Request(p, ["</answer>"], 12 + i) for i, p in enumerate(_prompts(policy))]
    batched = policy.generate_batch(requests)
    single = [policy.generate_batch([r])[0] for r in requests]
    assert [g.token_ids for g in batched] == [g.token_ids for g in single]
    assert [g.text for g in batched] == [g.text for g in single]
    assert len({g.token_ids for g in batched}) > 1  # the prompts really lead to different outputs


def test_greedy_matches_transformers_generate(policy, ckpt):
    tok, model = ckpt[1], ckpt[2]
    for prompt in _prompts(policy, 3):
        gen = policy.generate(prompt, [], 10)
        ids = torch.tensor([tok(prompt, add_special_tokens=False)["input_ids"]])
        ref = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=10, do_sample=False,
                             eos_token_id=None, pad_token_id=tok.pad_token_id)[0, ids.shape[1]:].tolist()
        assert list(gen.token_ids) == ref
        assert (gen.stop_reason, gen.n_tokens) == ("length", 10)


def test_stops_at_the_earliest_stop_string_and_cuts_the_text(policy, ckpt):
    prompt = _prompts(policy, 1)[0]
    free = policy.generate(prompt, [], 20)
    stop = free.text[6:9]  # a string the model writes, whatever it is
    head = free.text[: free.text.index(stop)]
    gen = policy.generate(prompt, ["never written!", stop], 20)
    assert (gen.text, gen.stop_reason, gen.matched_stop) == (head, "stop", stop)
    assert gen.n_tokens < 20 and list(gen.token_ids) == list(free.token_ids[: gen.n_tokens])


def test_end_of_turn_token_ends_with_eos(ckpt):
    path, tok, model = ckpt
    probe = HFPolicy.from_loaded(model, tok)
    prompt = probe.render(MESSAGES, probe.prefill)
    first = probe.generate(prompt, [], 5).token_ids
    model.generation_config.eos_token_id = first[3]  # pretend the 4th token is end-of-turn
    try:
        gen = probe.generate(prompt, [], 5)
    finally:
        model.generation_config.eos_token_id = tok.eos_token_id
    cut = first.index(first[3])
    assert (gen.stop_reason, gen.n_tokens, gen.token_ids) == ("eos", cut, first[:cut])


def test_lora_adapter_directory_is_merged_at_load(ckpt, tmp_path):
    from peft import LoraConfig, get_peft_model

    path, tok, _ = ckpt
    base = HFPolicy(str(path), dtype="float32", device="cpu")._load()[0]
    lora = get_peft_model(HFPolicy(str(path), dtype="float32", device="cpu")._load()[0],
                          LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    lora.save_pretrained(str(tmp_path / "adapter"))
    tuned = HFPolicy(str(path), adapter=str(tmp_path / "adapter"), dtype="float32", device="cpu")
    ids = torch.tensor([tok("the dog", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        want = lora(input_ids=ids).logits
        got = tuned._load()[0](input_ids=ids).logits
        plain = base(input_ids=ids).logits
    # Tolerance from float32 arithmetic, not tuned to one machine: merging computes (W + s*B@A) @ x where
    # PEFT computes W @ x + s*B @ (A @ x); the two agree exactly in real numbers, and in float32 each
    # is within the first-order bound of a chain of dot products (Higham, Accuracy and Stability of
    # Numerical Algorithms, 2nd ed., §3.1): a dot product of length n carries a relative error of at most
    # n*u (u = 2**-24, float32's unit roundoff), and along the forward pass those add up over the
    # inner dimensions N of every product a logit depends on (per layer q/k/v, scores over head_dim,
    # weights times values over the tokens, o_proj, gate/up, down; then lm_head), RMSNorm keeping the
    # activations at the logits' scale. Each result is within N*u*max|logit| of the exact logits, so
    # the two differ by at most 2*N*u*max|logit| (here N = 372: ~4e-4 for logits ~10; measured
    # 6e-6..8e-6 over seeds 0-7 with transformers 4.x, 1.9e-5 reported with 5.x).
    cfg = base.config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    per_layer = cfg.hidden_size + head_dim + ids.shape[1] + cfg.hidden_size + cfg.hidden_size + cfg.intermediate_size
    n_terms = cfg.num_hidden_layers * per_layer + cfg.hidden_size
    atol = 2 * n_terms * 2.0 ** -24 * want.abs().max().item()
    assert (got - want).abs().max().item() <= atol
    assert (got - plain).abs().max().item() > 100 * atol  # the adapter really changes the logits
    assert tuned.fingerprint()["adapter_sha256"] not in (None, "missing")


def test_prompt_longer_than_the_context_is_an_adapter_error(ckpt):
    small = HFPolicy(str(ckpt[0]), dtype="float32", device="cpu", max_context=8)
    with pytest.raises(AdapterError, match="does not fit"):
        small.generate(small.render(MESSAGES, small.prefill), [], 4)


def test_bad_settings_are_refused():
    with pytest.raises(AdapterError, match="dtype"):
        HFPolicy("m", dtype="float8")
    with pytest.raises(AdapterError, match="batch_size"):
        HFPolicy("m", batch_size=0)


def test_batched_rollouts_equal_one_at_a_time(policy):
    from rvt_bench.adapters.dtr1.rollout import RolloutEnv, RolloutLimits, run_rollout, run_rollouts

    env = RolloutEnv(plan=lambda text: ["SAM2"], build_twin=lambda order: None, execute=lambda code, twin: None)
    limits = RolloutLimits(max_new_tokens=6, max_total_tokens=6)
    jobs = [([{"role": "user", "content": "segment the dog " * (i + 1)}], env) for i in range(8)]
    batched = run_rollouts(policy, jobs, limits)
    for (messages, _), got in zip(jobs, batched):
        with pytest.raises(AdapterError) as single:
            run_rollout(policy, messages, env, limits)
        assert isinstance(got, AdapterError) and got.trace == single.value.trace
        assert got.trace.startswith("<think>\n") and len(got.trace) > len("<think>\n")
    assert len({r.trace for r in batched}) > 1


def test_an_adapter_directory_without_a_peft_adapter_is_named(ckpt, tmp_path):
    from rvt_bench.adapters.policy.hf import HFPolicy
    from rvt_bench.core.types import AdapterError

    path = ckpt[0]
    with pytest.raises(AdapterError, match=r"policy.adapter=.* holds no adapter_config.json"):
        HFPolicy(str(path), adapter=str(tmp_path)).preflight()
    with pytest.raises(AdapterError, match=r"policy.adapter=/nonexistent is not a directory"):
        HFPolicy(str(path), adapter="/nonexistent").preflight()
