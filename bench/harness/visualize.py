"""Pictures of a run: ground truth against prediction, per sample, to see why a model failed.

    rvt-bench visualize runs/demo/dtr1/<run_name>              # every sample
    rvt-bench visualize runs/demo/dtr1/<run_name> --worst 10   # the 10 lowest-scoring
    rvt-bench visualize RUN_DIR --ids image/coffee_cup --frames 4

Writes `<run_dir>/overlays/<sample id>.png`: one panel per shown frame (frames where the GT or the
prediction is non-empty, the worst by per-frame J or IoU among them), GT mask filled green and GT
boxes drawn green, prediction filled magenta (translucent) with a magenta-on-black outline, boxes
alike, ignore pixels hatched azure (visible on grayscale frames too); the header gives the query,
the sample's score, its error if it failed, the answer, the reference answers and a legend. `--worst N` picks the N lowest-scoring samples of each task
among the samples that have a per-sample score (corpus-scored text samples have none). Reads the run's config.yaml (for the dataset) and its run files; writes nothing else.
"""
from __future__ import annotations

import argparse
import re
import textwrap
from pathlib import Path
from typing import Iterable

import cv2
import numpy as np
from hydra.utils import instantiate

from rvt_bench.harness.names import load_run_config
from rvt_bench.core import masks
from rvt_bench.core.frames import read_frame
from rvt_bench.core.records import ScoreRecord, excluded_reasons
from rvt_bench.core.store import prediction_files, read_jsonl, read_predictions, read_run_json, write_atomic
from rvt_bench.core.types import Prediction, Sample
import rvt_bench.metrics  # noqa: F401,E402  (defines the built-in kinds of score values that score_value reads)
from rvt_bench.metrics.units.box_iou import BoxValues
from rvt_bench.metrics.units.video_jf import VideoJFValues

GT_RGB = (40, 200, 60)
GT_OUTLINE_RGB = (0, 255, 0)  # the GT's outline: pure green, drawn under the prediction's outline
PRED_RGB = (255, 0, 255)  # magenta: rarely a colour of the scene itself
IGNORE_RGB = (0, 170, 255)  # azure hatching: a grey fill vanishes on grayscale frames
HATCH_PX = 4  # stripe width of the ignore hatching, in frame pixels
OUTLINE_RGB = (0, 0, 0)  # drawn under the prediction's outline: visible on light and on magenta-ish scenes
PRED_ALPHA = 0.35  # the prediction's fill: the scene stays visible through it
PANEL_HEIGHT = 360
FONT_SCALE = 0.6   # captions at about 14 px, readable at the report's size
LINE_PX = 22       # header line height


def _nonempty(rle: dict | None) -> bool:
    return rle is not None and masks.area(rle) > 0


def _frame_values(score: dict | None, n: int) -> list[float] | None:
    """Per-frame quality of a scored sample (J per frame of a video mask, IoU per frame of a box
    tube), None when the record has none of length n."""
    if not score:
        return None
    record = ScoreRecord.from_json(score)
    video, box = record.values.get(VideoJFValues.kind), record.values.get(BoxValues.kind)
    for values in (video.frames.get("J") if isinstance(video, VideoJFValues) else None,
                   box.frame_ious if isinstance(box, BoxValues) else None):
        if isinstance(values, list) and len(values) == n and all(isinstance(v, (int, float)) for v in values):
            return [float(v) for v in values]
    return None


def choose_frames(sample: Sample, pred: Prediction | None, score: dict | None, max_frames: int) -> list[int]:
    """Up to `max_frames` frame indices (sorted) that show the answer: half of them (at least one)
    evenly spaced among the frames where the prediction is non-empty, the worst frame by per-frame
    J (videos) or IoU (box tubes) among the frames where the GT or the prediction is, and the rest
    evenly spaced among those (all frames when no frame has either)."""
    n = sample.num_frames
    t = sample.target

    def predicted(k: int) -> bool:
        return bool(pred is not None and ((pred.masks and k < len(pred.masks) and _nonempty(pred.masks[k]))
                                          or (pred.boxes and k < len(pred.boxes) and pred.boxes[k])))

    def annotated(k: int) -> bool:
        return bool((t.masks and k < len(t.masks) and _nonempty(t.masks[k])) or (t.boxes and k < len(t.boxes) and t.boxes[k]))

    answered = [k for k in range(n) if predicted(k)]
    candidates = [k for k in range(n) if predicted(k) or annotated(k)] or list(range(n))
    picks: set[int] = set(_spaced(answered, max(1, max_frames // 2)))
    values = _frame_values(score, n) if n > 1 else None
    if values is not None and len(picks) < max_frames:
        picks.add(min(candidates, key=lambda k: (values[k], k)))
    for k in _spaced(candidates, max_frames):
        if len(picks) >= max_frames:
            break
        picks.add(k)
    return sorted(picks)


def _fits(rle: dict | None, h: int, w: int) -> bool:
    """Whether an RLE can be drawn on an (h, w) frame: present and of that size (a sample whose GT has
    another size failed as a data error; its picture shows the frame without it)."""
    try:
        return rle is not None and [int(v) for v in rle["size"]] == [h, w]
    except (KeyError, TypeError, ValueError):
        return False


def _box_pixels(box: object, h: int, w: int) -> tuple[int, int, int, int] | None:
    """A box [x1, y1, x2, y2] as OpenCV's integer corners, clipped to 16 frame sides around the frame;
    None when it is not four finite numbers (a NaN coordinate, which int() refuses)."""
    try:
        values = [float(v) for v in box][:4]  # type: ignore[union-attr]
    except (TypeError, ValueError, OverflowError):
        return None
    if len(values) < 4 or not all(np.isfinite(values)):
        return None
    span = 16 * max(h, w)
    x1, y1, x2, y2 = (int(round(min(max(v, -span), span))) for v in values)
    return x1, y1, x2, y2


def _spaced(frames: list[int], count: int) -> list[int]:
    """`count` of `frames` evenly spaced, first and last included."""
    if not frames or count < 1:
        return []
    return [frames[int(i)] for i in np.unique(np.linspace(0, len(frames) - 1, min(count, len(frames))).round())]


def render_sample(sample: Sample, pred: Prediction | None, score: dict | None = None, max_frames: int = 6,
                  header: bool = True) -> np.ndarray:
    """(H, W, 3) uint8 RGB picture: up to `max_frames` frames chosen by choose_frames side by side,
    each scaled to PANEL_HEIGHT px high, with GT (green fill and its own outline, green boxes),
    prediction (magenta fill at PRED_ALPHA with a magenta-on-black outline, boxes alike), ignore
    (azure hatching), and, with `header`, a header: query, score, error, answer, references and a
    legend (report.html passes header=False: its page shows all that as text)."""
    t_idx = choose_frames(sample, pred, score, max_frames)
    panels = [_panel(sample, pred, int(t)) for t in t_idx]
    strip = np.concatenate(panels, axis=1)
    if not header:
        return strip
    header = _header(sample, pred, score, strip.shape[1])
    return np.concatenate([header, strip], axis=0)


def _panel(sample: Sample, pred: Prediction | None, t: int) -> np.ndarray:
    frame = read_frame(sample.frames[t]).astype(np.float32)
    h, w = frame.shape[:2]
    ignore = sample.target.ignore[t] if sample.target.ignore and t < len(sample.target.ignore) else None
    ignore = ignore if _fits(ignore, h, w) else None
    if ignore is not None:
        yy, xx = np.mgrid[:h, :w]
        m = masks.decode(ignore) & (((xx + yy) // HATCH_PX) % 2 == 0)
        frame[m] = 0.2 * frame[m] + 0.8 * np.array(IGNORE_RGB, np.float32)
    gt = sample.target.masks[t] if sample.target.masks and t < len(sample.target.masks) else None
    gt = gt if _fits(gt, h, w) else None  # a GT of another size: its sample's data error says so; not drawn
    if gt is not None:
        m = masks.decode(gt)
        frame[m] = 0.55 * frame[m] + 0.45 * np.array(GT_RGB, np.float32)
    pred_rle = pred.masks[t] if pred is not None and pred.masks and t < len(pred.masks) else None
    pred_mask = masks.decode(pred_rle).astype(bool) if pred_rle is not None else None
    if pred_mask is not None and pred_mask.shape != (h, w):  # a mask at the evaluator's size (gRefCOCO's 480 x 480)
        pred_mask = cv2.resize(pred_mask.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST) > 0
    if pred_mask is not None:
        frame[pred_mask] = (1 - PRED_ALPHA) * frame[pred_mask] + PRED_ALPHA * np.array(PRED_RGB, np.float32)
    out = np.ascontiguousarray(frame.astype(np.uint8))
    thickness = max(2, round(2 * h / PANEL_HEIGHT))
    if gt is not None:  # the GT's own outline, over the prediction's fill: visible where both lie
        # wider than the prediction's black-and-magenta outline drawn over it (thickness + 2), so a
        # green rim stays visible on each side even where the prediction's edge is the GT's edge
        contours, _ = cv2.findContours(masks.decode(gt).astype(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_NONE)
        cv2.drawContours(out, contours, -1, GT_OUTLINE_RGB, thickness + 6)
    gt_boxes = sample.target.boxes[t] if sample.target.boxes and t < len(sample.target.boxes) and sample.target.boxes[t] else []
    for box in filter(None, (_box_pixels(b, h, w) for b in gt_boxes)):
        x1, y1, x2, y2 = box
        cv2.rectangle(out, (x1, y1), (x2, y2), GT_RGB, thickness + 1)
    if pred_mask is not None:
        contours, _ = cv2.findContours(pred_mask.astype(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_NONE)
        cv2.drawContours(out, contours, -1, OUTLINE_RGB, thickness + 2)
        cv2.drawContours(out, contours, -1, PRED_RGB, thickness)
    pred_boxes = pred.boxes[t] if pred is not None and pred.boxes and t < len(pred.boxes) and pred.boxes[t] else []
    for box in filter(None, (_box_pixels(b, h, w) for b in pred_boxes)):
        x1, y1, x2, y2 = box
        cv2.rectangle(out, (x1, y1), (x2, y2), OUTLINE_RGB, thickness + 2)
        cv2.rectangle(out, (x1, y1), (x2, y2), PRED_RGB, thickness)
    scale = PANEL_HEIGHT / h
    out = cv2.resize(out, (max(1, round(w * scale)), PANEL_HEIGHT), interpolation=cv2.INTER_AREA)
    if sample.modality == "video":
        _label(out, frame_label(sample, t), (4, PANEL_HEIGHT - 8))
    return out


def frame_label(sample: Sample, t: int) -> str:
    """The label of frame t of a video sample: its id ("frame 00005"; an id that already says frame,
    "frame_000000", as it is), then the loader's note on it (meta "frame_notes"[t]) after ", " (OpenCV draws ASCII only)."""
    fid = str(sample.frame_ids[t]) if t < len(sample.frame_ids or []) else str(t)
    label = fid if fid.lower().startswith("frame") else f"frame {fid}"
    notes = sample.meta.get("frame_notes") if isinstance(sample.meta, dict) else None
    note = notes[t] if isinstance(notes, (list, tuple)) and t < len(notes) and isinstance(notes[t], str) else ""
    return f"{label}, {note}" if note else label


def _label(img: np.ndarray, text: str, origin: tuple[int, int]) -> None:
    """White text on a dark box, readable on any frame."""
    (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, FONT_SCALE, 1)
    x, y = origin
    cv2.rectangle(img, (x - 2, y - th - 4), (x + tw + 2, y + base), (0, 0, 0), -1)
    cv2.putText(img, text, (x, y), cv2.FONT_HERSHEY_SIMPLEX, FONT_SCALE, (255, 255, 255), 1, cv2.LINE_AA)


def _header(sample: Sample, pred: Prediction | None, score: dict | None, width: int) -> np.ndarray:
    lines = [f"{sample.id}  [{sample.task}]  {sample.query}"]
    if isinstance(sample.meta.get("card"), str) and sample.meta["card"]:
        lines.append(sample.meta["card"])
    value = score_value(score)
    status = "no prediction" if pred is None else (f"FAILED {pred.error['kind']}: {pred.error['message']}" if pred.error else "ok")
    lines.append(f"score {100 * value:.1f} %  {status}" if value is not None else status)
    if pred is not None and pred.text:
        lines.append(f"answer: {pred.text}")
    for k, ref in enumerate(sample.target.answers or []):
        lines.append(f"reference {k + 1}: {ref}")
    wrapped = [chunk for line in lines for chunk in _wrap(line, max(20, width // 11))]
    header = np.full((LINE_PX * (len(wrapped) + 1) + 10, width, 3), 255, np.uint8)
    for k, line in enumerate(wrapped):
        cv2.putText(header, line, (4, LINE_PX * (k + 1)), cv2.FONT_HERSHEY_SIMPLEX, FONT_SCALE, (0, 0, 0), 1, cv2.LINE_AA)
    _legend(header, LINE_PX * (len(wrapped) + 1))
    return header


def _legend(img: np.ndarray, y: int) -> None:
    """One line: a swatch and a name for ground truth, prediction and ignore."""
    x = 4
    for name, colour, edge in (("ground truth", GT_RGB, GT_RGB), ("prediction", PRED_RGB, OUTLINE_RGB),
                               ("ignored pixels", IGNORE_RGB, IGNORE_RGB)):
        cv2.rectangle(img, (x, y - 13), (x + 18, y + 1), edge, -1)
        cv2.rectangle(img, (x + 2, y - 11), (x + 16, y - 1), colour, -1)
        cv2.putText(img, name, (x + 24, y), cv2.FONT_HERSHEY_SIMPLEX, FONT_SCALE, (0, 0, 0), 1, cv2.LINE_AA)
        (tw, _), _ = cv2.getTextSize(name, cv2.FONT_HERSHEY_SIMPLEX, FONT_SCALE, 1)
        x += 24 + tw + 18


def _wrap(text: str, width: int) -> Iterable[str]:
    text = text.encode("ascii", "replace").decode()  # OpenCV's Hershey fonts draw ASCII only
    yield from textwrap.wrap(text, width, break_long_words=True) or [""]


def score_value(score: dict | None) -> float | None:
    """The sample's own score of a scores.jsonl record (ScoreRecord.sample_score: J&F of a video,
    the gIoU term of an image or a box answer), None without a record or for corpus-level text."""
    return None if not score else ScoreRecord.from_json(score).sample_score()


def worst_per_task(ids: list[str], samples: dict[str, Sample], scores: dict[str, dict], n: int) -> list[str]:
    """The `n` lowest-scoring ids of each task (ties by id), among ids with a per-sample score;
    unscored samples (corpus-level text metrics) are never picked as "worst"."""
    by_task: dict[str, list[tuple[float, str]]] = {}
    for sid in ids:
        value = score_value(scores.get(sid))
        if value is not None and sid in samples:
            by_task.setdefault(samples[sid].task, []).append((value, sid))
    return [sid for task in sorted(by_task) for _, sid in sorted(by_task[task])[:n]]


def render_run(run_dir: str | Path, ids: list[str] | None = None, worst: int | None = None,
               max_frames: int = 6, out_dir: str | Path | None = None, dataset_root: str | None = None) -> list[Path]:
    """Write overlays for a run's samples (all, `ids`, or the `worst` N by score). Returns the paths.
    dataset_root: where the data lies now, when it moved since the run (default: the run's config)."""
    run_dir = Path(run_dir)
    cfg = load_run_config(run_dir / "config.yaml")
    from rvt_bench.loaders.config import loader_kwargs

    kwargs = loader_kwargs(cfg.dataset, root=dataset_root)
    samples = {s.id: s for s in instantiate(kwargs, _convert_="all")}
    preds = read_predictions(prediction_files(run_dir))
    scores = {r["sample_id"]: r for r in read_jsonl(run_dir / "scores.jsonl")} if (run_dir / "scores.jsonl").exists() else {}
    # a sample the protocol's rule excludes has no score: never drawn as a 0, never the "worst"
    excluded = excluded_reasons(read_run_json(run_dir / "metrics.json")) if (run_dir / "metrics.json").exists() else {}
    scores = {sid: r for sid, r in scores.items() if sid not in excluded}
    chosen = ids or [sid for sid in samples if sid in preds]
    if worst is not None:
        chosen = worst_per_task(chosen, samples, scores, worst)
    unknown = [sid for sid in chosen if sid not in samples]
    if unknown:
        raise KeyError(f"not samples of this run's dataset: {unknown[:5]}")
    out_dir = Path(out_dir) if out_dir else run_dir / "overlays"
    written = []
    for sid in chosen:
        picture = render_sample(samples[sid], preds.get(sid), scores.get(sid), max_frames)
        path = out_dir / (re.sub(r"[^A-Za-z0-9._-]+", "__", sid) + ".png")
        ok, png = cv2.imencode(".png", cv2.cvtColor(picture, cv2.COLOR_RGB2BGR))
        if not ok:
            raise ValueError(f"sample {sid}: its picture could not be encoded as PNG")
        write_atomic(path, png.tobytes())
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--ids", nargs="*", default=None, help="sample ids (default: all predicted samples)")
    ap.add_argument("--worst", type=int, default=None, help="only the N lowest-scoring scored samples of each task")
    ap.add_argument("--frames", type=int, default=6, help="frames shown per video sample")
    ap.add_argument("--out", default=None, help="output folder (default: RUN_DIR/overlays)")
    ap.add_argument("--dataset-root", default=None, help="the dataset's root, if it moved since the run")
    args = ap.parse_args(argv)
    paths = render_run(args.run_dir, args.ids, args.worst, args.frames, args.out, args.dataset_root)
    print(f"overlays: {len(paths)} written to {paths[0].parent}" if paths else "overlays: no sample matched")


if __name__ == "__main__":
    main()
