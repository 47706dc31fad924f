"""Publishing policy of a scored run: whether its row may reach the leaderboard (a run that
measures its setup, or whose judge failed too often, may not), the row itself, and the run's
report.html."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from rvt_bench.core.records import sample_counts
from rvt_bench.core.types import PARSE, Prediction, Sample
from rvt_bench.harness import manifest as manifest_mod
from rvt_bench.leaderboards import publish as board
from rvt_bench.leaderboards.row import leaderboard_row

log = logging.getLogger(__name__)


def refusal(metrics: dict[str, Any]) -> str | None:
    """Why a scored run (its metrics.json body) must not reach the leaderboard, or None. A run where
    every sample failed for a reason other than the model's own output (missing prediction files,
    adapter crashes, unreadable data) measures the setup, not the model."""
    if not metrics["judge"].get("publishable", True):
        return f"not published to the leaderboard: {metrics['judge']['reason']} (judge.max_failure_rate)"
    kinds = metrics["failures_by_kind"]
    n, excluded, failures = sample_counts(metrics)
    if n + excluded == 0:
        return (f"not published to the leaderboard: no sample could be scored, all {metrics['data_errors']} have "
                f"data errors (listed in metrics.json 'data_error_samples')")
    if failures == n + excluded and PARSE not in kinds:
        return (f"not published to the leaderboard: all {n + excluded} samples failed ({kinds}), none because of "
                f"the model's output; check the setup (paths, model.root, data)")
    if n == 0:
        return (f"not published to the leaderboard: the protocol's rule leaves out all {excluded} samples "
                f"({metrics.get('excluded')}), so there is no headline to rank")
    return None


def publish(board_dir: str | Path, resolved: dict[str, Any], metrics: dict[str, Any], run_dir: Path,
            protocol: Any) -> tuple[Path | None, str | None]:
    """Upsert the run's leaderboard row into <board_dir>/<dataset>.csv unless `refusal` says no:
    (the leaderboard's path or None, the refusal or None)."""
    refused = refusal(metrics)
    if refused is not None:
        return None, refused
    row = leaderboard_row(resolved, metrics, run_dir, list(protocol.headline),
                          semantic_overrides(resolved.get("_overrides", []) or []))
    return board.upsert(board_dir, resolved["dataset"]["name"], row), None


def semantic_overrides(overrides: list[str]) -> list[str]:
    """The command-line overrides that say what ran (not where files went), secrets redacted: this
    is what tells sweep points apart in the leaderboard."""
    where = ("run.", "leaderboard.", "hydra.", "logger")
    return [o for o in manifest_mod.redact_overrides(overrides) if not o.lstrip("+~").startswith(where)]


def write_report(run_dir: Path, samples: list[Sample], preds: dict[str, Prediction]) -> Path | None:
    """Build <run_dir>/report.html (rvt_bench.harness.report) for a scored run from its samples and
    predictions by id; a failure to build it (a full disk included) is one warning line saying
    whether the previous report is kept, never a failed run. Returns the report's path, None when
    it could not be built."""
    from rvt_bench.harness import report

    try:
        return report.build_report(run_dir, samples=samples, preds=preds)
    except Exception as exc:  # the results are written; the page is a convenience on top of them
        # written whole or not at all (rvt_bench.core.store.atomic_folder, write_atomic): what is there is complete
        kept = ("the previous report.html is kept (it shows an earlier scoring)" if (run_dir / "report.html").exists()
                else "no report.html was written")
        log.warning("report.html not built (%s: %s); %s; the results are in metrics.json; retry with "
                    "rvt-bench report %s", type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "",
                    kept, run_dir)
        return None
