"""One GRPO step on CPU with a tiny local Qwen2 through the DT-R1 rollout_func (train_dtr1.py)."""
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from rvt_bench.adapters.policy.base import Generation, Policy
from train_dtr1 import REPO_ROOT, build_trainer

PLAN = '<think>plan</think> <dt_plan>{"SAM2": []}</dt_plan>'
EXECUTE = "<think>look</think> <execute>print(len(twin['instances']))</execute>"
RIGHT_TASK = '<think>done</think> <task>segmentation</task> <answer>{"instances": []}</answer>'
WRONG_TASK = '<think>done</think> <task>vqa</task> <answer>{"instances": []}</answer>'
ENV_SPAN = re.compile(r"\n<dt_rep>.*?</dt_rep>\n|\n<results>.*?</results>\n", re.DOTALL)


class TwoBranchPolicy(Policy):
    """Even rollouts run one code round and declare the right task, odd ones answer at once with
    the wrong task: rewards differ (R_task 0.25 vs 0), so advantages are non-zero."""

    name = "two-branch"

    def __init__(self):
        self.calls = 0
        self.prompts = []

    def fingerprint(self):
        return {"policy": "two-branch"}

    def render(self, messages, assistant_prefix=""):
        return "".join(f"[{m['role']}] {m['content']}\n" for m in messages) + "[assistant] " + assistant_prefix

    def generate(self, prompt, stop, max_new_tokens):
        raise AssertionError("generate_batch is used")

    def generate_batch(self, requests):
        out = []
        for i, r in enumerate(requests):
            self.prompts.append(r.prompt)
            turn = r.prompt.split("[assistant] ", 1)[1]  # the system prompt's example has every tag
            if "</dt_rep>" not in turn:
                text = PLAN
            elif "</results>" in turn:
                text = RIGHT_TASK
            else:
                text = EXECUTE if i % 2 == 0 else WRONG_TASK
            head, tag = text[: text.rindex("</")], text[text.rindex("</"):]
            out.append(Generation(head, "stop", tag, len(text.split())))
        return out


def _cfg(tmp_path, base, **over):
    overrides = [
        f"base_model={base}", "dtype=float32", f"output_dir={tmp_path / 'out'}",
        "data.use=[demo]", "data.limit=2", "perception=oracle",  # the demo is annotated: the twin without models
        "rollout.max_new_tokens=8", "rollout.max_total_tokens=16", "rollout.batch_size=8",
        "rollout.sandbox.timeout_s=20",
        "lora.target_modules=[q_proj,v_proj]",
        "grpo.num_generations=4", "grpo.per_device_train_batch_size=8", "grpo.max_steps=1",
        "grpo.bf16=false", "grpo.activation_checkpointing=false", "grpo.use_cpu=true",
        "grpo.max_completion_length=2048", "grpo.save_strategy=no", "grpo.logging_steps=1",
        "+grpo.dataloader_num_workers=0",
    ] + [f"{k}={v}" for k, v in over.items()]
    with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base="1.3"):
        return compose(config_name="train/dtr1_grpo", overrides=overrides)


def _capture(trainer):
    seen = []
    inner = trainer._generate_and_score_completions

    def wrapped(inputs):
        out = inner(inputs)
        seen.append(out)
        return out

    trainer._generate_and_score_completions = wrapped
    return seen


def _lora_state(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}


@pytest.fixture(scope="module")
def base(tiny_r1):
    return tiny_r1[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, base):
    """One GRPO step on rollouts of TwoBranchPolicy; the LoRA adapter saved to <out>/final."""
    tmp = tmp_path_factory.mktemp("grpo")
    trainer = build_trainer(_cfg(tmp, base), policy=TwoBranchPolicy())
    seen = _capture(trainer)
    before = _lora_state(trainer.model)
    trainer.train()
    trainer.save_model(str(tmp / "final"))
    return trainer, seen[0], before, _lora_state(trainer.model), tmp / "final"


def test_rollout_func_gets_prompts_repeated_num_generations_times(trained):
    calls = trained[0].rollout_func.calls
    assert len(calls) == 1 and len(calls[0]) == 8  # per_device_train_batch_size completions
    assert [calls[0][i] == calls[0][i - i % 4] for i in range(8)] == [True] * 8
    assert len(set(calls[0])) == 2  # 2 prompts x num_generations=4


def test_training_rollouts_follow_the_papers_protocol_the_prompt_names_no_task(trained):
    users = {p.split("[user] ", 1)[1].split("\n[assistant] ", 1)[0] for p in trained[0].rollout_func.policy.prompts}
    assert len(users) == 2 and all(u.startswith("Input: ") and "\nQuery: " in u and "Task:" not in u for u in users)


def test_loss_mask_is_zero_exactly_on_environment_tokens(trained):
    trainer, out = trained[0], trained[1]
    tok = trainer.processing_class
    ids, cmask, tmask = out["completion_ids"], out["completion_mask"], out["tool_mask"]
    n_env = 0
    for row in range(ids.shape[0]):
        n = int(cmask[row].sum())
        row_ids, row_mask = ids[row, :n].tolist(), tmask[row, :n].tolist()
        assert row_ids[-1] == tok.eos_token_id and row_mask[-1] == 1  # finished episodes end with EOS
        pieces = [tok.decode([t]) for t in row_ids[:-1]]
        text = "".join(pieces)
        spans = [m.span() for m in ENV_SPAN.finditer(text)]
        assert len(spans) in (1, 2)  # <dt_rep>, and <results> on the code branch
        pos = 0
        for piece, m in zip(pieces, row_mask):
            inside = any(a <= pos and pos + len(piece) <= b for a, b in spans)
            assert m == (0 if inside else 1), (piece, pos)
            pos += len(piece)
        n_env += row_mask.count(0)
    assert n_env > 0


def test_rewards_with_variance_update_the_lora_weights(trained):
    out, before, after = trained[1], trained[2], trained[3]
    assert float(out["advantages"].abs().sum()) > 0
    changed = [n for n in before if not before[n].equal(after[n])]
    assert changed, "no LoRA weight changed"
    assert all(math.isfinite(float(v)) for n in changed for v in after[n].flatten())


def test_saved_checkpoint_evaluates_on_the_demo_with_the_hf_policy(trained, base, tmp_path):
    adapter = trained[4]
    assert (adapter / "adapter_config.json").is_file()
    cmd = [sys.executable, str(REPO_ROOT / "run_bench.py"), "policy=hf", f"policy.model={base}",
           f"policy.adapter={adapter}", "model.max_new_tokens=8", "model.max_total_tokens=16",
           f"run.root={tmp_path / 'runs'}", "run.limit=2", "leaderboard.publish=false"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1].split("run directory: ")[1])
    metrics = json.loads((run_dir / "metrics.limit2.json").read_text())
    assert metrics["n"] == 2  # the random tiny policy fails both, and the run still scores them
    preds = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 2 and all(p["error"]["kind"] == "parse" for p in preds)
    config = (run_dir / "config.yaml").read_text()
    assert str(adapter) in config


def test_equal_rewards_give_zero_advantages_and_finite_loss_with_the_trained_model(tmp_path, base):
    # Rollouts by the tiny random model itself fail at the plan: every reward term is equal.
    trainer = build_trainer(_cfg(tmp_path, base), policy=None)
    seen = _capture(trainer)
    result = trainer.train()
    out = seen[0]
    assert out["completion_ids"].shape[0] == 8
    assert float(out["advantages"].abs().sum()) == 0.0
    assert math.isfinite(result.training_loss)


# The DT-R1 paper's reward ablation table (arXiv 2511.12365, JiTBench Level 2: J, F and a training
# success rate per row). Its rows as the paper names them (leaderboards/paper/dtr1_arxiv2511.12365.csv,
# from a digest of the paper; its full text is not reachable here) and the terms each keeps, with R =
# a*(R_token + R_dag) + b*(R_exec + R_task + R_result): the format rewards are R_token and R_dag,
# DAG validation is R_dag, code execution R_exec, the accuracy rewards R_task and R_result.
PAPER_ABLATION = {
    "full": {"token", "dag", "exec", "task", "result"},   # full
    "no_format": {"exec", "task", "result"},              # without format rewards: no R_token, no R_dag
    "no_dag": {"token", "exec", "task", "result"},        # without DAG validation: R_token the only format term
    "no_exec": {"token", "dag", "task", "result"},        # without code execution: no R_exec
    "no_accuracy": {"token", "dag", "exec"},              # without accuracy rewards: no R_task, no R_result
    "accuracy_only": {"task", "result"},                  # only task accuracy: R_task and R_result alone
}


def test_reward_ablation_sweep_trains_exactly_the_terms_of_each_row_of_the_papers_table(tmp_path):
    from rvt_bench.adapters.dtr1.rewards import term_weights

    with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="train/dtr1_grpo", overrides=["sweep=reward_ablation"], return_hydra_config=True)
    points = cfg.hydra.sweeper.params["reward.ablation"].split(",")
    assert points == list(PAPER_ABLATION) and sorted(cfg.reward.ablations) == sorted(PAPER_ABLATION)
    kept = {p: {t for t, w in term_weights(1.0, 1.0, dict(cfg.reward.ablations[p])).items() if w != 0} for p in points}
    assert kept == PAPER_ABLATION


def test_each_step_logs_the_success_rate_beside_the_terms_and_sums_only_the_terms(trained):
    from rvt_bench.adapters.dtr1.rewards import SUCCESS, TERMS

    steps = [h for h in trained[0].state.log_history if "reward" in h]
    assert len(steps) == 1  # grpo.max_steps=1, logging_steps=1
    for h in steps:
        assert 0.0 <= h[f"rewards/{SUCCESS}/mean"] <= 1.0
        assert h["reward"] == pytest.approx(sum(h[f"rewards/r_{t}/mean"] for t in TERMS))  # full: weights 1, success 0


def _seg(kind, text, token_ids=None, ended=None):
    return {"kind": kind, "text": text, "token_ids": token_ids, "ended": ended}


def test_encode_rollout_masks_env_pieces_and_ends_finished_episodes_with_eos(base):
    from transformers import AutoTokenizer

    from rvt_bench.adapters.dtr1.training import encode_rollout

    tok = AutoTokenizer.from_pretrained(str(base))
    ids = lambda text: tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    plan, rep, answer = "plan</dt_plan>", "\n<dt_rep>{}</dt_rep>\n", "<answer>1</answer>"
    segments = [_seg("prefill", "<think>\n"), _seg("policy", plan, (7, 8, 9), "stop"), _seg("env", rep),
                _seg("policy", answer, None, "stop")]
    enc = encode_rollout(tok, "PROMPT", segments, finished=True)
    assert enc.prompt_ids == ids("PROMPT")
    assert enc.completion_ids == [7, 8, 9] + ids(rep) + ids(answer) + [tok.eos_token_id]
    assert enc.env_mask == [1] * 3 + [0] * len(ids(rep)) + [1] * (len(ids(answer)) + 1)

    cut = encode_rollout(tok, "P", segments[:2] + [_seg("env", rep), _seg("policy", "abc", None, "length")], finished=False)
    assert cut.completion_ids[-1] != tok.eos_token_id  # truncated by the budget: no EOS
    ended = encode_rollout(tok, "P", [_seg("policy", "abc", (5,), "eos")], finished=False)
    assert (ended.completion_ids, ended.env_mask) == ([5, tok.eos_token_id], [1, 1])  # the model sampled EOS
    short = encode_rollout(tok, "P", segments, finished=True, max_completion_length=4)
    assert (short.completion_ids, short.env_mask) == ([7, 8, 9] + ids(rep)[:1], [1, 1, 1, 0])
    empty = encode_rollout(tok, "P", [_seg("prefill", "<think>\n")], finished=False)
    assert (empty.completion_ids, empty.env_mask) == ([tok.eos_token_id], [0])


def test_a_sandbox_that_cannot_run_a_round_stops_training_before_the_model_loads(tmp_path):
    from rvt_bench.core.types import SandboxError

    # base_model names nothing: the stop must come before any model or tokenizer is loaded
    cfg = _cfg(tmp_path, tmp_path / "no-model-here", **{"rollout.sandbox.memory_mb": 100})
    with pytest.raises(SandboxError, match=r"rollout\.sandbox\.memory_mb=100 .* cannot run a probe round"):
        build_trainer(cfg, policy=TwoBranchPolicy())


@pytest.mark.parametrize("override, line", [("rollout.sandbox.timeout_s=inf", "rollout.sandbox.timeout_s=inf must be a finite number"),
                                            ("rollout.sandbox.pool_size=100000", "rollout.sandbox.pool_size=100000 must be >= 0")])
def test_a_rollout_setting_out_of_range_stops_training_before_anything_loads(tmp_path, override, line):
    from rvt_bench.core.types import ConfigError

    key, value = override.split("=")
    cfg = _cfg(tmp_path, tmp_path / "no-model-here", **{key: value})
    with pytest.raises(ConfigError) as err:
        build_trainer(cfg, policy=TwoBranchPolicy())
    assert str(err.value).startswith(line)



def test_grammar_decoding_lets_the_trained_model_finish_its_plan_within_the_budget(tmp_path, base):
    # A random model decoding freely does not write </dt_plan> in its budget (every reward equal,
    # nothing learnt); constrained by the tag grammar, as the demo's policy decodes, it plans.
    trainer = build_trainer(_cfg(tmp_path, base, **{"decoding": "grammar", "rollout.max_new_tokens": 96,
                                                    "rollout.max_total_tokens": 192, "rollout.grammar.think_chars": 20,
                                                    "rollout.grammar.code_chars": 40}), policy=None)
    func = trainer.rollout_func
    assert func.decoding == "grammar"
    episodes = []

    def recorded(prompts, tr):
        out = type(func).__call__(func, prompts, tr)
        episodes.extend(out["episode"])
        return out

    trainer.rollout_func = recorded
    trainer.train()
    assert len(episodes) == 8 and all("</dt_plan>" in ep.trace for ep in episodes)
    assert trainer.state.log_history[0]["reward_std"] > 0  # rewards differ: an update has a direction


def test_grammar_decoding_with_vllm_or_an_unknown_decoding_stops_at_start(tmp_path):
    from rvt_bench.core.types import AdapterError

    for over in ({"decoding": "beam"}, {"decoding": "grammar", "grpo.use_vllm": "true"}):
        with pytest.raises(AdapterError, match=r"^decoding='(beam|grammar)': expected free, or grammar"):
            build_trainer(_cfg(tmp_path, tmp_path / "no-model-here", **over), policy=TwoBranchPolicy())
