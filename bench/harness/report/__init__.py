"""A static HTML report of one run: `<run_dir>/report.html` plus `<run_dir>/report_images/`.
The runner writes it at the end of every full run (rvt_bench.harness.publish.write_report, run.report);
this rebuilds it:

    python -m rvt_bench.harness.report RUN_DIR [--frames 4] [--dataset-root DIR]

The page (template.html.j2, Jinja2 with autoescaping) holds the results table with 95% CIs, the
run summary, any analytics blocks of metrics.json (funnel, analytics, baseline_empty, warnings), and
every sample: query, frames with GT and prediction overlaid (rvt_bench.harness.visualize), answer, reference
answers, error, and the full trace with the digital twin (<dt_rep>) collapsed. Client-side filters
by task, level, category and failure kind and a sort by score; the filter state lives in the URL
hash (e.g. report.html#task=grounding&sort=asc), so a filtered view can be linked. Opens from disk:
no server, no network.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

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


def _flat(prefix: str, node: Any) -> list[tuple[str, Any]]:
    if isinstance(node, dict):
        return [kv for k, v in node.items() for kv in _flat(f"{prefix}.{k}" if prefix else str(k), v)]
    return [(prefix, node)]


def _scoring_seconds(run_dir: Path) -> float | None:
    """The wall time of the scoring that wrote metrics.json (manifest.json "scoring"), or None."""
    from rvt_bench.core.store import read_run_json
    from rvt_bench.core.types import RunStoreError

    try:
        scoring = read_run_json(run_dir / "manifest.json").get("scoring") or {}
    except (RunStoreError, AttributeError):
        return None
    return scoring.get("seconds") if scoring.get("metrics") == "metrics.json" else None


def build_report(run_dir: str | Path, max_frames: int = 4, dataset_root: str | None = None,
                 samples: list | None = None, preds: dict | None = None) -> Path:
    """Write report.html and report_images/ into `run_dir` (a scored run); returns the html path.
    samples, preds: the run's samples and predictions by sample id when the caller has them (the
    runner, at the end of every run); None loads them again from config.yaml's dataset
    (`dataset_root` if it moved) and the run's prediction files. The latest
    scoring's wall time comes from manifest.json. Raises RunStoreError when the run has no
    metrics.json yet."""
    from hydra.utils import instantiate

    from rvt_bench.core.store import atomic_folder, prediction_files, read_jsonl, read_predictions, read_run_json, write_atomic
    from rvt_bench.core.types import RunStoreError
    from rvt_bench.harness.names import load_run_config

    run_dir = Path(run_dir)
    if not (run_dir / "metrics.json").exists():
        raise RunStoreError(f"{run_dir}: no metrics.json (score the run first)")
    m = read_run_json(run_dir / "metrics.json")
    if samples is None:
        from rvt_bench.loaders.config import loader_kwargs

        cfg = load_run_config(run_dir / "config.yaml")
        kwargs = loader_kwargs(cfg.dataset, root=dataset_root)
        samples = list(instantiate(kwargs, _convert_="all"))
    if preds is None:
        preds = read_predictions(prediction_files(run_dir))
    scores = {r["sample_id"]: r for r in read_jsonl(run_dir / "scores.jsonl")} if (run_dir / "scores.jsonl").exists() else {}
    # report_images/ and report.html are replaced whole or not at all (a full disk leaves the previous ones)
    with atomic_folder(run_dir / IMAGES) as images:
        html = _render(run_dir, m, samples, preds, scores, images, max_frames)
        write_atomic(run_dir / "report.html", html)
    return run_dir / "report.html"


def _render(run_dir: Path, m: dict, samples: list, preds: dict, scores: dict, images: Path, max_frames: int) -> str:
    """report.html's text; every sample's picture written into `images` as it goes."""
    import cv2
    import jinja2

    from rvt_bench.core.units import ci_text, show as _show, unit
    from rvt_bench.harness.summary import format_summary
    from rvt_bench.harness.visualize import render_sample, score_value

    rows = []
    for k, s in enumerate(samples):
        pred, score = preds.get(s.id), scores.get(s.id)
        name = f"{k:05d}_{re.sub(r'[^A-Za-z0-9._-]+', '_', s.id)}.png"
        picture = render_sample(s, pred, score, max_frames)
        ok, png = cv2.imencode(".png", cv2.cvtColor(picture, cv2.COLOR_RGB2BGR))  # in memory: no libpng file errors
        if not ok:
            raise ValueError(f"sample {s.id}: its picture could not be encoded as PNG")
        (images / name).write_bytes(png.tobytes())
        value = score_value(score)
        error = pred.error if pred is not None else {"kind": "missing", "message": "no prediction"}
        rows.append({
            "id": s.id, "task": s.task, "query": s.query, "level": str(s.meta.get("level", "")),
            "category": str(s.meta.get("category", "")), "failure": (error or {}).get("kind", "none") if error else "none",
            "score": value, "score_text": "n/a (corpus-level metric)" if value is None else f"{100 * value:.1f} %",
            "image": f"{IMAGES}/{name}", "answer": pred.text if pred is not None else None,
            "references": list(s.target.answers or []), "error": error, "trace": _trace_parts(pred.trace if pred else None),
        })
    headline = [k for k in m.get("headline") or [] if k in m["metrics"]] or list(m["metrics"])
    cis = m.get("ci") or {}
    results = [{"key": k, "value": _show(k, m["metrics"][k], 1), "ci": ci_text(cis.get(k), 1, k),
                "unit": unit(k), "n": (cis.get(k) or {}).get("n", "")} for k in headline]
    scoring_s = _scoring_seconds(run_dir)
    shown = dict(m)
    if scoring_s is not None and isinstance(m.get("analytics"), dict):  # metrics.json leaves it null: see rundir.note_scoring
        shown["analytics"] = {**m["analytics"], "latency_s": {**(m["analytics"].get("latency_s") or {}), "scoring": scoring_s}}
    blocks = [(name, _flat("", shown[name])) for name in ("funnel", "analytics", "baseline_empty") if shown.get(name)]
    if m.get("warnings"):
        blocks.append(("warnings", [(str(k + 1), w) for k, w in enumerate(m["warnings"])]))
    options = {key: sorted({r[key] for r in rows if r[key]}) for key in ("task", "level", "category")}
    options["failure"] = sorted({r["failure"] for r in rows if r["failure"] != "none"})
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    html = env.get_template(TEMPLATE).render(m=SimpleNamespace(**{"protocol_version": None, **m}), results=results,
                                             summary=format_summary(SimpleNamespace(metrics=m, scoring_s=scoring_s)), blocks=blocks,
                                             samples=rows, options=options)
    return html


def main(argv: list[str] | None = None) -> None:
    import argparse

    from rvt_bench.harness.cli import exit_on_known_errors

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--frames", type=int, default=4, help="frames shown per video sample")
    ap.add_argument("--dataset-root", default=None, help="the dataset's root, if it moved since the run")
    args = ap.parse_args(argv)
    print(exit_on_known_errors(lambda: build_report(args.run_dir, args.frames, args.dataset_root)))
