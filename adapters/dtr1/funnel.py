"""DT-R1's report on its run: where each rollout stopped, and the rollout analytics.

Stages, in order (a sample reaches a stage only when it passed every stage before it), then
"result correct" (rvt_bench.core.records.ScoreRecord.correct):
  plan_emitted     the rollout holds a complete <dt_plan>...</dt_plan> block
  dag_valid        the plan passed rvt_bench.adapters.twin.dag.validate_dag (no "invalid DAG" parse failure)
  twin_built       the rollout got its <dt_rep> (perception ran the planned tools)
  code_rounds_ran  the rollout got through its <execute> rounds to its final <answer> block
                   (no sandbox failure, no max_rounds / token-budget failure before it)
Both are read from the rollout's events ("twin", "answer"), never from its text, where code can
print any tag; only predictions written before failed rollouts kept their events fall back to it.
  answer_parsed    the prediction has no error (task and answer parsed against the twin)
  task_correct     the declared <task> equals the sample's task
A prediction without a rollout (an adapter crash, a server that was down) fails plan_emitted.

Measures: valid DAG (dag_valid / plan_emitted), code runs OK (<execute> rounds whose code ran
without error / rounds with a known outcome; answered samples keep their events), code rounds
mean and max (over rollouts that built a twin; the paper reports 3.8 with a cap of 10), declared
task = sample task (over answered samples), copied the prompt's example (rollouts whose plan or
code equals the system prompt's worked example, copied_example / plan_emitted: a policy that
writes the example back instead of planning for its own query), and the seconds the predictions
recorded: generation (timings "policy"), its split into prefill and decode (the policy calls' own
seconds, where the backend measured them; calls decoded side by side overlap, so the two can sum to
more than generation), perception ("twin"), code ("sandbox"), total; and the tokens each policy call
prefilled (trace "calls": tokens prefilled per call, mean, and the share of prompt tokens reused
from the backend's prefix cache). Details:
"tool_usage" {tool: rollouts whose valid plan names it}, "task_confusion" {sample task: {declared
task: n}}, "copied_example" {"plan", "code": rollouts that copied it, "correct": of those that
copied either, how many were right anyway}.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from rvt_bench.adapters import measures as M
from rvt_bench.adapters.base import ScoredSample
from rvt_bench.adapters.dtr1 import tags as T
from rvt_bench.core.records import Measure
from rvt_bench.core.types import PARSE, SANDBOX, Prediction

STAGES = (("plan_emitted", "plan emitted"), ("dag_valid", "DAG valid"), ("twin_built", "twin built"),
          ("code_rounds_ran", "code rounds ran"), ("answer_parsed", "answer parsed"), ("task_correct", "task correct"))
LATENCY = (("policy", "generation"), ("prefill", "prefill"), ("decode", "decode"), ("twin", "perception"),
           ("sandbox", "code"), M.TOTAL)

_PLAN_RE = re.compile(r"<\s*dt_plan\s*>(.*?)<\s*/\s*dt_plan\s*>", re.DOTALL | re.IGNORECASE)
_CODE_RE = re.compile(r"<\s*execute\s*>(.*?)<\s*/\s*execute\s*>", re.DOTALL | re.IGNORECASE)
# what the harness inserts (the twin, the code's output): never the policy's own plan or code
_INSERTED_RE = re.compile(r"<\s*(dt_rep|results)\s*>.*?<\s*/\s*\1\s*>", re.DOTALL | re.IGNORECASE)
_SPACE = re.compile(r"\s+")


def rollout_text(pred: Prediction) -> str:
    """The rollout of a prediction (a successful one keeps {"rollout": ...}, a failed one the
    partial rollout as a string); "" when there is none."""
    trace = pred.trace
    text = trace.get("rollout") if isinstance(trace, dict) else trace
    return text if isinstance(text, str) else ""


def rollout_events(pred: Prediction) -> list | None:
    """The events the rollout recorded ({"stage": "plan"|"twin"|"execute"|"answer", ...}); None for
    a prediction without them (written before failed rollouts kept theirs, or with no rollout)."""
    events = pred.trace.get("events") if isinstance(pred.trace, dict) else None
    return events if isinstance(events, list) else None


def copied_example(pred: Prediction) -> list[str]:
    """Which parts of the system prompt's worked example (rvt_bench.adapters.dtr1.prompt EXAMPLE_PLAN,
    EXAMPLE_CODE) the rollout wrote back as its own: "plan" when its <dt_plan> equals the example's,
    "code" when one of its <execute> blocks equals the example's (whitespace ignored; the harness's
    <dt_rep> and <results> insertions are not read). [] for a rollout that copied neither."""
    from rvt_bench.adapters.dtr1.prompt import EXAMPLE_CODE, EXAMPLE_PLAN

    text = _INSERTED_RE.sub("", rollout_text(pred))
    out = []
    plan = _PLAN_RE.search(text)
    if plan and _SPACE.sub("", plan.group(1)) == _SPACE.sub("", EXAMPLE_PLAN):
        out.append("plan")
    if any(_SPACE.sub("", code) == _SPACE.sub("", EXAMPLE_CODE) for code in _CODE_RE.findall(text)):
        out.append("code")
    return out


def policy_calls(pred: Prediction) -> list[dict]:
    """The cost records of the rollout's policy calls (trace "calls", rvt_bench.adapters.dtr1.rollout.Rollout.calls);
    [] for a prediction written before they were kept, or with no rollout."""
    calls = pred.trace.get("calls") if isinstance(pred.trace, dict) else None
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def token_measures(scored: Sequence[ScoredSample]) -> list[Measure]:
    """Tokens prefilled per policy call (mean over the calls whose backend counted them) and the
    share of prompt tokens reused from the prefix cache; nothing where no call counted them."""
    prefilled: list[float] = []
    prompt = cached = 0
    for item in scored:
        for call in policy_calls(item.prediction):
            if isinstance(call.get("prefilled"), int) and isinstance(call.get("prompt_tokens"), int):
                prefilled.append(call["prefilled"])
                prompt += call["prompt_tokens"]
                cached += int(call.get("cached_tokens") or 0)
    return [*M.mean("prefilled_tokens_per_call", "tokens prefilled per call (mean)", prefilled, "tokens"),
            *M.rate("prefix_cache_share", "prompt tokens from the prefix cache", cached, prompt)]


def passed(item: ScoredSample) -> dict[str, bool]:
    """Per stage of STAGES: passed or not (see the module docstring); a stage after a failed one
    is False too."""
    pred, error = item.prediction, item.prediction.error or {}
    text = rollout_text(pred)
    out = {"plan_emitted": T.has_close(text, T.PLAN)}
    out["dag_valid"] = out["plan_emitted"] and not (pred.failure_kind == PARSE and "invalid DAG" in str(error.get("message", "")))
    events = rollout_events(pred)
    if events is not None:  # what the rollout recorded; code can print any tag into the text
        stages = {e.get("stage") for e in events if isinstance(e, dict)}
        out["twin_built"] = out["dag_valid"] and "twin" in stages
        out["code_rounds_ran"] = out["twin_built"] and pred.failure_kind != SANDBOX and "answer" in stages
    else:  # a run written before failed rollouts kept their events
        out["twin_built"] = out["dag_valid"] and T.has_open(text, T.REP)
        after_twin = text[text.lower().rfind("</dt_rep>"):] if out["twin_built"] else ""
        out["code_rounds_ran"] = out["twin_built"] and pred.failure_kind != SANDBOX and T.has_close(after_twin, T.ANSWER)
    out["answer_parsed"] = out["code_rounds_ran"] and not error
    out["task_correct"] = out["answer_parsed"] and pred.task == item.sample.task
    return out


def measures(scored: Sequence[ScoredSample]) -> list[Measure]:
    """The rollout analytics of the module docstring, each only where it has a denominator."""
    plans = dags = answered = consistent = ok_rounds = known_rounds = copied = 0
    rounds: list[int] = []
    for item in scored:
        stages, pred = passed(item), item.prediction
        plans += stages["plan_emitted"]
        copied += bool(stages["plan_emitted"] and copied_example(pred))
        dags += stages["dag_valid"]
        events = rollout_events(pred)
        if stages["twin_built"]:
            # the execute events the rollout recorded; runs written before failed samples kept
            # them: their <results> blocks counted (code that prints the tag inflates that count)
            rounds.append(sum(1 for e in events if isinstance(e, dict) and e.get("stage") == "execute")
                          if events is not None else
                          len(re.findall(r"<\s*results\s*>", rollout_text(pred), re.IGNORECASE)))
        if not pred.error:
            answered += 1
            consistent += pred.task == item.sample.task
        for event in events or []:
            if isinstance(event, dict) and event.get("stage") == "execute":
                known_rounds += 1
                ok_rounds += bool(event.get("ok"))
    return [*M.rate("valid_dag_rate", "valid DAG", dags, plans),
            *M.rate("code_exec_success_rate", "code runs OK", ok_rounds, known_rounds),
            *M.mean("mean_code_rounds", "code rounds (mean)", rounds, "rounds"),
            *([Measure("max_code_rounds", "code rounds (max)", max(rounds), "rounds")] if rounds else []),
            *M.rate("task_consistency", "declared task = sample task", consistent, answered),
            *M.rate("copied_example_rate", "copied the prompt's example", copied, plans),
            *token_measures(scored),
            *M.latency(scored, LATENCY)]


def details(scored: Sequence[ScoredSample]) -> dict[str, Any]:
    """{"tool_usage": {tool: rollouts whose valid plan names it}, "task_confusion": {sample task:
    {declared task: answered samples}}, "copied_example": {"plan", "code": rollouts that wrote that
    part of the prompt's worked example back, "correct": of the rollouts that copied, those whose
    result is correct}}, each left out when empty."""
    from rvt_bench.adapters.twin.dag import DAGError, parse_dag, validate_dag

    tools: dict[str, int] = {}
    confusion: dict[str, dict[str, int]] = {}
    copies = {"plan": 0, "code": 0, "correct": 0}
    for item in scored:
        pred = item.prediction
        parts = copied_example(pred)
        for part in parts:
            copies[part] += 1
        copies["correct"] += bool(parts and item.record.correct() is True)
        if not pred.error:
            row = confusion.setdefault(item.sample.task, {})
            row[str(pred.task)] = row.get(str(pred.task), 0) + 1
        match = _PLAN_RE.search(rollout_text(pred)) if passed(item)["dag_valid"] else None
        try:
            for tool in validate_dag(parse_dag(match.group(1))) if match else []:
                tools[tool] = tools.get(tool, 0) + 1
        except DAGError:
            pass  # a plan the rollout accepted always validates; a hand-edited trace may not
    out: dict[str, Any] = {}
    if tools:
        out["tool_usage"] = dict(sorted(tools.items()))
    if confusion:
        out["task_confusion"] = {k: dict(sorted(v.items())) for k, v in sorted(confusion.items())}
    if copies["plan"] or copies["code"]:
        out["copied_example"] = copies
    return out
