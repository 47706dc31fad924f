"""Judge policy of a run: which LLM judge scores free-text answers (the `judge` config group), and
the metrics.json "judge" block that says how far its verdicts can be trusted (failure rate against
judge.max_failure_rate; a run over it is not published)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rvt_bench.core.records import JudgeVerdict


def make_judge(resolved: dict[str, Any]) -> tuple[Any, float]:
    """(rvt_bench.metrics.judge.Judge or None, judge.max_failure_rate) from the resolved `judge` node
    (rvt_bench.harness.config.JudgeConfig or a subclass; the runner completes a hand-built config without
    one to no judge); the judge cache defaults to <run.root>/.judge_cache."""
    from rvt_bench.metrics.judge import make_judge as build

    cfg = dict(resolved["judge"])
    max_failure_rate = float(cfg.pop("max_failure_rate"))
    # cache_dir: a key of OpenAIJudgeConfig, maybe not of another judge's node
    if cfg["_target_"] is not None and cfg.get("cache_dir") is None:
        cfg["cache_dir"] = str(Path(resolved["run"]["root"]) / ".judge_cache")
    return build(cfg), max_failure_rate


def judge_block(judge: Any, max_failure_rate: float, verdicts: list[JudgeVerdict]) -> dict[str, Any]:
    """metrics.json "judge": {"status": "judge: not configured"} without a judge; else the banner,
    n / n_failed / failure_rate over every judged sample (`verdicts`, from the score records),
    max_failure_rate, publishable, reason (rvt_bench.metrics.judge.judge_summary; unscored = score None)."""
    from rvt_bench.metrics.judge import judge_banner, judge_summary

    if judge is None:
        return {"status": judge_banner(None)}
    summary = judge_summary(verdicts, max_failure_rate)
    if summary["n"] == 0:  # nothing free-text in this dataset: nothing to refuse
        summary.update(publishable=True, reason=None)
    return {"status": judge_banner(judge), **{k: v for k, v in summary.items() if k != "mean"},
            "max_failure_rate": max_failure_rate}
