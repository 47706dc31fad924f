"""GroundingSuite-Eval's precomputed predictions (conf/dataset/gseval.yaml ``predictions.gseval``,
``reader:``): the prediction JSONL `evaluate_grounding.py --pred_file` reads, in a folder::

    <root>/model_predictions.jsonl   {"idx": 0, "box": [x1, y1, x2, y2]}            (box mode; or "predicted_box")
                               {"idx": 0, "segmentation": {"size", "counts"}} (mask mode; or "predicted_segmentation")

Matched as the evaluator matches: by `idx` (the last line of an idx wins); when no line has an idx,
by `image_path`. docs/benchmarks/gseval.md.
"""
from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

from rvt_bench.core import files, masks
from rvt_bench.core.types import AdapterError, Prediction, RvtBenchError, Sample, as_float


def _not_found(message: str) -> AdapterError:
    exc = AdapterError(message)
    exc.trace = {"found": False}  # the precomputed adapter's report reads it (adapters/precomputed.not_found)
    return exc


class GSEvalPredictions:
    """Reads one sample's prediction from ``root`` in the layout of the module docstring.

    __call__(sample) -> Prediction, task as the sample's: "grounding": boxes [[box]] ([[]] when the
    line's box is missing or empty, or holds NaN or Infinity: the evaluator counts it wrong, IoU 0);
    "segmentation": masks [RLE].
    trace {"layout", "source"}. Raises AdapterError (the sample fails; the GSEval protocol leaves it
    out as the evaluator does, trace "found" False) for a file that cannot be read, no matching
    line, a line that matches but holds no segmentation (mask mode), and AdapterError with
    trace {"undecodable": True} for a box or segmentation the evaluator could not use.
    """

    def __init__(self, root: Path, layout: Any) -> None:
        self.root, self.layout = Path(root), layout
        self._lock = threading.Lock()
        self._map: dict | None = None
        self._problem: str | None = None

    def _load(self) -> None:
        path = self.root / self.layout.path
        items = []
        try:
            for number, line in files.lines(path, what="GSEval predictions JSONL"):
                if line is None:
                    continue
                # the evaluator: json.loads per line; here within the JSON limits (depth, integer size)
                items.append(files.loads(line, f"{path} line {number}", duplicates="last"))
        except (RvtBenchError, OSError, ValueError) as exc:
            self._problem, self._map = f"cannot read {path}: {exc}", {}
            return
        items = [i for i in items if isinstance(i, dict)]
        pred_map: dict = {}
        for item in items:  # evaluate_grounding.py: by idx, else by image_path
            if item.get("idx") is not None:
                pred_map[_key(item["idx"])] = item
        if not pred_map:
            for item in items:
                if item.get("image_path"):
                    pred_map[_key(item["image_path"])] = item
        self._map = pred_map

    def __call__(self, sample: Sample) -> Prediction:
        with self._lock:
            if self._map is None:
                self._load()
        path = self.root / self.layout.path
        if self._problem:
            raise _not_found(f"sample {sample.id}: {self._problem}")
        item = self._map.get(_key(sample.meta.get("idx"))) or self._map.get(_key(sample.meta.get("image_path")))  # type: ignore[union-attr]
        if not item:
            raise _not_found(f"sample {sample.id}: no line with idx {sample.meta.get('idx')} (or image_path "
                             f"{sample.meta.get('image_path')!r}) in {path}")
        trace = {"layout": self.layout.name, "source": str(path)}
        if sample.task == "grounding":
            box = item.get("box") or item.get("predicted_box")
            if not box:
                return Prediction(sample_id=sample.id, task="grounding", boxes=[[]], trace={**trace, "no_box": True})
            coords = [as_float(v) for v in box[:4]] if isinstance(box, list) else []
            if len(coords) < 4 or None in coords:  # a number beyond float's range: the evaluator's arithmetic overflows
                raise _undecodable(f"sample {sample.id}: {path}: box must be [x1, y1, x2, y2] numbers, got {str(box)[:80]}")
            if not all(math.isfinite(v) for v in coords):
                # calculate_iou gives 0 for a box with NaN or +-Infinity (its area is NaN or infinite), as for no
                # box; kept as one, since predictions.jsonl writes NaN as null
                return Prediction(sample_id=sample.id, task="grounding", boxes=[[]],
                                  trace={**trace, "no_box": True, "non_finite_box": str(box)[:80]})
            return Prediction(sample_id=sample.id, task="grounding", boxes=[[coords]], trace=trace)
        rle = item.get("segmentation") or item.get("predicted_segmentation")
        if not rle:
            raise _not_found(f"sample {sample.id}: the line of idx {sample.meta.get('idx')} in {path} holds no segmentation")
        size = rle.get("size") if isinstance(rle, dict) else None
        problem = ("not a COCO RLE with compressed counts" if not isinstance(size, list) or len(size) != 2
                   or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size)
                   or not isinstance(rle.get("counts"), (str, bytes))
                   else masks.rle_problem(rle, (int(size[0]), int(size[1]))))
        if problem:
            raise _undecodable(f"sample {sample.id}: {path}: segmentation cannot be decoded: {problem}")
        return Prediction(sample_id=sample.id, task="segmentation", masks=[rle], trace=trace)


def _key(value: Any) -> Any:
    """A dict key that matches as the evaluator's Python dict does (1 == 1.0); lists are unhashable
    there too, so none matches."""
    try:
        hash(value)
    except TypeError:
        return None
    return value


def _undecodable(message: str) -> AdapterError:
    exc = AdapterError(message)
    exc.trace = {"undecodable": True}
    return exc
