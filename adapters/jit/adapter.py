"""JiT (arXiv 2503.21056, "Online Reasoning Video Segmentation with Just-in-Time Digital Twins";
no public code) behind the Adapter protocol (``+model=jit``), following the paper:

1. plan: an LLM reads the query and returns the specialists it needs with rationales and the
   query's type (rvt_bench.adapters.jit.planner); the plan becomes a DAG that the shared twin builder runs
   over the configured perception (only the planned specialists run);
2. twin: a per-frame scene graph over a sliding window (rvt_bench.adapters.jit.scene_graph);
3. reason: semantic queries are answered by the LLM over the graph as text; spatial and temporal
   ones by an LLM-written program over the graph, run in the sandbox (rvt_bench.adapters.sandbox.runner);
   vqa / summarization get the LLM's text answer over the graph;
4. answer: object ids -> the twin's masks (optionally smoothed over time, rvt_bench.adapters.jit.smoothing)
   or their boxes (grounding).
Any policy backend answers (conf/policy: the embedded GGUF, hf, openai/vLLM). Every prompt and
reply is kept in the trace, and each stage's seconds in timings (the paper reports 15.24 s per
query for JiT against 1.54 s for DT-R1).
"""
from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from rvt_bench.adapters.base import Adapter, ScoredSample, settings_block
from rvt_bench.adapters.jit import funnel
from rvt_bench.adapters.jit import prompts as prompt_mod
from rvt_bench.adapters.jit.planner import SPECIALISTS, JiTError, Plan, json_object, parse_plan, to_dag
from rvt_bench.adapters.jit.scene_graph import GRAPH_VERSION, build_graph, to_text
from rvt_bench.adapters.policy.base import Policy
from rvt_bench.core.records import AdapterReport, Measure
from rvt_bench.core.types import AdapterError, Prediction, Sample

log = logging.getLogger(__name__)
JIT_VERSION = 1
# The reasoning programs' limits: these rvt_bench.adapters.sandbox.runner.SandboxSettings fields (defaults there).
SANDBOX_KEYS = ("timeout_s", "memory_mb", "max_output_chars", "isolation")
_CODE_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)


@dataclass
class Smoothing:
    """Temporal mask smoothing S_t = alpha * S_{t-1} + (1 - alpha) * M_t (adapters/jit/smoothing.py).
    enabled: off by default; alpha: weight of the previous frame's score (paper: 0.8)."""

    enabled: bool = False
    alpha: float = 0.8


@dataclass
class TokenBudgets:
    """Most new tokens per LLM call, by stage: the plan, a text / ids answer, a reasoning program."""

    planner: int = 256
    answer: int = 256
    program: int = 512


class JiTAdapter(Adapter):
    """JiT (see module docstring). Built by Hydra from conf/model/jit.yaml.

    policy: an rvt_bench.adapters.policy.base.Policy (planner and reasoner). perception: an
        rvt_bench.adapters.twin.perception.Perception (oracle, foundation, tiny...).
    specialists: the specialists the planner is offered (subset of SPECIALISTS; DINOv2 needs
        perception=foundation or tiny).
    window: scene-graph sliding window in frames (paper: w = 6). min_motion: px a node must move
        within the window for a "moving-towards" edge. similarity: DINOv2 cosine for "similar_to".
    graph_max_chars: character budget of the scene graph as text.
    smoothing: Smoothing keys. max_new_tokens: TokenBudgets keys.
    sandbox: limits of the reasoning programs, SANDBOX_KEYS of rvt_bench.adapters.sandbox.runner.SandboxSettings
        (its defaults where absent). prompts: the prompts block (adapters/jit/prompts.py; required).
    These keyword defaults and the dataclasses above are the defaults of `+model=jit` too
    (adapters/jit/config.py::JiTConfig reads them).

    JiT decodes free: `policy.decoding=grammar` (DT-R1's tag grammar) is not applied to its JSON
    plans and answers, and its report says so. Its report (rvt_bench.adapters.jit.funnel): plan is
    JSON -> specialists ran -> scene graph built -> answer parsed -> result correct, and the
    seconds of each stage.
    """

    stages = funnel.STAGES

    def __init__(self, policy: Policy, perception: Any, name: str = "jit",
                 specialists: list[str] | tuple[str, ...] = SPECIALISTS, window: int = 6, min_motion: float = 2.0,
                 similarity: float = 0.8, graph_max_chars: int = 6000, smoothing: Mapping[str, Any] | None = None,
                 max_new_tokens: Mapping[str, int] | None = None, sandbox: Mapping[str, Any] | None = None,
                 prompts: Mapping[str, Any] | None = None):
        unknown = sorted(set(specialists) - set(SPECIALISTS))
        if unknown:
            raise AdapterError(f"model.specialists: unknown {unknown}; expected a subset of {list(SPECIALISTS)}")
        if int(window) < 1:
            raise AdapterError(f"model.window must be >= 1, got {window}")
        self.name, self.policy, self.perception = name, policy, perception
        self.specialists = [s for s in SPECIALISTS if s in specialists]
        self.window, self.min_motion, self.similarity = int(window), float(min_motion), float(similarity)
        self.graph_max_chars = int(graph_max_chars)
        self.smoothing = settings_block("smoothing", Smoothing, smoothing)
        self.max_new_tokens = settings_block("max_new_tokens", TokenBudgets, max_new_tokens)
        self.sandbox = dict(sandbox or {})
        extra = set(self.sandbox) - set(SANDBOX_KEYS)
        if extra:
            raise AdapterError(f"model.sandbox: unknown keys {sorted(extra)}; expected {list(SANDBOX_KEYS)}")
        self.prompts = prompt_mod.check(prompts or {})
        lacking = [s for s in self.specialists if s not in self.prompts["specialists"]]
        if lacking:
            raise AdapterError(f"model.prompts.specialists lacks a description of {lacking}")
        if self._grammar_asked():
            log.warning("JiT decodes free: policy.decoding=grammar (DT-R1's tag grammar) is not applied to its plans "
                        "and answers")

    def _grammar_asked(self) -> bool:
        return getattr(self.policy, "decoding", None) == "grammar"

    def passed(self, item: ScoredSample) -> dict[str, bool]:
        return funnel.passed(item)

    def measures(self, scored: Sequence[ScoredSample]) -> list[Measure]:
        return funnel.measures(scored)

    def report(self, scored: Sequence[ScoredSample]) -> AdapterReport:
        """The funnel and seconds (rvt_bench.adapters.jit.funnel); no `decoding` (JiT decodes under no
        grammar), and a measure saying so when the policy asked for the grammar."""
        out = super().report(scored)
        assert out is not None  # JiT declares its stages
        if self._grammar_asked():
            out.measures.append(Measure("policy_decoding", "policy.decoding=grammar", "not applied (JiT decodes free)"))
        out.details = funnel.details(scored)
        return out

    def fingerprint(self) -> dict:
        return {
            "adapter": "jit", "version": JIT_VERSION, "graph_version": GRAPH_VERSION, "name": self.name,
            "policy": self.policy.fingerprint(), "perception": self.perception.fingerprint(),
            "specialists": self.specialists, "window": self.window, "min_motion": self.min_motion,
            "similarity": self.similarity, "graph_max_chars": self.graph_max_chars, "smoothing": dict(self.smoothing),
            "max_new_tokens": dict(self.max_new_tokens), "sandbox": dict(self.sandbox),
            "prompt": {"version": self.prompts["version"], "sha256": prompt_mod.digest(self.prompts)},
        }

    def preflight(self) -> None:
        """The policy, and the sandbox of the reasoning programs (bubblewrap or stop, a probe round
        under model.sandbox's limits: rvt_bench.adapters.sandbox.preflight)."""
        from rvt_bench.adapters.sandbox.runner import SandboxSettings, preflight

        preflight(SandboxSettings(**self.sandbox), "model.sandbox")
        self.policy.preflight()

    def code_isolation(self) -> str:
        from rvt_bench.adapters.sandbox.runner import SandboxSettings

        return SandboxSettings(**self.sandbox).mode

    def close(self) -> None:
        self.policy.close()

    def predict(self, sample: Sample) -> Prediction:
        """Plan, build the twin, reason, answer. Prediction.trace = {"calls": [{"stage", "messages",
        "reply", "stop_reason", "n_tokens"}], "plan", "dag", "order", "graph_chars", "mode"
        ("semantic" | "program" | "text"), "program_output", "ids"}; timings = seconds {"planner",
        "twin", "graph", "reasoning", "sandbox", "masks"}. Raises JiTError (kind "parse", with
        `reason`) for unusable model output, DAGError for an invalid plan, AdapterError from
        perception; each with the partial trace as `.trace`."""
        trace: dict[str, Any] = {"calls": []}
        timings: dict[str, float] = {}
        try:
            return self._predict(sample, trace, timings)
        except AdapterError as exc:
            trace["timings"] = timings
            exc.trace, exc.timings = trace, timings
            raise

    def _predict(self, sample: Sample, trace: dict, timings: dict) -> Prediction:
        from rvt_bench.adapters.twin.builder import build_twin
        from rvt_bench.adapters.twin.dag import validate_dag

        messages = prompt_mod.planner_messages(self.prompts, sample, self.specialists)
        plan_text = self._call("planner", messages, trace, timings)
        plan = parse_plan(plan_text, tuple(self.specialists))
        dag = to_dag(plan)
        order = validate_dag(dag)
        trace.update(plan=plan.to_dict(), dag=dag, order=order)

        t0 = time.perf_counter()
        twin = build_twin(sample, order, self.perception)
        timings["twin"] = round(time.perf_counter() - t0, 4)
        t0 = time.perf_counter()
        graph = build_graph(twin, self.window, self.min_motion, self.similarity)
        graph_text = to_text(graph, self.graph_max_chars)
        timings["graph"] = round(time.perf_counter() - t0, 4)
        trace["graph_chars"] = len(graph_text)

        pred = Prediction(sample_id=sample.id, task=sample.task, trace=trace, timings=timings)
        if sample.task in ("vqa", "summarization"):
            trace["mode"] = "text"
            text = self._call("answer", prompt_mod.reasoning_messages(self.prompts, "answer_text", sample, graph_text),
                              trace, timings, stage_key="reasoning").strip()
            if not text:
                raise JiTError("empty_answer", "the LLM's answer over the scene graph is empty")
            pred.text = text
            return pred
        ids = self._ids(sample, plan, graph, graph_text, twin, trace, timings)
        trace["ids"] = ids
        t0 = time.perf_counter()
        if sample.task == "grounding":
            pred.boxes = [[list(inst.frames[t].bbox) for inst in (twin.instance(i) for i in ids) if t in inst.frames]
                          for t in range(twin.num_frames)]
        else:
            masks = twin.masks_for(ids) if ids else [None] * twin.num_frames
            if self.smoothing["enabled"]:
                from rvt_bench.adapters.jit.smoothing import smooth_masks

                masks = smooth_masks(masks, *twin.size, alpha=float(self.smoothing["alpha"]))
            pred.masks = masks
        timings["masks"] = round(time.perf_counter() - t0, 4)
        return pred

    def _ids(self, sample: Sample, plan: Plan, graph: dict, graph_text: str, twin: Any, trace: dict,
             timings: dict) -> list[int]:
        """Object ids answering the query: by the LLM over the graph text (semantic), or by its
        program over the graph in the sandbox (spatial, temporal)."""
        if plan.query_type == "semantic":
            trace["mode"] = "semantic"
            reply = self._call("answer", prompt_mod.reasoning_messages(self.prompts, "answer_ids", sample, graph_text),
                               trace, timings, stage_key="reasoning")
            return _checked_ids(json_object(reply, "the answer", "answer_json"), twin)
        from rvt_bench.adapters.sandbox.runner import run_code

        trace["mode"] = "program"
        reply = self._call("program", prompt_mod.reasoning_messages(self.prompts, "program", sample, graph_text),
                           trace, timings, stage_key="reasoning")
        code = program_code(reply)
        t0 = time.perf_counter()
        payload = twin.to_code_payload()
        payload["variables"]["graph"] = graph
        result = run_code(code, payload, **self.sandbox)
        timings["sandbox"] = round(time.perf_counter() - t0, 4)
        trace["program_output"] = result.output
        if not result.ok:
            raise JiTError("program_error", f"the program failed: {result.error}")
        lines = [line for line in result.output.splitlines() if line.strip()]
        if not lines:
            raise JiTError("program_output", "the program printed nothing; expected a JSON line {\"ids\": [...]}")
        return _checked_ids(json_object(lines[-1], "the program's last line", "program_output"), twin)

    def _call(self, stage: str, messages: list[dict], trace: dict, timings: dict, stage_key: str | None = None) -> str:
        """One LLM call (no stop strings: the model ends its turn); prompt and reply to the trace."""
        t0 = time.perf_counter()
        gen = self.policy.generate(self.policy.render(messages, self.policy.prefill), [],
                                   int(self.max_new_tokens[stage]))
        key = stage_key or stage
        timings[key] = round(timings.get(key, 0.0) + time.perf_counter() - t0, 4)
        trace["calls"].append({"stage": stage, "messages": messages, "reply": gen.text,
                               "stop_reason": gen.stop_reason, "n_tokens": gen.n_tokens})
        # a reasoning model's (R1-distill) thought is not its answer
        return gen.text.rpartition("</think>")[2] if "</think>" in gen.text else gen.text


def program_code(reply: str) -> str:
    """The Python in a reply: the first ```python fenced block, else the whole reply."""
    fenced = _CODE_FENCE.search(reply)
    return (fenced.group(1) if fenced else reply).strip() + "\n"


def _checked_ids(obj: dict, twin: Any) -> list[int]:
    ids = obj.get("ids")
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise JiTError("answer_json", f'expected {{"ids": [integer object ids]}}, got {json.dumps(obj)[:160]}')
    known = set(twin.instance_ids())
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise JiTError("unknown_id", f"ids {unknown} are not objects of the scene graph (ids: {sorted(known)})")
    return list(dict.fromkeys(ids))
