"""Why each failed SAM 3 Agent sample failed, across runs of the model:

    rvt-bench attribute RUN_DIR [RUN_DIR ...] [--json OUT] [--examples 3]

(Sam3AgentAdapter.attribute, which the command asks.) Each failed sample (a funnel stage failed, or
the result is not correct; rvt_bench.adapters.sam3_agent.funnel) of each run gets one label:
  <stage>:<reason>  the loop stopped where the repository's raises (trace "failure": e.g.
                    tool_call:json, tool_call:first_call, turns:max_generations, reply:backend, reply:empty, sam3:error)
  no_mask_reported  the agent ended with report_no_mask (or an empty selection) on a sample with a target
  wrong_masks       the agent selected masks and they are not the target (the result not correct)
  unsupported       a prediction without the agent's trace (a task it does not answer, an adapter crash)
Prints counts per label and up to `examples` sample ids each; --json writes {"runs", "counts", "samples"}.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from rvt_bench.adapters.dtr1.attribute import AttributionError, _funnels
from rvt_bench.core import files
from rvt_bench.core.types import DatasetFormatError


def label(pred: dict) -> str:
    """The label of one failed prediction (a predictions.jsonl record; module docstring)."""
    trace = pred.get("trace") if isinstance(pred.get("trace"), dict) else {}
    failure = trace.get("failure") if isinstance(trace.get("failure"), dict) else None
    if failure:
        return f"{failure.get('stage')}:{failure.get('reason')}"
    if "calls" not in trace:
        return "unsupported"
    return "no_mask_reported" if pred.get("no_target") else "wrong_masks"


def _predictions(root: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for pred_file in sorted(root.glob("predictions*.jsonl")):
        for number, line in files.lines(pred_file, "predictions file"):
            try:
                pred = files.loads(line, f"{pred_file} line {number}", duplicates="last") if line else None
            except DatasetFormatError:
                continue  # a torn last line: the runner redoes it
            if isinstance(pred, dict) and isinstance(pred.get("sample_id"), str):
                out[pred["sample_id"]] = pred
    return out


def attribute(paths: list[str | Path], examples: int = 3) -> dict[str, Any]:
    """The labels of every run's failed samples; raises AttributionError for a run without its files."""
    counts: Counter = Counter()
    samples: dict[str, dict] = {}
    for path in map(Path, paths):
        if not (path / "scores.jsonl").is_file():
            raise AttributionError(f"{path}: expected a finished run directory with scores.jsonl")
        try:
            funnel, preds = _funnels(path / "scores.jsonl"), _predictions(path)
        except (OSError, DatasetFormatError) as exc:
            raise AttributionError(f"{path}: cannot read the run's files ({exc})") from exc
        for sid, stage in sorted(funnel.items()):
            if stage.get("first_failed") is None:
                continue
            name = label(preds.get(sid, {}))
            counts[name] += 1
            samples[f"{path}::{sid}"] = {"label": name, "first_failed": stage.get("first_failed")}
    return {"runs": [str(p) for p in paths], "counts": dict(counts.most_common()), "samples": samples,
            "examples": examples}


def format_report(result: dict[str, Any]) -> str:
    total = sum(result["counts"].values()) or 1
    lines = [f"SAM 3 Agent failures in {len(result['runs'])} run(s): {sum(result['counts'].values())}"]
    for name, c in result["counts"].items():
        shown = [k.rsplit("::", 1)[-1] for k, s in result["samples"].items() if s["label"] == name][: result["examples"]]
        lines.append(f"  {name:<28} {c:>5}  {100 * c / total:5.1f}%  e.g. {', '.join(shown)}")
    return "\n".join(lines)
