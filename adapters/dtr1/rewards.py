"""DT-R1's GRPO reward, one function per term (DT-R1 paper, arXiv 2511.12365, section on rewards):

    R = a * (R_token + R_dag) + b * (R_exec + R_task + R_result)

- R_token  +1 when the rollout's tags are flawless, -1 for a missing or malformed pair.
- R_dag    +0.5 for a valid plan (parses, known tools, sufficient dependencies, acyclic), else -0.5.
- R_exec   0 when every <execute> ran cleanly, -0.5 when any raised.
- R_task   +0.25 when <task> names the sample's task, else 0 (the paper's protocol: the prompt
           does not name it, Episode.task_hint).
- R_result +1 / -1: IoU > 0.5 for masks (per frame J, averaged over frames) and boxes (per frame
           box IoU, averaged over frames), the judge's verdict for text (an unscored verdict: 0);
           the answer is read as the task the rollout declared, as evaluation reads it.
The weights a, b and which terms count (the paper's reward ablation table: conf/train/dtr1_grpo.yaml
reward.ablations, one row chosen by reward.ablation) come from config. `success` is no reward: the
training success rate the paper's ablation table reports, logged per step (docs/training.md). The
trace a term reads is the whole assistant turn, the policy's pre-filled "<think>\\n" included, so
the pre-fill never costs the format reward.

This is the one place an adapter reuses metrics/ (docs/architecture.md "Direction of imports"): R_result uses the
benchmark's own J and box IoU.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from rvt_bench.adapters.dtr1 import tags as T
from rvt_bench.core.types import AdapterError, ParseError, Sample

TERMS = ("token", "dag", "exec", "task", "result")
SUCCESS = "success"  # the name of the logged success column (rewards/success/mean in TRL's logs)
# The tags every rollout writes once, in this order (docs/architecture.md "The DT-R1 rollout").
_ONCE = (T.PLAN, T.REP, T.TASK, T.ANSWER)
_ALL = (T.THINK, T.PLAN, T.REP, T.EXECUTE, T.RESULTS, T.TASK, T.ANSWER)


@dataclass
class Episode:
    """One finished (or failed) rollout, as the reward sees it.

    sample: the Sample rolled out on. trace: the whole assistant turn. events: the rollout's events
    ({"stage": "execute", "ok": bool, ...} per code block). task / answer: contents of <task> /
    <answer> (None when the rollout failed before them). twin: the twin built from the plan (None
    before it). error: None, or the reason the rollout failed (e.g. "parse: missing_tag: ...").
    task_hint: the prompt named the sample's task (rvt_bench.adapters.dtr1.rollout.RolloutLimits);
    False, the paper's protocol, reads an answer without <task> as unparsable.
    result: R_result once computed (r_result_many fills it), so the judge is asked once per episode.
    """

    sample: Sample
    trace: str
    events: list[dict] = field(default_factory=list)
    task: str | None = None
    answer: str | None = None
    twin: Any = None
    error: str | None = None
    task_hint: bool = False
    result: float | None = None


def r_token(trace: str) -> float:
    """+1.0 when every tag of the rollout markup is paired (no unclosed, stray or nested-same tag),
    <think> occurs at least once, dt_plan / dt_rep / task / answer exactly once and in that order
    after the first <think>, each <execute> is followed by its <results>, and nothing but
    whitespace follows </answer>; else -1.0."""
    try:
        blocks = {tag: T.find_blocks(trace, tag) for tag in _ALL}
    except ParseError:
        return -1.0
    if not blocks[T.THINK] or any(len(blocks[tag]) != 1 for tag in _ONCE):
        return -1.0
    if len(blocks[T.EXECUTE]) != len(blocks[T.RESULTS]):
        return -1.0
    starts = [_first_open(trace, tag) for tag in (T.THINK, *_ONCE)]
    if starts != sorted(starts):
        return -1.0
    executes = [m.start() for m in T._open_re(T.EXECUTE).finditer(trace)]
    results = [m.start() for m in T._open_re(T.RESULTS).finditer(trace)]
    if any(not e < r for e, r in zip(executes, results)) or any(r > nxt for r, nxt in zip(results, executes[1:])):
        return -1.0
    tail = trace[T._close_re(T.ANSWER).search(trace).end():]
    return 1.0 if not tail.strip() else -1.0


def r_dag(trace: str) -> float:
    """+0.5 when the trace holds one <dt_plan> block that rvt_bench.adapters.twin.dag accepts, else -0.5."""
    from rvt_bench.adapters.twin.dag import parse_dag, validate_dag

    try:
        validate_dag(parse_dag(T.extract_one(trace, T.PLAN)))
    except ParseError:
        return -0.5
    return 0.5


def r_exec(events: list[dict]) -> float:
    """0.0 when no <execute> block failed (none run counts as clean), -0.5 when any did."""
    return -0.5 if any(e.get("stage") == "execute" and not e.get("ok") for e in events) else 0.0


def r_task(declared: str | None, expected: str) -> float:
    """+0.25 when the declared task (case and whitespace insensitive) is `expected`, else 0.0."""
    return 0.25 if declared is not None and declared.strip().lower() == expected else 0.0


def r_result(ep: Episode, judge: Any = None, threshold: float = 0.5) -> float:
    """+1.0 when the answer is right for `ep.sample.task`, -1.0 when it is wrong or unparsable.

    segmentation: mean over frames of J (rvt_bench.metrics.masks.jaccard; a frame where both masks are empty
    scores 1) > threshold. grounding: mean over frames of the box IoU (rvt_bench.metrics.boxes, 1 where neither
    side has a box) > threshold. vqa / summarization: judge.score(JudgeItem).score >= 0.5 (+1) or
    < 0.5 (-1); an unscored verdict (score None) gives 0.0. Raises AdapterError when a text task has no
    judge, or the sample has no target of its task.
    """
    return r_result_many([ep], judge, threshold)[0]


def r_result_many(episodes: list[Episode], judge: Any = None, threshold: float = 0.5) -> list[float]:
    """r_result of each episode, in order; the judge's items go together through
    judge.score_many (concurrent requests) instead of one request per episode. Each value is kept
    in its episode's `result`; an episode that has one is not scored again."""
    todo = [ep for ep in episodes if ep.result is None]
    outcomes = [_result_or_item(ep, judge, threshold) for ep in todo]
    items = [o for o in outcomes if not isinstance(o, float)]
    verdicts = iter(judge.score_many(items) if items else [])
    for ep, o in zip(todo, outcomes):
        if isinstance(o, float):
            ep.result = o
            continue
        score = next(verdicts).score
        ep.result = 0.0 if score is None else (1.0 if score >= 0.5 else -1.0)
    return [float(ep.result) for ep in episodes]  # type: ignore[arg-type]


def _result_or_item(ep: Episode, judge: Any, threshold: float) -> Any:
    """r_result when it needs no judge, else the JudgeItem to ask the judge about."""
    from rvt_bench.adapters.dtr1.answer import answered_task, parse_answer, parse_task

    sample = ep.sample
    if ep.answer is None or ep.twin is None:
        return -1.0
    try:
        # As evaluation does: the answer is read as the task the model declared (without task_hint
        # a rollout that declares none has no answer), and an answer to another task than the
        # sample's is scored as empty there, so it is wrong here.
        if answered_task(parse_task(ep.task), sample.task, ep.task_hint) != sample.task:
            return -1.0
        answer = parse_answer(sample.task, ep.answer, ep.twin)
    except ParseError:
        return -1.0
    if sample.task == "segmentation":
        return 1.0 if _mean_j(sample, answer.masks) > threshold else -1.0
    if sample.task == "grounding":
        from rvt_bench.metrics.boxes import sample_box_scores

        if sample.target.boxes is None:
            raise AdapterError(f"sample {sample.id}: grounding reward needs target boxes")
        return 1.0 if sample_box_scores(answer.boxes, sample.target.boxes)["giou_term"] > threshold else -1.0
    if judge is None:
        raise AdapterError(f"sample {sample.id}: a {sample.task} reward needs a judge (train.judge)")
    from rvt_bench.metrics.judge import JudgeItem

    return JudgeItem(sample.id, sample.query, list(sample.target.answers or []), answer.text)


def _mean_j(sample: Sample, masks: list | None) -> float:
    from rvt_bench.core.masks import decode
    from rvt_bench.metrics.masks import jaccard

    gt = sample.target.masks
    if gt is None:
        raise AdapterError(f"sample {sample.id}: segmentation reward needs target masks")
    if masks is None or len(masks) != len(gt):
        return 0.0
    size = next((m["size"] for m in [*gt, *masks] if m is not None), None)
    if size is None:
        return 1.0  # no object anywhere, none predicted
    empty = np.zeros(tuple(size), dtype=bool)
    scores = [jaccard(empty if g is None else decode(g), empty if p is None else decode(p)) for g, p in zip(gt, masks)]
    return float(np.mean(scores))


def reward_terms(ep: Episode, judge: Any = None) -> dict[str, float]:
    """The five unweighted terms of one episode: {"token", "dag", "exec", "task", "result"}."""
    return {
        "token": r_token(ep.trace),
        "dag": r_dag(ep.trace),
        "exec": r_exec(ep.events),
        "task": r_task(ep.task, ep.sample.task),
        "result": r_result(ep, judge),
    }


def success(ep: Episode, judge: Any = None) -> float:
    """1.0 when the rollout succeeded, else 0.0: it ran the whole protocol (its tags flawless, R_token
    +1; its plan a valid DAG, R_dag +0.5; no code round failed, R_exec 0) and its answer, read as the
    task it declared, is right for the sample (R_result +1). The DT-R1 paper's ablation table
    reports a "training success rate" per row without defining it (in the text reachable to us);
    this is the definition docs/training.md states. Not a reward: it is logged, never summed."""
    ok = r_token(ep.trace) > 0 and r_dag(ep.trace) > 0 and r_exec(ep.events) == 0.0
    return 1.0 if ok and r_result_many([ep], judge)[0] > 0 else 0.0


def term_weights(a: float, b: float, enabled: Mapping[str, bool] | None = None) -> dict[str, float]:
    """Per-term weights of R = a*(R_token + R_dag) + b*(R_exec + R_task + R_result); a term with
    enabled[term] False gets weight 0 (the paper's reward ablations). Raises AdapterError for an
    unknown term name."""
    enabled = dict(enabled or {})
    unknown = set(enabled) - set(TERMS)
    if unknown:
        raise AdapterError(f"reward terms {sorted(unknown)} unknown; expected some of {list(TERMS)}")
    base = {"token": a, "dag": a, "exec": b, "task": b, "result": b}
    return {t: (float(w) if enabled.get(t, True) else 0.0) for t, w in base.items()}


def total_reward(terms: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """sum(weights[t] * terms[t])."""
    return math.fsum(weights[t] * terms[t] for t in TERMS)


def trl_reward_funcs(judge: Any = None) -> list[Callable[..., list[float]]]:
    """One TRL reward function per term, in TERMS order, then the success column (SUCCESS): pass
    the weights of term_weights in TERMS order and 0.0 for success as GRPOConfig.reward_weights,
    so TRL logs each term and the success rate per step (rewards/<name>/mean) and sums only the
    terms. Each reads the `episode` column that rvt_bench.adapters.dtr1.training's rollout_func
    returns; R_result is computed once per episode (the judge asked once) whatever reads it."""

    def make(term: str) -> Callable[..., list[float]]:
        def reward(prompts: list, completions: list, episode: list[Episode], **_: Any) -> list[float]:
            if term == "result":
                return r_result_many(list(episode), judge)
            if term == SUCCESS:
                r_result_many(list(episode), judge)  # the batch's judge calls together
                return [success(ep, judge) for ep in episode]
            return [_term(term, ep, judge) for ep in episode]

        reward.__name__ = SUCCESS if term == SUCCESS else f"r_{term}"
        return reward

    return [make(t) for t in (*TERMS, SUCCESS)]


def _term(term: str, ep: Episode, judge: Any) -> float:
    if term == "token":
        return r_token(ep.trace)
    if term == "dag":
        return r_dag(ep.trace)
    if term == "exec":
        return r_exec(ep.events)
    if term == "task":
        return r_task(ep.task, ep.sample.task)
    return r_result(ep, judge)


def _first_open(text: str, tag: str) -> int:
    return T._open_re(tag).search(text).start()
