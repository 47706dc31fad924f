"""`logger=tensorboard`: a run's results as TensorBoard event files (torch.utils.tensorboard, which
needs the `tensorboard` package: pip install "rvt-bench[tensorboard]").

Written to <dir>/<group or "runs">/<dataset>/<model>/<run name>/ (dir default <run.root>/tensorboard),
so `tensorboard --logdir <run.root>/tensorboard` shows every run, a sweep's points side by side
under its group, and the HPARAMS tab compares the points' overrides against their headline metrics.
Scalars (step 0) are metrics.json's values as stored (rvt_bench.harness.loggers.scalars); the
config, the headline table and a samples table are text; up to max_images overlays (the
lowest-scoring samples first) are images. Logging a run again replaces its event files.
"""
from __future__ import annotations

from pathlib import Path

from rvt_bench.harness.loggers import LoggedRun, scalars


class TensorBoardLogger:
    """dir: the event files' root (None: <run.root>/tensorboard); max_images: overlays logged."""

    def __init__(self, dir: str | None = None, max_images: int = 32) -> None:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401  fails here, before the run, without tensorboard

        self.dir = dir
        self.max_images = int(max_images)

    def log_dir(self, run: LoggedRun) -> Path:
        root = Path(self.dir) if self.dir else run.root / "tensorboard"
        m = run.metrics
        return root / (run.group or "runs") / str(m.get("dataset")) / str(m.get("model")) / str(m.get("run_name"))

    def log(self, run: LoggedRun) -> str:
        import yaml
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams

        from rvt_bench.harness.view import headline_rows

        out = self.log_dir(run)
        for old in out.glob("events.out.tfevents.*") if out.is_dir() else []:
            old.unlink()  # this run's earlier logging: one set of values per run
        values = scalars(run.metrics)
        with SummaryWriter(log_dir=str(out)) as writer:
            for key, value in values.items():
                writer.add_scalar(key, value, 0)
            writer.add_text("config", "```yaml\n" + yaml.safe_dump(run.config, sort_keys=False) + "```", 0)
            rows = headline_rows(run.metrics, 2)
            table = ["| metric | value | 95% CI | empty prediction | unit | n |", "|---|---:|---|---:|---|---:|"]
            table += [f"| {r.key} | {r.value_text} | {r.ci_text} | {r.baseline_text} | {r.unit} | {r.n or ''} |" for r in rows]
            writer.add_text("results", "\n".join(table), 0)
            writer.add_text("samples", _samples_markdown(run), 0)
            if run.report is not None:
                writer.add_text("report", f"report.html: {run.report}", 0)
            for row in _worst_first(run)[: self.max_images]:
                writer.add_image(f"samples/{row['id']}", _read_rgb(row["image"]), 0, dataformats="HWC")
            overrides = [o for o in run.config.get("_overrides") or [] if "=" in o]
            hp = {"dataset": str(run.metrics.get("dataset")), "model": str(run.metrics.get("model")),
                  **{o.split("=", 1)[0]: o.split("=", 1)[1] for o in overrides}}
            headline = {r.key: r.value for r in rows if r.value is not None}
            for summary in hparams(hp, headline):
                writer.file_writer.add_summary(summary)
        return str(out)


def _worst_first(run: LoggedRun) -> list[dict]:
    with_image = [r for r in run.samples if r["image"] is not None]
    return sorted(with_image, key=lambda r: (r["score"] is None, r["score"] if r["score"] is not None else 0.0))


def _read_rgb(path: Path):
    import cv2

    return cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB)


def _samples_markdown(run: LoggedRun) -> str:
    lines = ["| sample | task | level | category | score (%) | failure | query | answer |", "|---|---|---|---|---:|---|---|---|"]
    for r in run.samples:
        score = "n/a" if r["score"] is None else f"{100 * r['score']:.1f}"
        cells = [r["id"], r["task"], r["level"], r["category"], score, r["failure"], r["query"], r["answer"]]
        lines.append("| " + " | ".join("" if c is None else str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)
