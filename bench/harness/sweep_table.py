"""One table at the end of every multirun (`rvt-bench -m ...`): a line per sweep point (and per
benchmark of a suite point), the overrides that tell the points apart as columns, then each
headline metric with its 95% CI, n and failures.

Each point writes `rvt_point.json` into its Hydra job directory (`note_point`, from the point's
own process, wherever the launcher ran it); `SweepTable.on_multirun_end` (a Hydra callback,
conf/config.yaml hydra.callbacks) reads them from the sweep directory once every point is done,
so it works with the local launchers and with Slurm alike (a shared file system).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from rvt_bench.core import files as checked
from rvt_bench.core.secrets import scrub
from rvt_bench.core.types import RvtBenchError
from rvt_bench.core.units import NA, ci_text, show

log = logging.getLogger(__name__)

POINT_FILE = "rvt_point.json"
_WHERE = ("run.root", "leaderboard.", "hydra.")  # where files go, not what ran


def note_point(output_dir: str | Path, overrides: list[str], runs: list[dict[str, Any]]) -> None:
    """Write <output_dir>/rvt_point.json: {"overrides": the point's overrides, "runs": [{"dataset",
    "split", "run_dir", "metrics": metrics file name or None, "error"}]}."""
    path = Path(output_dir) / POINT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    # a server's error can echo a key; the overrides name secrets by ${oc.env:...} only
    path.write_text(scrub(json.dumps({"overrides": overrides, "runs": runs}, indent=1)), encoding="utf-8")


def _pairs(overrides: list[str]) -> dict[str, str]:
    out = {}
    for o in overrides:
        key, sep, value = o.partition("=")
        if sep and not key.lstrip("+~").startswith(_WHERE):
            out[key.lstrip("+~")] = value
    return out


def read_points(sweep_dir: str | Path) -> list[dict[str, Any]]:
    """The rvt_point.json files of a sweep directory, in job order (subdirectory number)."""
    files = sorted(Path(sweep_dir).glob(f"*/{POINT_FILE}"), key=lambda p: (len(p.parent.name), p.parent.name))
    return [checked.loads(checked.read_text(p, "sweep point"), str(p), duplicates="last") for p in files]


def _metrics(path: Path) -> dict | None:
    """A point's metrics.json, or None when it is missing or cannot be read (the row says not scored)."""
    try:
        body = checked.loads(checked.read_text(path, "metrics file"), str(path), duplicates="last")
    except (OSError, RvtBenchError) as exc:
        if path.exists():
            log.warning("sweep table: %s", exc)
        return None
    return body if isinstance(body, dict) else None


def points_table(points: list[dict[str, Any]], digits: int = 1) -> str:
    """Markdown: | <each override that differs between points> | benchmark | <headline metrics,
    value [95% CI]> | n | failures | run directory |; a point that did not score says why."""
    pairs = [_pairs(p.get("overrides") or []) for p in points]
    keys = list(dict.fromkeys(k for pp in pairs for k in pp))
    varying = [k for k in keys if len({pp.get(k) for pp in pairs}) > 1] or keys
    lines_data, metric_keys = [], []
    for point, pp in zip(points, pairs):
        for run in point.get("runs") or []:
            body = None
            if run.get("metrics"):
                path = Path(run["run_dir"]) / run["metrics"]
                body = _metrics(path)
            if body is not None:
                metric_keys += [k for k in body.get("headline") or [] if k not in metric_keys]
            lines_data.append((pp, run, body))
    head = [*varying, "benchmark", *metric_keys, "n", "failures", "run directory"]
    lines = [f"## sweep: {len(points)} points (values in %, CIDEr as its score; [95% bootstrap CI])", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for pp, run, body in lines_data:
        bench = f"{run.get('dataset')} ({run.get('split')})"
        if body is None:
            why = " ".join(str(run.get("error") or "not scored (shards still running?)").split())
            cells = [NA] * len(metric_keys) + ["", "", why]
        else:
            values, cis = body.get("metrics") or {}, body.get("ci") or {}
            cells = [(show(k, values[k], digits) + (f" {ci_text(cis[k], digits, k)}" if k in cis and cis[k].get("low") is not None
                                                     else "")) if values.get(k) is not None else NA for k in metric_keys]
            cells += [str(body.get("n")), str(body.get("failures")), str(run.get("run_dir"))]
        lines.append("| " + " | ".join([*(pp.get(k, "") for k in varying), bench, *cells]) + " |")
    return "\n".join(lines)


class SweepTable(Callback):
    """Hydra callback: print `points_table` of the sweep when a multirun ends."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        points = read_points(sweep_dir)
        if not points:
            return
        table = scrub(points_table(points))
        (sweep_dir / "points.md").write_text(table + "\n", encoding="utf-8")
        print(f"\n{table}\n(also in {sweep_dir / 'points.md'})", flush=True)
        failed = [r for p in points for r in p.get("runs") or [] if r.get("error")]
        if failed:
            import sys

            # the exit status a single run would have given when every failed point agrees (a missing
            # package: 7 in both), else 2
            codes = {r.get("exit_code", 2) for r in failed}
            print(f"error: {len(failed)} runs of the sweep failed; the table above says why", file=sys.stderr, flush=True)
            sys.exit(codes.pop() if len(codes) == 1 else 2)
