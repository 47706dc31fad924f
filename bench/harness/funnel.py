"""Where each sample fails: the DT-R1 stage funnel and rollout analytics, from a run's predictions.

Stages, in order (a sample reaches a stage only when it passed every stage before it):
  plan_emitted     the rollout holds a complete <dt_plan>...</dt_plan> block
  dag_valid        the plan passed rvt_bench.adapters.twin.dag.validate_dag (no "invalid DAG" parse failure)
  twin_built       the harness inserted <dt_rep> (perception ran the planned tools)
  code_rounds_ran  the rollout got through its <execute> rounds to its final <answer> block
                   (no sandbox failure, no max_rounds / token-budget failure before it)
  answer_parsed    the prediction has no error (task and answer parsed against the twin)
  task_correct     the declared <task> equals the sample's task
  result_correct   the score record says correct (rvt_bench.core.records.ScoreRecord.correct, the
                   rule of its units' values: IoU > 0.5 (an image's iou, a video's mean J, a box
                   answer's giou_term) or, for vqa/summarization, a judge verdict >= 0.5);
                   undecided (None) without a judge
A prediction whose trace is not a DT-R1 rollout (other adapters) skips the first four stages
(they are counted as not applicable) and starts at answer_parsed. A sample whose data failed to
load ("data" failures) never reached the model: its first failing stage is "no_rollout".

Written by rvt_bench.harness.runner into each scores.jsonl record as
  record.funnel = {"first_failed": STAGE | "no_rollout" | None (all passed or undecided),
                      "result_correct": True | False | None}
and into metrics.json as
  "decoding":  "free" | "grammar" (policy.decoding; "free" when the policy has no such key)
  "funnel":    {"stages": [STAGES], "n": N, "reached": {stage: samples that passed it},
                "first_failed": {stage: samples whose first failure it is}, "no_rollout": n,
                "result_undecided": n (text answers without a judge), "not_applicable": n}
  "analytics": {"rollouts": n with a DT-R1 rollout, "parse_rate": answered / rollouts,
                "valid_dag_rate": dag_valid / plan_emitted, "code_exec_success_rate": rounds
                whose code ran without error / rounds with a known outcome (answered samples keep
                their events), "mean_code_rounds" and "max_code_rounds" (over rollouts that built
                a twin; the paper reports 3.8 with a cap of 10), "tool_usage": {tool: rollouts
                whose valid plan names it}, "task_consistency": declared == sample task over
                answered samples, "task_confusion": {sample task: {declared: n}},
                "latency_s": {"generation", "perception", "code", "total" (sums of the
                predictions' timings "policy", "twin", "sandbox", "total"), "scoring"}}
None stands for a rate without denominator.
"""
from __future__ import annotations

import re
from typing import Any, Iterable

from rvt_bench.adapters.dtr1 import tags as T
from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import DATA, PARSE, SANDBOX, Prediction, Sample

STAGES = ("plan_emitted", "dag_valid", "twin_built", "code_rounds_ran", "answer_parsed", "task_correct", "result_correct")
ROLLOUT_STAGES = STAGES[:4]

_PLAN_RE = re.compile(r"<\s*dt_plan\s*>(.*?)<\s*/\s*dt_plan\s*>", re.DOTALL | re.IGNORECASE)


def rollout_text(pred: Prediction) -> str | None:
    """The DT-R1 rollout of a prediction (a successful one keeps {"rollout": ...}, a failed one the
    partial rollout as a string), or None when the trace is not a DT-R1 rollout."""
    trace = pred.trace
    text = trace.get("rollout") if isinstance(trace, dict) else trace
    if not isinstance(text, str):
        return None
    tagged = any(T.has_open(text, tag) for tag in (T.THINK, T.PLAN, T.TASK, T.ANSWER))
    # A rollout that never wrote a tag fails with a TagError naming the plan it lacked.
    planless = pred.failure_kind == PARSE and T.PLAN in (pred.error or {}).get("message", "")
    return text if tagged or planless else None


def result_correct(record: ScoreRecord) -> bool | None:
    """Whether a score record counts as a correct result (ScoreRecord.correct: the rule its
    protocol's units define), None when undecided."""
    return record.correct()


def sample_stages(sample: Sample, pred: Prediction, record: ScoreRecord) -> dict[str, bool | None]:
    """Per stage: True (passed), False (failed) or None (not applicable / undecided), stages in
    order; every stage after the first failure is False."""
    error = pred.error or {}
    text = rollout_text(pred)
    out: dict[str, bool | None] = {}
    if text is not None:
        out["plan_emitted"] = T.has_close(text, T.PLAN)
        out["dag_valid"] = out["plan_emitted"] and not (pred.failure_kind == PARSE and "invalid DAG" in error.get("message", ""))
        out["twin_built"] = out["dag_valid"] and T.has_open(text, T.REP)
        after_twin = text[text.lower().rfind("</dt_rep>"):] if out["twin_built"] else ""
        out["code_rounds_ran"] = out["twin_built"] and pred.failure_kind != SANDBOX and T.has_close(after_twin, T.ANSWER)
    else:
        out.update({s: None for s in ROLLOUT_STAGES})
    reached = all(v is not False for v in out.values())
    out["answer_parsed"] = reached and not error
    out["task_correct"] = out["answer_parsed"] and pred.task == sample.task
    out["result_correct"] = result_correct(record) if out["task_correct"] else False
    return out


def first_failed(stages: dict[str, bool | None]) -> str | None:
    return next((s for s in STAGES if stages.get(s) is False), None)


def annotate(samples: list[Sample], preds: dict[str, Prediction], records: list[ScoreRecord],
             policy: dict | None = None, scoring_s: float | None = None) -> dict[str, Any]:
    """Set record.funnel on every score record (records in `samples` order) and return the
    metrics.json keys "decoding", "funnel" and "analytics" (layout in the module docstring).
    policy: the resolved policy config (for its decoding mode); scoring_s: seconds spent scoring."""
    by_id = {r.sample_id: r for r in records}
    reached = {s: 0 for s in STAGES}
    failed = {s: 0 for s in STAGES}
    no_rollout = undecided = not_applicable = 0
    per_sample: list[tuple[Sample, Prediction, dict[str, bool | None]]] = []
    for sample in samples:
        pred, record = preds[sample.id], by_id[sample.id]
        if pred.failure_kind == DATA:
            record.funnel = {"first_failed": "no_rollout", "result_correct": None}
            no_rollout += 1
            continue
        stages = sample_stages(sample, pred, record)
        stage = first_failed(stages)
        record.funnel = {"first_failed": stage, "result_correct": stages["result_correct"]}
        per_sample.append((sample, pred, stages))
        if stage is not None:
            failed[stage] += 1
        if stages["plan_emitted"] is None:
            not_applicable += 1
        if stages["result_correct"] is None and stage is None:
            undecided += 1
        for s in STAGES:
            if stages[s] is True or (stages[s] is None and s in ROLLOUT_STAGES):
                reached[s] += 1
    decoding = str((policy or {}).get("decoding") or "free") if isinstance(policy, dict) else "free"
    funnel = {"stages": list(STAGES), "n": len(samples), "reached": reached, "first_failed": failed,
              "no_rollout": no_rollout, "result_undecided": undecided, "not_applicable": not_applicable}
    return {"decoding": decoding, "funnel": funnel, "analytics": analytics(per_sample, scoring_s)}


def analytics(per_sample: Iterable[tuple[Sample, Prediction, dict[str, bool | None]]], scoring_s: float | None = None) -> dict[str, Any]:
    """Rollout analytics over (sample, prediction, stages) triples (see the module docstring)."""
    from rvt_bench.adapters.twin.dag import DAGError, parse_dag, validate_dag

    rollouts = plans = dags = answered = consistent = 0
    rounds: list[int] = []
    ok_rounds = known_rounds = 0
    tools: dict[str, int] = {}
    confusion: dict[str, dict[str, int]] = {}
    latency = {"generation": 0.0, "perception": 0.0, "code": 0.0, "total": 0.0}
    for sample, pred, stages in per_sample:
        timings = pred.timings or {}
        for key, name in (("generation", "policy"), ("perception", "twin"), ("code", "sandbox"), ("total", "total")):
            latency[key] += float(timings.get(name, 0.0) or 0.0)
        if not pred.error:
            answered += 1
            declared = str(pred.task)
            confusion.setdefault(sample.task, {}).setdefault(declared, 0)
            confusion[sample.task][declared] += 1
            consistent += pred.task == sample.task
        text = rollout_text(pred)
        if text is None:
            continue
        rollouts += 1
        plans += bool(stages["plan_emitted"])
        dags += bool(stages["dag_valid"])
        if stages["dag_valid"]:
            match = _PLAN_RE.search(text)
            try:
                for tool in validate_dag(parse_dag(match.group(1))) if match else []:
                    tools[tool] = tools.get(tool, 0) + 1
            except DAGError:
                pass  # a plan the rollout accepted always validates; a hand-edited trace may not
        if stages["twin_built"]:
            rounds.append(len(re.findall(r"<\s*results\s*>", text, re.IGNORECASE)))
        events = pred.trace.get("events") if isinstance(pred.trace, dict) else None
        for event in events or []:
            if event.get("stage") == "execute":
                known_rounds += 1
                ok_rounds += bool(event.get("ok"))
    return {
        "rollouts": rollouts,
        "parse_rate": _rate(sum(1 for _, p, _s in per_sample if not p.error and rollout_text(p) is not None), rollouts),
        "valid_dag_rate": _rate(dags, plans),
        "code_exec_success_rate": _rate(ok_rounds, known_rounds),
        "mean_code_rounds": round(sum(rounds) / len(rounds), 3) if rounds else None,
        "max_code_rounds": max(rounds) if rounds else None,
        "tool_usage": dict(sorted(tools.items())),
        "task_consistency": _rate(consistent, answered),
        "task_confusion": {k: dict(sorted(v.items())) for k, v in sorted(confusion.items())},
        "latency_s": {**{k: round(v, 3) for k, v in latency.items()},
                      "scoring": None if scoring_s is None else round(float(scoring_s), 3)},
    }


def _rate(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def summary_lines(metrics: dict[str, Any]) -> list[str]:
    """The summary's decoding line and funnel (one line per stage: reached, % of n, first failures)."""
    funnel = metrics.get("funnel")
    if not funnel:
        return []
    n = funnel["n"] or 1
    lines = [f"  decoding: {metrics.get('decoding', 'free')}",
             f"  funnel (samples that passed each stage; n={funnel['n']}):"]
    for stage in funnel["stages"]:
        got, lost = funnel["reached"][stage], funnel["first_failed"][stage]
        lines.append(f"    {stage:<16} {got:>5}  {100 * got / n:6.1f}%" + (f"   first failure of {lost}" if lost else ""))
    notes = []
    if funnel.get("result_undecided"):
        notes.append(f"{funnel['result_undecided']} text answers undecided (no judge)")
    if funnel.get("not_applicable"):
        notes.append(f"{funnel['not_applicable']} predictions without a DT-R1 rollout skip the rollout stages")
    if funnel.get("no_rollout"):
        notes.append(f"{funnel['no_rollout']} samples never reached the model (data errors)")
    if notes:
        lines.append("    (" + "; ".join(notes) + ")")
    a = metrics.get("analytics") or {}
    if a.get("rollouts"):
        lines.append(f"  rollouts: valid DAG {_pct(a['valid_dag_rate'])}, code runs OK {_pct(a['code_exec_success_rate'])}, "
                     f"code rounds mean {a['mean_code_rounds']} max {a['max_code_rounds']}, "
                     f"declared task = sample task {_pct(a['task_consistency'])}")
    return lines


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"
