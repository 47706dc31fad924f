"""A static HTML report of one run: `<run_dir>/report.html` plus `<run_dir>/report_images/`.
The runner writes it at the end of every full run (rvt_bench.harness.publish.write_report, run.report);
this rebuilds it:

    rvt-bench report RUN_DIR [--frames 4] [--dataset-root DIR]

The page (template.html.j2, Jinja2 with autoescaping) starts with figures: the headline table (value,
95% CI, empty-prediction baseline, unit, n), the model's funnel chart and measures (its
AdapterReport), a breakdown chart with CI whiskers and baselines (breakdowns.py) and a per-sample
score histogram (charts.py: matplotlib, inline SVG); the samples follow within one screen height:
query, frames with GT and prediction overlaid (rvt_bench.harness.visualize), answer, reference
answers, error, and the full trace with the digital twin (<dt_rep>) collapsed. Client-side filters
by task, level, category and failure kind and a sort by score; the filter state lives in the URL
hash (e.g. report.html#task=grounding&sort=asc), so a filtered view can be linked. One file with its
images beside it: no server, no network. Every number carries its unit; nothing is a raw value.
"""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import markupsafe

log = logging.getLogger(__name__)

TEMPLATE = "template.html.j2"
IMAGES = "report_images"


def _trace_parts(trace: Any) -> list[dict[str, Any]]:
    """The trace as text parts, the twin (<dt_rep>...</dt_rep>) parts marked to be collapsed."""
    if trace is None:
        return []
    rollout = trace.get("rollout") if isinstance(trace, dict) else trace
    rest = {k: v for k, v in trace.items() if k != "rollout"} if isinstance(trace, dict) else {}
    parts: list[dict[str, Any]] = []
    if isinstance(rollout, str):
        for k, chunk in enumerate(re.split(r"(<dt_rep>.*?</dt_rep>)", rollout, flags=re.S)):
            if chunk:
                parts.append({"twin": k % 2 == 1, "text": chunk})
    elif rollout is not None:
        parts.append({"twin": False, "text": json.dumps(rollout, indent=1, default=str)})
    if rest:
        parts.append({"twin": False, "text": json.dumps(rest, indent=1, default=str)})
    return parts


def _prediction(run_dir: Path) -> dict | None:
    """The latest prediction's wall time (manifest.json "prediction": {"seconds", "samples"}), or None."""
    from rvt_bench.core.store import read_run_json
    from rvt_bench.core.types import RunStoreError

    try:
        found = read_run_json(run_dir / "manifest.json").get("prediction")
    except (RunStoreError, AttributeError):
        return None
    return found if isinstance(found, dict) else None


def _scoring_seconds(run_dir: Path) -> float | None:
    """The wall time of the scoring that wrote metrics.json (manifest.json "scoring"), or None."""
    from rvt_bench.core.store import read_run_json
    from rvt_bench.core.types import RunStoreError

    try:
        scoring = read_run_json(run_dir / "manifest.json").get("scoring") or {}
    except (RunStoreError, AttributeError):
        return None
    return scoring.get("seconds") if scoring.get("metrics") == "metrics.json" else None


def _paper_tables(m: dict[str, Any]) -> dict[str, str] | None:
    """The run in its benchmark's paper layout with the published rows (leaderboards/tables.py), as
    markdown and LaTeX; None for a benchmark without a layout."""
    from rvt_bench.leaderboards.paper import paper_rows
    from rvt_bench.leaderboards.tables import has_layout, paper_table

    if not has_layout(m.get("dataset")):
        return None
    published = paper_rows(m["dataset"])
    return {fmt: paper_table(m, fmt, published) for fmt in ("markdown", "latex")}


def _table_blocks(tables: dict[str, str] | None) -> list[dict[str, Any]]:
    """The paper tables as the page's collapsible blocks ({"title", "html"}), text kept for pasting with
    its control characters escaped (printable_text: the block is Markup, which the page's finalize skips,
    and a published-rows CSV is data)."""
    from rvt_bench.core.printable import printable_text

    if not tables:
        return []
    titles = {"markdown": "Paper table (the benchmark's published layout, markdown)", "latex": "Paper table (LaTeX, booktabs)"}
    return [{"title": titles[fmt], "html": markupsafe.Markup("<pre>{}</pre>").format(printable_text(text))}
            for fmt, text in tables.items()]


def _protocol(cfg: Any) -> Any | None:
    """The run's protocol from its config (for breakdown intervals); None when it cannot be built."""
    from hydra.utils import instantiate

    try:
        return instantiate(cfg.dataset.protocol)
    except Exception as exc:  # noqa: BLE001  the page draws the bars without intervals then
        log.warning("report.html: breakdowns without intervals (the protocol could not be built: %s)", exc)
        return None


def _details_tables(details: dict[str, Any]) -> list[dict[str, Any]]:
    """An adapter's structured extras (AdapterReport.details) as tables: {name: {row: value}} as
    two columns, {name: {row: {column: value}}} as a matrix; anything else as JSON text."""
    out = []
    for name, node in details.items():
        title = str(name).replace("_", " ")
        if isinstance(node, dict) and node and all(isinstance(v, dict) for v in node.values()):
            cols = sorted({c for v in node.values() for c in v})
            out.append({"title": title, "head": ["", *cols],
                        "rows": [[str(r), *[str(v.get(c, 0)) for c in cols]] for r, v in node.items()]})
        elif isinstance(node, dict):
            out.append({"title": title, "head": [], "rows": [[str(k), str(v)] for k, v in node.items()]})
        else:
            out.append({"title": title, "head": [], "rows": [[json.dumps(node, default=str)]]})
    return out


MAX_PICTURED = 500  # samples shown with pictures on the page by default; every sample is in samples.csv
CSV = "samples.csv"  # report_images/samples.csv: one line per sample


def build_report(run_dir: str | Path, max_frames: int = 4, dataset_root: str | None = None,
                 samples: list | None = None, preds: dict | None = None, max_samples: int = MAX_PICTURED) -> Path:
    """Write report.html and report_images/ into `run_dir` (a scored run); returns the html path.
    samples, preds: the run's samples and predictions by sample id when the caller has them (the
    runner, at the end of every run); None loads them again from config.yaml's dataset
    (`dataset_root` if it moved) and the run's prediction files. The latest
    scoring's wall time comes from manifest.json. max_samples: at most this many samples get a
    picture and a panel on the page (choose_pictured: failures, the worst, an even spread; 0 =
    all); every sample is listed in report_images/samples.csv. Raises RunStoreError when the run
    has no metrics.json yet, ValueError when max_samples < 0."""
    if max_samples < 0:
        raise ValueError(f"--samples must be >= 0 (0: all), got {max_samples}")
    from hydra.utils import instantiate

    from rvt_bench.core.records import RunMetrics
    from rvt_bench.core.store import atomic_folder, prediction_files, read_jsonl, read_predictions, read_run_json, write_atomic
    from rvt_bench.core.types import RunStoreError
    from rvt_bench.harness.names import load_run_config

    run_dir = Path(run_dir)
    if not (run_dir / "metrics.json").exists():
        raise RunStoreError(f"{run_dir}: no metrics.json (score the run first)")
    # read through the record, so a metrics.json of an older version shows its report as today's
    m = RunMetrics.from_json(read_run_json(run_dir / "metrics.json")).to_json()
    cfg = load_run_config(run_dir / "config.yaml") if (run_dir / "config.yaml").exists() else None
    if samples is None:
        from rvt_bench.loaders.config import loader_kwargs

        if cfg is None:
            raise RunStoreError(f"{run_dir}: no config.yaml (not a run directory)")
        kwargs = loader_kwargs(cfg.dataset, root=dataset_root)
        samples = list(instantiate(kwargs, _convert_="all"))
    if preds is None:
        preds = read_predictions(prediction_files(run_dir))
    records = list(read_jsonl(run_dir / "scores.jsonl")) if (run_dir / "scores.jsonl").exists() else []
    # report_images/ and report.html are replaced whole or not at all (a full disk leaves the previous ones)
    with atomic_folder(run_dir / IMAGES) as images:
        found = prediction_files(run_dir)
        preds_path = ", ".join(str(run_dir / Path(p).name) for p in found) if found else "none"
        model_root = cfg.model.get("root") if cfg is not None and "model" in cfg else None
        if model_root:  # precomputed predictions: the submission they were read from
            preds_path += f" (read from {model_root})"
        html = _render(run_dir, m, cfg, samples, preds, records, images, max_frames, preds_path, max_samples)
        write_atomic(run_dir / "report.html", html)  # scrubbed of secrets, as every run file
    return run_dir / "report.html"


def _drawn(sample: Any, pred: Any) -> list[str]:
    """What the sample's picture draws, as the page's legend names it: "ground truth outline",
    "ground truth boxes", "prediction mask", "prediction boxes", "ignored pixels (azure hatching)"
    (the picture itself carries no text: the page says it)."""
    out = []
    if any(m is not None for m in sample.target.masks or []):
        out.append("ground truth outline")
    if any(sample.target.boxes or []):
        out.append("ground truth boxes")
    if pred is not None and any(m is not None for m in pred.masks or []):
        out.append("prediction mask")
    if pred is not None and any(pred.boxes or []):
        out.append("prediction boxes")
    if any(m is not None for m in sample.target.ignore or []):
        out.append("ignored pixels (azure hatching)")
    return out


def _board_dir(cfg: Any) -> str | None:
    """The run's leaderboard folder (leaderboard.dir) for the summary's render command; None when
    the config has none (a report rebuilt without it)."""
    board = cfg.get("leaderboard") if cfg is not None and hasattr(cfg, "get") else None
    return str(board.get("dir")) if board is not None and board.get("dir") else None


def _provenance(run_dir: Path, cfg: Any, preds_path: str) -> list[str]:
    """The header's provenance line: when the run started and this page was built (UTC), the git
    sha, the data root and the predictions."""
    import datetime as _dt

    from rvt_bench.core.store import read_run_json

    manifest_path = run_dir / "manifest.json"
    manifest = read_run_json(manifest_path) if manifest_path.exists() else {}
    root = ""
    if cfg is not None and "dataset" in cfg:
        root = str(cfg.dataset.get("root") or cfg.dataset.get("hf_dataset") or "")
    built = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return [f"run started {manifest.get('started_utc', 'unknown')} · report built {built} · git "
            f"{manifest.get('git_sha', 'unknown')} · data root {root or 'unknown'} · predictions {preds_path}"]


def _render(run_dir: Path, m: dict, cfg: Any, samples: list, preds: dict, records: list[dict], images: Path,
            max_frames: int, preds_path: str = "", max_samples: int = MAX_PICTURED) -> str:
    """report.html's text; the chosen samples' pictures written into `images` as it goes, and
    `images`/samples.csv listing every sample."""
    import cv2
    import jinja2

    from rvt_bench.core.records import ScoreRecord, excluded_reasons, submission_of
    from rvt_bench.harness.report import charts
    from rvt_bench.harness.report.breakdowns import breakdown_bars
    from rvt_bench.harness.rundir import sandbox_of
    from rvt_bench.harness.summary import format_summary
    from rvt_bench.harness.view import adapter_report, companion_keys, headline_rows, measure_text, resampling_groups
    from rvt_bench.harness.visualize import render_sample, score_value

    scores = {r["sample_id"]: r for r in records}
    rows = []
    per_task: dict[str, list[float]] = {}
    # a sample the protocol's rule leaves out of the headline has no score here: never drawn, counted or listed as 0
    excluded = excluded_reasons(m)
    values = [None if s.id in excluded else score_value(scores.get(s.id)) for s in samples]
    failed = [_failure(preds.get(s.id)) != "none" for s in samples]
    chosen = choose_pictured(values, failed, max_samples)
    listing = [["index", "sample_id", "task", "level", "category", "failure", "score", "excluded", "picture"]]
    for k, s in enumerate(samples):
        value = values[k]
        if value is not None:
            per_task.setdefault(s.task, []).append(value)
        name = image_name(k, s.id)
        listing.append([k, s.id, s.task, _text(s.meta.get("level")), _text(s.meta.get("category")),
                        _failure(preds.get(s.id)), "" if value is None else f"{value:.6f}", excluded.get(s.id, ""),
                        name if k in chosen else ""])
    for k, s in ((k, samples[k]) for k in sorted(chosen)):
        pred, score = preds.get(s.id), scores.get(s.id)
        name = image_name(k, s.id)
        value = values[k]
        picture = render_sample(s, pred, score, max_frames, header=False)  # the page says the rest as text
        ok, png = cv2.imencode(".png", cv2.cvtColor(picture, cv2.COLOR_RGB2BGR))  # in memory: no libpng file errors
        if not ok:
            raise ValueError(f"sample {s.id}: its picture could not be encoded as PNG")
        (images / name).write_bytes(png.tobytes())
        error = pred.error if pred is not None else {"kind": "missing", "message": "no prediction"}
        drawn = _drawn(s, pred)
        rows.append({
            "declared": pred.task if pred is not None and pred.task else "", "drawn": drawn,
            "text_task": not (s.target.masks or s.target.boxes),
            "id": s.id, "task": s.task, "query": s.query, "level": _text(s.meta.get("level")),
            "card": s.meta.get("card") if isinstance(s.meta.get("card"), str) else "",
            "category": _text(s.meta.get("category")), "failure": (error or {}).get("kind", "none") if error else "none",
            "score": value, "excluded": excluded.get(s.id, ""),
            "score_text": (f"none: excluded, {excluded[s.id]}" if s.id in excluded else
                           "n/a (corpus-level metric)" if value is None else f"{100 * value:.1f} %"),
            "image": f"{IMAGES}/{name}", "answer": pred.text if pred is not None else None,
            "no_target": bool(pred is not None and pred.no_target),
            "no_target_score": pred.no_target_score if pred is not None else None,
            "references": list(s.target.answers or []), "error": error, "trace": _trace_parts(pred.trace if pred else None),
        })
    _write_listing(images / CSV, listing)
    scoring_s = _scoring_seconds(run_dir)
    sandbox = sandbox_of(run_dir)
    report = adapter_report(m)
    protocol = _protocol(cfg) if cfg is not None and records else None
    boot = (cfg.run.bootstrap if cfg is not None and "run" in cfg and "bootstrap" in cfg.run else {}) or {}
    typed = [ScoreRecord.from_json(r) for r in records] if protocol is not None else []  # the protocol defines their kinds
    bars = breakdown_bars(m, protocol, typed, int(boot.get("B", 1000)), int(boot.get("seed", 0)))
    submission = submission_of(m)  # a run without GT: what it produced and how to submit it, no metrics
    if submission is not None:
        server = submission.get("server") or _config_value(cfg, "dataset.submission.server") or ""
        submission = {**submission, "command": str(submission["command"]).replace("RUN_DIR", str(run_dir)),
                      "server": str(server)}
    figures = {"funnel": charts.funnel_chart(report) if report is not None and submission is None else None,
               "breakdown": charts.breakdown_chart(bars), "scores": charts.score_histogram(per_task)}
    measures = [{"label": x.label, "value": measure_text(x)} for x in (report.measures if report else [])]
    prediction = _prediction(run_dir)
    for x in measures:  # the report's seconds are per request, summed: they overlap under concurrency
        if x["value"].endswith(" s"):
            x["label"] += " (summed per request)"
    if prediction is not None and isinstance(prediction.get("seconds"), (int, float)):
        finished = f", finished {prediction['finished_utc']}" if prediction.get("finished_utc") else ""
        measures.append({"label": f"prediction wall time ({prediction.get('samples', '?')} samples{finished})",
                         "value": f"{prediction['seconds']:.1f} s"})
    if scoring_s is not None:
        measures.append({"label": "scoring wall time", "value": f"{scoring_s:.1f} s"})
    options = {key: sorted({r[key] for r in rows if r[key]}) for key in ("task", "level", "category")}
    options["failure"] = sorted({r["failure"] for r in rows if r["failure"] != "none"})
    # autoescape: data's < > & (a trace's </execute>, an answer's <answer>) show as text;
    # finalize: its control characters (\x1b, \x00, \r) show as their escapes, never raw
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent), autoescape=True,
                             undefined=jinja2.StrictUndefined, finalize=_visible)
    header_lines = _provenance(run_dir, cfg, preds_path)
    results = headline_rows(m, 1, [r.key for r in headline_rows(m)] + companion_keys(m))  # both numbers of a variant
    html = env.get_template(TEMPLATE).render(
        m=SimpleNamespace(**{"protocol_version": None, "partial": None, "judge": None, "warnings": [], "data_errors": 0, **m}), results=results, report=report,
        ci_methods=resampling_groups([(r.key, r.resampled) for r in results]),
        figures={k: (markupsafe.Markup(v) if v else None) for k, v in figures.items()}, measures=measures,
        details=_details_tables(report.details) if report is not None else [],
        # one line each under the title (the run's sandbox mode...), and paper-layout results tables
        # ({"title", "html"}) in the results card: slots for what other parts of the harness report
        header_lines=header_lines, tables=[] if submission else _table_blocks(_paper_tables(m)), sandbox=sandbox,
        submission=submission,
        summary=format_summary(SimpleNamespace(metrics=m, scoring_s=scoring_s, sandbox=sandbox, prediction=prediction,
                                               board_dir=_board_dir(cfg))),
        scored=sum(len(v) for v in per_task.values()), samples=rows, options=options, total=len(samples),
        excluded=[{"id": k, "reason": v} for k, v in excluded.items()],
        listing=f"{IMAGES}/{CSV}")
    return html


def _config_value(cfg: Any, key: str) -> Any:
    """cfg's value at dotted `key`, None when cfg is None or has none there."""
    from omegaconf import OmegaConf

    return None if cfg is None else OmegaConf.select(cfg, key, default=None)


def _visible(value: Any) -> Any:
    """A value the page prints: text with its control characters as escapes (line breaks and tabs
    kept: rvt_bench.core.printable.printable_text); markup of ours (the charts) and non-text as they are."""
    from rvt_bench.core.printable import printable_text

    return printable_text(value) if isinstance(value, str) and not isinstance(value, markupsafe.Markup) else value


def _failure(pred: Any) -> str:
    """A sample's failure kind as the filters show it: "none", its error's kind, or "missing"."""
    if pred is None:
        return "missing"
    return (pred.error or {}).get("kind", "none") if pred.error else "none"


def choose_pictured(values: list[float | None], failed: list[bool], limit: int) -> set[int]:
    """The indices of the samples that get a picture: all when limit is 0 or covers them, else up
    to limit: the failures (a third of it at most, in dataset order), the worst-scoring (a third),
    then an even spread over the rest in dataset order."""
    n = len(values)
    if limit == 0 or n <= limit:
        return set(range(n))
    chosen: set[int] = set()
    third = max(1, limit // 3)
    chosen.update([k for k in range(n) if failed[k]][:third])
    scored = sorted((v, k) for k, v in enumerate(values) if v is not None and k not in chosen)
    chosen.update(k for _, k in scored[:min(third, limit - len(chosen))])
    rest = [k for k in range(n) if k not in chosen]
    left = limit - len(chosen)
    if left > 0 and rest:
        step = len(rest) / left
        chosen.update(rest[min(len(rest) - 1, int(j * step))] for j in range(left))
    return chosen


def _write_listing(path: Path, rows: list[list[Any]]) -> None:
    import csv
    import io

    from rvt_bench.core.csvcells import guard_rows, line_end

    buf = io.StringIO()
    end = line_end(cell for row in rows for cell in row)
    csv.writer(buf, lineterminator=end).writerows(guard_rows(rows))  # a sample id "=..." is text to a spreadsheet
    path.write_bytes(buf.getvalue().encode("utf-8"))


def image_name(index: int, sample_id: str) -> str:
    """The overlay's file name in report_images/ of the sample at `index` (dataset order)."""
    return f"{index:05d}_{re.sub(r'[^A-Za-z0-9._-]+', '_', sample_id)}.png"


def _text(value: Any) -> str:
    """A meta value as the filters show it; "" for a missing one."""
    return "" if value is None else str(value)


def main(argv: list[str] | None = None) -> None:
    import argparse

    from rvt_bench.harness.cli import exit_on_known_errors

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--frames", type=int, default=4, help="frames shown per video sample")
    ap.add_argument("--dataset-root", default=None, help="the dataset's root, if it moved since the run")
    ap.add_argument("--samples", type=int, default=MAX_PICTURED, metavar="N",
                    help=f"at most N samples with pictures on the page: failures, the worst, an even spread "
                         f"(default {MAX_PICTURED}; 0 = all); every sample is listed in {IMAGES}/{CSV}")
    args = ap.parse_args(argv)
    if args.samples < 0:
        ap.error("--samples must be >= 0 (0: all)")
    print(exit_on_known_errors(lambda: build_report(args.run_dir, args.frames, args.dataset_root, max_samples=args.samples)))
