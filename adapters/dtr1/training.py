"""GRPO rollouts for TRL: a `rollout_func` that runs the inference rollout loop (same prompt, twin
builder, sandbox and tag format as rvt_bench.adapters.dtr1.adapter) and turns each rollout into token ids with
an environment mask.

TRL 1.16 facts this relies on (read from trl/trainer/grpo_trainer.py, not its docstring):
- `rollout_func(prompts, trainer)` receives this process's prompts already repeated
  `num_generations` times (RepeatSampler(mini_repeat_count=num_generations)); it returns one
  completion per prompt it receives.
- It returns {"prompt_ids", "completion_ids", "logprobs"} plus extra keys; "env_mask" becomes the
  tool mask (loss mask = completion mask * env_mask), the other keys reach the reward functions
  as keyword columns (here: "episode", see rvt_bench.adapters.dtr1.rewards.Episode).
- `max_completion_length` is not applied to rollout_func output: this module truncates.
- Completions are decoded with skip_special_tokens=True, so tags must be ordinary tokens.

Prompts are sample keys ("<dataset>/<split>/<sample id>"), not text: TRL hands rollout_func only
the prompt column, and the twin needs the Sample (two ReVOS expressions can share a query text
on different videos).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping

from rvt_bench.adapters.dtr1 import prompt as prompts_mod
from rvt_bench.adapters.dtr1.rewards import Episode
from rvt_bench.adapters.dtr1.rollout import Rollout, RolloutEnv, RolloutLimits, run_rollouts
from rvt_bench.adapters.dtr1.tokens import turn_ids
from rvt_bench.adapters.policy.base import Policy
from rvt_bench.core.types import AdapterError, Sample

log = logging.getLogger(__name__)


def sample_key(sample: Sample) -> str:
    """The training prompt of a sample: "<dataset>/<split>/<id>" (unique across mixed datasets)."""
    return f"{sample.dataset}/{sample.split}/{sample.id}"


@dataclass
class Encoded:
    """One rollout as token ids. prompt_ids: the rendered chat with the template's pre-fill.
    completion_ids: the assistant turn after the pre-fill, EOS appended when the episode finished
    (or the model ended its turn). env_mask: per completion token, 0 inside harness insertions
    (<dt_rep>, <results> and their newlines), 1 on policy tokens. logprobs: per completion token,
    the sampler's log-probability (vLLM backends), 0.0 on harness tokens, None where unknown (an
    appended EOS, or a backend that reports none; TRL reads None as "no correction")."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float | None]
    truncated: bool = False


def encode_rollout(tokenizer: Any, prompt_text: str, segments: list[dict], finished: bool,
                   max_completion_length: int | None = None) -> Encoded:
    """Token ids, env mask and logprobs of a rollout's `segments`
    (rvt_bench.adapters.dtr1.rollout.Rollout.segments), through rvt_bench.adapters.dtr1.tokens.turn_ids.

    EOS is appended (mask 1) when `finished` or the last policy piece ended with "eos" (the model
    sampled it: then the end token it sampled, with its logprob when the backend reported it). An empty completion becomes [EOS] with mask 0. Truncated to
    `max_completion_length` tokens when given.
    """
    turn = turn_ids(lambda text: tokenizer(text, add_special_tokens=False)["input_ids"], prompt_text, segments)
    completion, mask, logprobs = turn.completion_ids, turn.env_mask, turn.logprobs
    last_policy = next((s for s in reversed(segments) if s["kind"] == "policy"), None)
    sampled_end = last_policy.get("end_token") if last_policy is not None and last_policy.get("ended") == "eos" else None
    if sampled_end is not None:
        completion.append(int(sampled_end[0]))  # the end-of-turn token the model sampled, as sampled
        mask.append(1)
        logprobs.append(sampled_end[1])
    elif finished or (last_policy is not None and last_policy.get("ended") == "eos"):
        completion.append(tokenizer.eos_token_id)
        mask.append(1)
        logprobs.append(None)  # not sampled (the episode ended at </answer>) or not reported
    if not completion:
        # Nothing generated (the rollout failed before its first generation): TRL needs one token;
        # masked out, it carries no gradient.
        completion, mask, logprobs = [tokenizer.eos_token_id], [0], [0.0]
    cut = max_completion_length is not None and len(completion) > max_completion_length
    if cut:
        completion, mask, logprobs = (x[:max_completion_length] for x in (completion, mask, logprobs))
    return Encoded(turn.prompt_ids, completion, mask, logprobs, cut)


class DTR1RolloutFunc:
    """TRL `rollout_func` for DT-R1.

    samples:     sample_key -> Sample, every sample the training dataset can name.
    perception:  the twin's perception backend (rvt_bench.adapters.twin.perception.Perception).
    limits:      rollout budgets and prompt settings (RolloutLimits; task_hint as at evaluation).
    sandbox:     rvt_bench.adapters.sandbox.runner.SandboxSettings keys (conf/model/dtr1.yaml `sandbox:`).
    policy:      None = decode with what the trainer generates with: with `use_vllm`, TRL's vLLM
                 (colocate: its in-process engine, rvt_bench.adapters.policy.vllm_engine; server: the vLLM
                 server at vllm_server_base_url or host:port, rvt_bench.adapters.policy.openai_compat with
                 token ids), whose weights TRL syncs before each call; else the model being trained
                 (HFPolicy over the unwrapped model). Sampling follows the trainer's temperature,
                 top_p, top_k, min_p, repetition_penalty. Or a Policy to roll out with instead
                 (tests use a scripted one).
    batch_size:  rollouts decoded together by the trained-model policy; requests in flight to a
                 vLLM server.
    decoding:    the trained-model policy's decoding (rvt_bench.adapters.policy.hf.HFPolicy):
                 "free", or "grammar" (each stage constrained by the tag grammar, as the demo's
                 policy decodes; the loss still reads the unconstrained model's log-probabilities).
    Returns from __call__: {"prompt_ids", "completion_ids", "logprobs", "env_mask", "episode"}
    with one entry per prompt, in order; "logprobs" holds the sampler's per-token log-probabilities
    when the policy reports them (vLLM), else None (TRL then recomputes what it needs).
    Raises AdapterError for an unknown sample key.
    """

    def __init__(self, samples: Mapping[str, Sample], perception: Any, limits: RolloutLimits,
                 sandbox: Mapping[str, Any] | None = None, policy: Policy | None = None, batch_size: int = 8,
                 decoding: str = "free"):
        self.samples = dict(samples)
        self.perception = perception
        self.limits = limits
        from rvt_bench.adapters.sandbox.runner import settings_from

        self.sandbox = dict(sandbox or {})
        self._sandbox_settings = settings_from(self.sandbox)
        self.policy = policy
        self.batch_size = int(batch_size)
        self.decoding = str(decoding)
        self.calls: list[list[str]] = []  # prompts received per call (inspected by tests and logs)
        self._vllm_policy: Policy | None = None

    def __call__(self, prompts: list[str], trainer: Any) -> dict[str, list]:
        from rvt_bench.adapters.twin.registry import describe_tools

        self.calls.append(list(prompts))
        missing = [p for p in prompts if p not in self.samples]
        if missing:
            raise AdapterError(f"rollout_func: prompts {missing[:3]} are not sample keys of the training data")
        samples = [self.samples[p] for p in prompts]
        tools = describe_tools()
        depth = prompts_mod.depth_of(self.perception)  # metric depth named as evaluation names it
        jobs = [(prompts_mod.messages(s, tools, self.limits.max_rounds, self.limits.twin_style,
                                      task_hint=self.limits.task_hint, depth=depth), self._env(s))
                for s in samples]  # the prompt evaluation shows (DTR1Adapter._messages), twin_style included
        tokenizer = trainer.processing_class
        if self.policy is None and getattr(trainer, "use_vllm", False) and trainer.vllm_mode == "server":
            # TRL's weight push runs on the main process only; the other ranks return from
            # sync_weights at once and must not sample from the server before the push is done.
            trainer.accelerator.wait_for_everyone()
        policy = self.policy if self.policy is not None else self.vllm_policy(trainer)
        if policy is not None:
            results = run_rollouts(policy, jobs, self.limits)
        else:
            results, policy = self._with_trained_model(jobs, trainer)
        out: dict[str, Any] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], "episode": []}
        max_len = getattr(trainer.args, "max_completion_length", None)
        infra: list[str] = []
        truncated = 0
        for (messages, _), sample, result in zip(jobs, samples, results):
            finished = isinstance(result, Rollout)
            episode = _episode(sample, result, self.limits.task_hint)
            enc = encode_rollout(tokenizer, policy.render(messages, policy.prefill), result.segments, finished, max_len)
            if not finished and getattr(result, "kind", "parse") != "parse":
                # Not the policy's fault (server error, sandbox that could not start, perception
                # failure): no gradient from it, or GRPO would push down tokens that were fine.
                enc.env_mask = [0] * len(enc.env_mask)
                infra.append(episode.error or "")
            truncated += enc.truncated
            out["prompt_ids"].append(enc.prompt_ids)
            out["completion_ids"].append(enc.completion_ids)
            out["logprobs"].append(enc.logprobs)
            out["env_mask"].append(enc.env_mask)
            out["episode"].append(episode)
        if infra:
            log.warning("rollout_func: %d of %d rollouts ended by an error outside the policy, masked out of the loss; first: %s",
                        len(infra), len(prompts), infra[0])
        if truncated:
            log.warning("rollout_func: %d of %d rollouts longer than max_completion_length=%s were cut (the reward "
                        "still reads the whole rollout)", truncated, len(prompts), max_len)
        if not getattr(trainer, "use_vllm", False) and not any(
                lp is not None and m for lps, ms in zip(out["logprobs"], out["env_mask"]) for lp, m in zip(lps, ms)):
            out["logprobs"] = None  # the policy reported none: TRL recomputes what it needs
        return out

    def vllm_policy(self, trainer: Any) -> Policy | None:
        """The policy over TRL's vLLM (see the class docstring), built once; None without use_vllm."""
        if not getattr(trainer, "use_vllm", False):
            return None
        if self._vllm_policy is None:
            args = trainer.args
            extra = dict(getattr(args, "generation_kwargs", None) or {})  # as TRL applies it to vLLM
            sampling = {
                "temperature": float(args.temperature),
                "top_p": float(getattr(args, "top_p", 1.0) or 1.0),
                "top_k": int(getattr(args, "top_k", 0) or 0),
                "min_p": float(getattr(args, "min_p", 0.0) or 0.0),
                "repetition_penalty": float(getattr(args, "repetition_penalty", 1.0) or 1.0),
            }
            if trainer.vllm_mode == "colocate":
                from rvt_bench.adapters.policy.vllm_engine import VLLMEnginePolicy

                # seed=None: every rollout draws its own stream (K rollouts of a prompt must differ).
                self._vllm_policy = VLLMEnginePolicy(llm=trainer.vllm_generation.llm, tokenizer=trainer.processing_class,
                                                     seed=None, extra_sampling=extra, **sampling)
            elif trainer.vllm_mode == "server":
                from rvt_bench.adapters.policy.openai_compat import OpenAIPolicy, served_models

                root = (args.vllm_server_base_url or f"http://{args.vllm_server_host}:{args.vllm_server_port}").rstrip("/")
                base_url = root if root.endswith("/v1") else root + "/v1"
                models = served_models(base_url, what="grpo.vllm_server_base_url")
                self._vllm_policy = OpenAIPolicy(
                    model=models[0], base_url=base_url, tokenizer=trainer.processing_class, token_ids=True,
                    temperature=sampling["temperature"], top_p=sampling["top_p"], seed=None,
                    extra_body={**{k: v for k, v in sampling.items() if k in ("top_k", "min_p", "repetition_penalty")}, **extra},
                    max_concurrency=max(1, self.batch_size),
                )
            else:
                raise AdapterError(f"rollout_func: unknown vllm_mode {trainer.vllm_mode!r}; expected colocate or server")
        return self._vllm_policy

    def _with_trained_model(self, jobs: list, trainer: Any) -> tuple[list, Policy]:
        from trl.models.utils import unwrap_model_for_generation

        from rvt_bench.adapters.policy.hf import HFPolicy

        args = trainer.args
        # A new seed per step and process: the same stream every step would repeat its draws.
        seed = int(args.seed) + 100_003 * int(trainer.state.global_step) + int(trainer.accelerator.process_index)
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                         gather_deepspeed3_params=getattr(args, "ds3_gather_for_generation", True)) as model:
            policy = HFPolicy.from_loaded(model, trainer.processing_class, temperature=float(args.temperature),
                                          top_p=float(getattr(args, "top_p", 1.0) or 1.0), seed=seed, batch_size=self.batch_size,
                                          decoding=self.decoding)
            return run_rollouts(policy, jobs, self.limits), policy

    def _sandbox_pool(self):
        from rvt_bench.adapters.sandbox.runner import get_pool

        return get_pool(self._sandbox_settings)

    def preflight(self) -> None:
        """Before training: the sandbox runs code here as rollout.sandbox asks (bubblewrap or stop;
        rvt_bench.adapters.sandbox.preflight). Raises SandboxError with one line."""
        from rvt_bench.adapters.sandbox.runner import preflight

        preflight(self._sandbox_settings, "rollout.sandbox")

    def _env(self, sample: Sample) -> RolloutEnv:
        """The harness of rvt_bench.adapters.dtr1.adapter.DTR1Adapter._env: DAG validation, twin, sandbox."""
        from rvt_bench.adapters.dtr1.env import sandbox_env

        return sandbox_env(sample, self.perception, self._sandbox_pool())


JUDGED_TASKS = ("vqa", "summarization")
"""Tasks whose R_result is a judge's verdict (rvt_bench.adapters.dtr1.rewards.r_result)."""


def check_training_setup(samples: list[Sample], perception: Any, limits: RolloutLimits, has_judge: bool) -> None:
    """Everything training needs from its data and settings, checked before a model loads; each
    gap stops training with one AdapterError line that names the fix.

    - twin_style must be one of rvt_bench.adapters.twin.schema.TWIN_STYLES (as evaluation checks).
    - A vqa or summarization sample needs a judge (reward.judge): R_result and the logged success
      rate ask it, and without one the reward function would raise mid-training.
    - Oracle perception (rvt_bench.adapters.twin.oracle) needs every sample's instance annotations;
      a dataset without them (the real ReasonSeg release has none per object) would fail every
      twin and mask every valid rollout out of the loss. Foundation perception needs none.
    - The perception's own preflight, as evaluation runs it (foundation: every enabled model's
      weights can be had; AdapterError naming the backend and model id).
    """
    from rvt_bench.adapters.twin.oracle import OraclePerception
    from rvt_bench.adapters.twin.schema import TWIN_STYLES

    if limits.twin_style not in TWIN_STYLES:
        raise AdapterError(f"rollout.twin_style={limits.twin_style!r}: expected one of {list(TWIN_STYLES)}")
    if not has_judge:
        text = [s for s in samples if s.task in JUDGED_TASKS]
        if text:
            raise AdapterError(
                f"{len(text)} of {len(samples)} training samples are {'/'.join(sorted({s.task for s in text}))} "
                f"(first: {sample_key(text[0])}), whose reward needs a judge: set reward.judge (a conf/judge/openai.yaml-"
                f"style block) or train on segmentation/grounding sources only (data.use)")
    if isinstance(perception, OraclePerception):
        bare = [s for s in samples if not s.annotations]
        if bare:
            raise AdapterError(
                f"perception=oracle needs instance annotations, and {len(bare)} of {len(samples)} training samples have "
                f"none (first: {sample_key(bare[0])}): train with perception=foundation (the default) or drop that "
                f"source from data.use")
    if hasattr(perception, "preflight"):
        perception.preflight()


def _episode(sample: Sample, result: Rollout | AdapterError, task_hint: bool) -> Episode:
    if isinstance(result, Rollout):
        return Episode(sample, result.trace, result.events, result.task, result.answer, result.twin, task_hint=task_hint)
    reason = f"{result.kind}: {result}"
    return Episode(sample, result.trace or "", result.events or [], error=reason, task_hint=task_hint)
