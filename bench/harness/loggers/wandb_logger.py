"""`logger=wandb`: a run's results as a Weights & Biases run (pip install "rvt-bench[wandb]").

One W&B run per run directory (its id is derived from the directory, so logging the run again
updates the same W&B run); a sweep's points share one group. Logged: the resolved config (secrets
redacted), metrics.json's numbers as stored in the summary and at step 0 (rvt_bench.harness.loggers.scalars),
the headline table (value, CI, empty-prediction baseline, unit, n), the funnel as a table, a
table of every sample with its overlay (up to max_images, the lowest-scoring first), and
report.html with report_images/ as an artifact of type "report". `mode`: "offline" writes the
run under <dir>/wandb/ without network (`wandb sync` uploads it later); None leaves it to wandb
(WANDB_MODE, the login).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from rvt_bench.harness.loggers import LoggedRun, scalars


class WandbLogger:
    """project, entity, group (None: the sweep's), tags, mode ("online" | "offline" | "disabled" |
    None), dir (None: run.root), max_images: W&B's own settings of wandb.init, with those defaults."""

    def __init__(self, project: str = "rvt-bench", entity: str | None = None, group: str | None = None,
                 tags: list[str] | None = None, mode: str | None = None, dir: str | None = None,
                 max_images: int = 64) -> None:
        import wandb  # noqa: F401  fails here, before the run, without wandb

        self.project, self.entity, self.group = project, entity, group
        self.tags, self.mode, self.dir, self.max_images = list(tags or []), mode, dir, int(max_images)

    def log(self, run: LoggedRun) -> str:
        import wandb

        from rvt_bench.harness.view import adapter_report, headline_rows

        where = Path(self.dir) if self.dir else run.root
        where.mkdir(parents=True, exist_ok=True)
        run_id = hashlib.sha256(str(run.run_dir.resolve()).encode()).hexdigest()[:16]
        tags = [*self.tags, *(["partial"] if run.metrics.get("partial") else [])]
        values = scalars(run.metrics)
        tracker = wandb.init(project=self.project, entity=self.entity, group=self.group or run.group, name=run.name,
                             id=run_id, resume="allow", dir=str(where), config=run.config, tags=tags, mode=self.mode,
                             job_type="eval", reinit="finish_previous")
        try:
            tracker.log(values, step=0)
            tracker.summary.update(values)
            rows = headline_rows(run.metrics, 2)
            tracker.log({"results": wandb.Table(
                columns=["metric", "value", "ci_low", "ci_high", "empty_prediction", "unit", "n"],
                data=[[r.key, r.value, r.low, r.high, r.baseline, r.unit, r.n] for r in rows])}, step=0)
            report = adapter_report(run.metrics)
            if report is not None and report.stages:
                tracker.log({"funnel": wandb.Table(columns=["stage", "label", "reached"],
                                                   data=[[s.key, s.label, s.reached] for s in report.stages])}, step=0)
            tracker.log({"samples": self._samples_table(run)}, step=0)
            if run.report is not None:
                art = wandb.Artifact(f"report-{run_id}", type="report", description=f"report.html of {run.name}")
                art.add_file(str(run.report))
                images = run.report.parent / "report_images"
                if images.is_dir():
                    art.add_dir(str(images), name="report_images")
                tracker.log_artifact(art)
            return str(tracker.dir) if self.mode == "offline" or tracker.settings.mode == "offline" else str(tracker.url)
        finally:
            tracker.finish()

    def _samples_table(self, run: LoggedRun) -> Any:
        import wandb

        with_image = sorted((r for r in run.samples if r["image"] is not None),
                            key=lambda r: (r["score"] is None, r["score"] if r["score"] is not None else 0.0))
        pictured = {r["id"] for r in with_image[: self.max_images]}
        table = wandb.Table(columns=["sample", "task", "level", "category", "score", "failure", "query", "answer", "overlay"])
        for r in run.samples:
            image = wandb.Image(str(r["image"])) if r["id"] in pictured else None
            table.add_data(r["id"], r["task"], None if r["level"] is None else str(r["level"]), r["category"], r["score"],
                           r["failure"], r["query"], r["answer"], image)
        return table
