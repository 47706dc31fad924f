"""DT-R1 behind the Adapter interface: rollout (rvt_bench.adapters.dtr1.rollout) + answer parsing.

The prompt carries the sample's query, modality and frame count; as in the DT-R1 paper the policy
declares the task itself and its answer is read as that task (`task_hint=True`, a named variant,
also tells it `sample.task`).
Instantiated by Hydra from conf/model/dtr1.yaml, with `policy` and `perception` already built
from conf/policy/*.yaml and conf/perception/*.yaml.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping, Sequence

from rvt_bench.adapters.base import Adapter, Attribution, ScoredSample
from rvt_bench.adapters.dtr1 import funnel
from rvt_bench.adapters.dtr1 import prompt as prompts
from rvt_bench.adapters.dtr1.answer import answered_task, parse_answer, parse_task
from rvt_bench.adapters.dtr1.grammar import Spans
from rvt_bench.adapters.dtr1.rollout import Rollout, RolloutEnv, RolloutLimits, run_rollout, run_rollouts
from rvt_bench.adapters.policy.base import Policy
from rvt_bench.core.records import AdapterReport, Measure
from rvt_bench.core.types import AdapterError, Prediction, Sample


class DTR1Adapter(Adapter):
    """DT-R1: a policy plans vision tools, reads the twin, runs code, answers.

    policy:      an rvt_bench.adapters.policy.base.Policy.
    perception:  an rvt_bench.adapters.twin.perception.Perception backend (e.g. OraclePerception).
    max_rounds:  most <execute> rounds (paper: m <= 10).
    max_new_tokens / max_total_tokens: per generation call / per rollout token budgets.
    twin_max_chars: character budget of the twin JSON the policy reads.
    twin_style:  "full" (the DT-R1 paper's twin and prompt) or "compact" (a few-token twin for small
                 policies, described as such in the system prompt); rvt_bench.adapters.twin.schema.TWIN_STYLES.
    sandbox:     rvt_bench.adapters.sandbox.runner.SandboxSettings keys (timeout_s, memory_mb,
                 max_output_chars, max_processes, disk_mb, isolation, pool_size, start_timeout_s).
    grammar:     free-text bounds of the tag grammar (rvt_bench.adapters.dtr1.grammar.Spans keys:
                 think_chars, code_chars, text_chars, max_boxes), used when policy.decoding="grammar".
    task_hint:   False (the paper's protocol): the user message holds no task; the policy declares
                 one in <task>, the answer is parsed as that task (a rollout without <task> fails
                 to parse, one that declares another task than the sample's is scored as a wrong
                 answer). True (model.task_hint=true, a named variant, not comparable with the
                 paper: not_comparable): the user message names the sample's task, and an
                 undeclared task is read as it (every run before the setting existed).
    embeddings:  False (default): the prompt lists the tools it always listed. True
                 (model.embeddings=true, a named variant): the DINOv2 tool is listed and the twin's
                 instance embeddings are described ("similar" in <dt_rep>, "embedding" in code;
                 docs/twin.md). Metric depth needs no setting: the prompt states the unit the
                 perception declares (rvt_bench.adapters.dtr1.prompt.depth_of).

    Its report (rvt_bench.adapters.dtr1.funnel): plan emitted -> DAG valid -> twin built -> code rounds
    ran -> answer parsed -> task correct -> result correct, the rollout analytics, the decoding
    mode; its failure attribution across runs: rvt_bench.adapters.dtr1.attribute.
    """

    stages = funnel.STAGES

    def __init__(
        self,
        policy: Policy,
        perception: Any,
        name: str = "dtr1",
        max_rounds: int = RolloutLimits.max_rounds,
        max_new_tokens: int = RolloutLimits.max_new_tokens,
        max_total_tokens: int = RolloutLimits.max_total_tokens,
        twin_max_chars: int = RolloutLimits.twin_max_chars,
        sandbox: Mapping[str, Any] | None = None,
        grammar: Mapping[str, Any] | None = None,
        twin_style: str = RolloutLimits.twin_style,
        task_hint: bool = RolloutLimits.task_hint,
        embeddings: bool = False,
    ):
        self.name = name
        self.policy = policy
        self.perception = perception
        try:
            spans = Spans(**{k: int(v) for k, v in (grammar or {}).items()})
        except TypeError as exc:
            raise AdapterError(f"dtr1 grammar config: {exc}; expected keys {list(Spans.__dataclass_fields__)}") from None
        from rvt_bench.adapters.twin.schema import TWIN_STYLES

        if twin_style not in TWIN_STYLES:
            raise AdapterError(f"dtr1 twin_style={twin_style!r}: expected one of {list(TWIN_STYLES)}")
        if not isinstance(task_hint, bool):
            raise AdapterError(f"dtr1 task_hint={task_hint!r}: expected true or false")
        if not isinstance(embeddings, bool):
            raise AdapterError(f"dtr1 embeddings={embeddings!r}: expected true or false")
        self.embeddings = embeddings
        self.limits = RolloutLimits(int(max_rounds), int(max_new_tokens), int(max_total_tokens), int(twin_max_chars),
                                    spans, str(twin_style), task_hint)
        from rvt_bench.adapters.sandbox.runner import settings_from

        self.sandbox = dict(sandbox or {})
        self._sandbox_settings = settings_from(self.sandbox)  # SandboxError naming unknown keys

    @property
    def preferred_batch_size(self) -> int:  # type: ignore[override]
        """The policy's own batch (hf: batch_size, openai: max_concurrency; the GGUF policy: 1)."""
        return int(getattr(self.policy, "batch_size", None) or getattr(self.policy, "max_concurrency", None) or 1)

    def _prompt_args(self) -> dict:
        """system_prompt's arguments: the tools (DINOv2 too with model.embeddings), the budgets and
        style, and what the perception declares of the twin's depth (prompt.depth_of)."""
        from rvt_bench.adapters.twin.registry import describe_tools

        return {"tools": describe_tools(("DINOv2",) if self.embeddings else ()), "max_rounds": self.limits.max_rounds,
                "twin_style": self.limits.twin_style, "depth": prompts.depth_of(self.perception),
                "embeddings": self.embeddings}

    def fingerprint(self) -> dict:
        return {
            "adapter": "dtr1",
            "name": self.name,
            "policy": self.policy.fingerprint(),
            "perception": self.perception.fingerprint(),
            "limits": self._limits_fingerprint(),
            # Limits change what code can do; pool size and start-up patience do not.
            "sandbox": {k: v for k, v in self.sandbox.items() if k not in ("pool_size", "start_timeout_s")},
            "prompt": {"version": prompts.PROMPT_VERSION,
                       "sha256": prompts.prompt_digest(**self._prompt_args())},
        }

    def _limits_fingerprint(self) -> dict:
        # The grammar's spans change the numbers only when the policy decodes under the grammar.
        limits = {k: v for k, v in vars(self.limits).items() if k != "spans"}
        if limits["twin_style"] == "full":  # the default keeps the fingerprints (run names) of runs made before the knob
            del limits["twin_style"]
        # Every run before the setting told the policy its task: task_hint=true keeps those runs'
        # names; the paper's protocol (the default, false) names its runs anew.
        if limits["task_hint"]:
            del limits["task_hint"]
        if self.decoding == "grammar":
            limits["spans"] = asdict(self.limits.spans)
        return limits

    def preflight(self) -> None:
        """The policy, the vision tools' weights, and the sandbox (bubblewrap or stop, a probe round
        under model.sandbox's limits: rvt_bench.adapters.sandbox.preflight)."""
        from rvt_bench.adapters.sandbox.runner import preflight

        preflight(self._sandbox_settings, "model.sandbox")
        self.policy.preflight()
        if hasattr(self.perception, "preflight"):  # weights of the vision tools (foundation perception)
            self.perception.preflight()

    def predict(self, sample: Sample) -> Prediction:
        """Roll out on `sample` and parse the answer into masks (segmentation), pixel boxes
        (grounding) or text (vqa, summarization).

        Prediction.task is the task the model declared; the answer is read as that task
        (answer.answered_task: with task_hint, an undeclared task is read as `sample.task`);
        trace = {"rollout": the assistant turn, "events": [...], "n_tokens": int, "calls": [...]}
        ("calls": each policy call's cost, rvt_bench.adapters.dtr1.rollout.Rollout.calls); timings =
        seconds {"policy", "twin", "sandbox"}, and "prefill", "decode" where the policy measured them.
        Raises ParseError (kind "parse": missing/invalid plan with the DAGError reason, unclosed tag
        within the token budget, no <task> without task_hint, bad answer) and AdapterError /
        SandboxError from perception or the sandbox, each with `.trace`, `.events`, `.timings` of
        the partial rollout attached.
        """
        try:
            return self._finish(sample, run_rollout(self.policy, self._messages(sample), self._env(sample), self.limits))
        except AdapterError as exc:
            raise _with_events(exc)

    def predict_batch(self, samples: list[Sample]) -> list[Prediction | AdapterError]:
        """Roll out on all `samples` together (one policy request per sample in flight at each
        step, rvt_bench.adapters.dtr1.rollout.run_rollouts); per sample a Prediction or its AdapterError."""
        jobs = [(self._messages(s), self._env(s)) for s in samples]
        out: list[Prediction | AdapterError] = []
        for sample, result in zip(samples, run_rollouts(self.policy, jobs, self.limits)):
            if isinstance(result, AdapterError):
                out.append(_with_events(result))
                continue
            try:
                out.append(self._finish(sample, result))
            except AdapterError as exc:
                out.append(_with_events(exc))
        return out

    def prompt(self, sample: Sample) -> list[dict]:
        """The chat messages the policy sees for `sample` before its rollout (system, user)."""
        return self._messages(sample)

    def _messages(self, sample: Sample) -> list[dict]:
        return prompts.messages(sample, task_hint=self.limits.task_hint, **self._prompt_args())

    def not_comparable(self) -> str | None:
        if self.limits.task_hint:
            return ("model.task_hint=true: the user message names the task (R_task free), not the DT-R1 paper's "
                    "protocol; the comparable run is model.task_hint=false")
        return None

    def _finish(self, sample: Sample, rollout: Rollout) -> Prediction:
        try:
            declared = parse_task(rollout.task)
            answer = parse_answer(answered_task(declared, sample.task, self.limits.task_hint), rollout.answer, rollout.twin)
        except AdapterError as exc:
            exc.trace, exc.events, exc.timings, exc.calls = rollout.trace, rollout.events, rollout.timings, rollout.calls
            raise
        return Prediction(
            sample_id=sample.id,
            task=declared,
            masks=answer.masks,
            boxes=answer.boxes,
            text=answer.text,
            trace=_trace(rollout),
            timings=dict(rollout.timings),
        )

    def close(self) -> None:
        self.policy.close()

    @property
    def decoding(self) -> str:
        """"grammar" | "free": policy.decoding (a policy without the setting decodes free)."""
        return str(getattr(self.policy, "decoding", None) or "free")

    def passed(self, item: ScoredSample) -> dict[str, bool]:
        return funnel.passed(item)

    def measures(self, scored: Sequence[ScoredSample]) -> list[Measure]:
        return funnel.measures(scored)

    def report(self, scored: Sequence[ScoredSample]) -> AdapterReport:
        out = super().report(scored)
        assert out is not None  # DT-R1 declares its stages
        out.decoding = self.decoding
        out.details = funnel.details(scored)
        return out

    @classmethod
    def attribute(cls, run_dirs: Sequence[Path], examples: int = 3) -> Attribution:
        from rvt_bench.adapters.dtr1 import attribute

        result = attribute.attribute(list(run_dirs), examples)
        return Attribution(attribute.format_report(result), result)

    def code_isolation(self) -> str:
        return self._sandbox_settings.mode

    def _sandbox_pool(self):
        from rvt_bench.adapters.sandbox.runner import get_pool

        return get_pool(self._sandbox_settings)

    def _env(self, sample: Sample) -> RolloutEnv:
        """The real harness: DAG validation, twin builder over self.perception, sandbox."""
        from rvt_bench.adapters.dtr1.env import sandbox_env

        return sandbox_env(sample, self.perception, self._sandbox_pool())


def _with_events(exc: AdapterError) -> AdapterError:
    """`exc` with its partial rollout recorded as a successful sample's is ({"rollout": text,
    "events": [...], "calls": [...]}): the funnel counts code rounds from the events, never from the
    text, where code can print a tag; the calls are what the rollout cost until it failed."""
    if isinstance(exc.trace, str) and exc.events is not None:
        exc.trace = {"rollout": exc.trace, "events": exc.events, **({"calls": exc.calls} if exc.calls else {})}
    return exc


def _trace(rollout: Rollout) -> dict:
    return {"rollout": rollout.trace, "events": rollout.events, "n_tokens": rollout.n_tokens, "calls": rollout.calls}
