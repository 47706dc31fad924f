"""GRPO rollouts for TRL: a `rollout_func` that runs the inference rollout loop (same prompt, twin
builder, sandbox and protocol as adapters.dtr1.adapter) and turns each rollout into token ids with
an environment mask.

TRL 1.16 facts this relies on (read from trl/trainer/grpo_trainer.py, not its docstring):
- `rollout_func(prompts, trainer)` receives this process's prompts already repeated
  `num_generations` times (RepeatSampler(mini_repeat_count=num_generations)); it returns one
  completion per prompt it receives.
- It returns {"prompt_ids", "completion_ids", "logprobs"} plus extra keys; "env_mask" becomes the
  tool mask (loss mask = completion mask * env_mask), the other keys reach the reward functions
  as keyword columns (here: "episode", see adapters.dtr1.rewards.Episode).
- `max_completion_length` is not applied to rollout_func output: this module truncates.
- Completions are decoded with skip_special_tokens=True, so tags must be ordinary tokens.

Prompts are sample keys ("<dataset>/<split>/<sample id>"), not text: TRL hands rollout_func only
the prompt column, and the twin needs the Sample (two ReVOS expressions can share a query text
on different videos).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from adapters.dtr1 import prompt as prompts_mod
from adapters.dtr1.rewards import Episode
from adapters.dtr1.rollout import Rollout, RolloutEnv, RolloutLimits, run_rollouts
from adapters.policy.base import Policy
from bench.types import AdapterError, Sample


def sample_key(sample: Sample) -> str:
    """The training prompt of a sample: "<dataset>/<split>/<id>" (unique across mixed datasets)."""
    return f"{sample.dataset}/{sample.split}/{sample.id}"


@dataclass
class Encoded:
    """One rollout as token ids. prompt_ids: the rendered chat with the template's pre-fill.
    completion_ids: the assistant turn after the pre-fill, EOS appended when the episode finished
    (or the model ended its turn). env_mask: per completion token, 0 inside harness insertions
    (<dt_rep>, <results> and their newlines), 1 on policy tokens."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]


def encode_rollout(tokenizer: Any, prompt_text: str, segments: list[dict], finished: bool,
                   max_completion_length: int | None = None) -> Encoded:
    """Token ids and env mask of a rollout's `segments` (adapters.dtr1.rollout.Rollout.segments).

    Policy pieces use the token ids the policy sampled when it reports them (hf), else the
    tokenisation of their text; each harness piece is tokenised on its own, so the mask boundary is
    exact. EOS is appended (mask 1) when `finished` or the last policy piece ended with "eos" (the
    model sampled it). An empty completion becomes [EOS] with mask 0. Truncated to
    `max_completion_length` tokens when given.
    """
    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []

    completion: list[int] = []
    mask: list[int] = []
    for seg in segments:
        if seg["kind"] == "prefill":
            continue
        piece = list(seg["token_ids"]) if seg["kind"] == "policy" and seg.get("token_ids") is not None else ids(seg["text"])
        completion += piece
        mask += [0 if seg["kind"] == "env" else 1] * len(piece)
    last_policy = next((s for s in reversed(segments) if s["kind"] == "policy"), None)
    if finished or (last_policy is not None and last_policy.get("ended") == "eos"):
        completion.append(tokenizer.eos_token_id)
        mask.append(1)
    if not completion:
        # Nothing generated (the rollout failed before its first generation): TRL needs one token;
        # masked out, it carries no gradient.
        completion, mask = [tokenizer.eos_token_id], [0]
    if max_completion_length is not None:
        completion, mask = completion[:max_completion_length], mask[:max_completion_length]
    return Encoded(ids(prompt_text), completion, mask)


class DTR1RolloutFunc:
    """TRL `rollout_func` for DT-R1.

    samples:     sample_key -> Sample, every sample the training dataset can name.
    perception:  the twin's perception backend (adapters.twin.perception.Perception).
    limits:      rollout budgets (RolloutLimits).
    sandbox:     keyword limits for adapters.sandbox.runner.run_code.
    policy:      None = decode with the model being trained (HFPolicy over the unwrapped model,
                 sampling at the trainer's temperature / top_p); a Policy to roll out with instead
                 (an `openai` policy over a vLLM server, or a scripted one in tests).
    batch_size:  rollouts decoded together by the trained-model policy.
    Returns from __call__: {"prompt_ids", "completion_ids", "logprobs": None, "env_mask",
    "episode"} with one entry per prompt, in order. Raises AdapterError for an unknown sample key.
    """

    def __init__(self, samples: Mapping[str, Sample], perception: Any, limits: RolloutLimits,
                 sandbox: Mapping[str, Any] | None = None, policy: Policy | None = None, batch_size: int = 8):
        self.samples = dict(samples)
        self.perception = perception
        self.limits = limits
        self.sandbox = dict(sandbox or {})
        self.policy = policy
        self.batch_size = int(batch_size)
        self.calls: list[list[str]] = []  # prompts received per call (inspected by tests and logs)

    def __call__(self, prompts: list[str], trainer: Any) -> dict[str, list]:
        from adapters.twin.registry import describe_tools

        self.calls.append(list(prompts))
        missing = [p for p in prompts if p not in self.samples]
        if missing:
            raise AdapterError(f"rollout_func: prompts {missing[:3]} are not sample keys of the training data")
        samples = [self.samples[p] for p in prompts]
        tools = describe_tools()
        jobs = [(prompts_mod.messages(s, tools, self.limits.max_rounds), self._env(s)) for s in samples]
        tokenizer = trainer.processing_class
        if self.policy is not None:
            results = run_rollouts(self.policy, jobs, self.limits)
            policy = self.policy
        else:
            results, policy = self._with_trained_model(jobs, trainer)
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": None, "env_mask": [], "episode": []}
        max_len = getattr(trainer.args, "max_completion_length", None)
        for (messages, _), sample, result in zip(jobs, samples, results):
            finished = isinstance(result, Rollout)
            episode = _episode(sample, result)
            enc = encode_rollout(tokenizer, policy.render(messages, policy.prefill), result.segments, finished, max_len)
            out["prompt_ids"].append(enc.prompt_ids)
            out["completion_ids"].append(enc.completion_ids)
            out["env_mask"].append(enc.env_mask)
            out["episode"].append(episode)
        return out

    def _with_trained_model(self, jobs: list, trainer: Any) -> tuple[list, Policy]:
        from trl.models.utils import unwrap_model_for_generation

        from adapters.policy.hf import HFPolicy

        args = trainer.args
        # A new seed per step and process: the same stream every step would repeat its draws.
        seed = int(args.seed) + 100_003 * int(trainer.state.global_step) + int(trainer.accelerator.process_index)
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                         gather_deepspeed3_params=getattr(args, "ds3_gather_for_generation", True)) as model:
            policy = HFPolicy.from_loaded(model, trainer.processing_class, temperature=float(args.temperature),
                                          top_p=float(getattr(args, "top_p", 1.0) or 1.0), seed=seed, batch_size=self.batch_size)
            return run_rollouts(policy, jobs, self.limits), policy

    def _env(self, sample: Sample) -> RolloutEnv:
        """The harness of adapters.dtr1.adapter.DTR1Adapter._env: DAG validation, twin, sandbox."""
        from adapters.sandbox.runner import run_code
        from adapters.twin.builder import build_twin
        from adapters.twin.dag import parse_dag, validate_dag

        return RolloutEnv(
            plan=lambda text: validate_dag(parse_dag(text)),
            build_twin=lambda order: build_twin(sample, order, self.perception),
            execute=lambda code, twin: run_code(code, twin, **self.sandbox),
        )


def _episode(sample: Sample, result: Rollout | AdapterError) -> Episode:
    if isinstance(result, Rollout):
        return Episode(sample, result.trace, result.events, result.task, result.answer, result.twin)
    reason = f"{result.kind}: {result}" if hasattr(result, "kind") else str(result)
    return Episode(sample, getattr(result, "trace", ""), getattr(result, "events", []), error=reason)
