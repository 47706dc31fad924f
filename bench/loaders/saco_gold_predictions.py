"""SA-Co/Gold's precomputed predictions (conf/dataset/saco_gold.yaml ``predictions.saco_gold``,
``reader:``): what SAM 3's cgF1 evaluator reads of a model, the COCO results file that SAM 3's
PredictionDumper writes per subset, in eval_sam3.py's folder layout::

    <root>/gold_<subset>/dumps/gold_<subset>/coco_predictions_segm.json
        [{"image_id": <pair id>, "category_id": 1, "segmentation": {"size": [H, W], "counts": "..."},
          "score": 0.93, "bbox": [...]}, ...]

The path is the declared layout's ``path`` with the sample's meta (``{dump}``). A pair with no
result has none (the evaluator's "no prediction"). docs/benchmarks/saco_gold.md.
"""
from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

from rvt_bench.core import files, masks
from rvt_bench.core.types import AdapterError, Prediction, RvtBenchError, Sample, as_float

SCORE_THRESHOLD = 0.5  # CGF1Eval's (rvt_bench.metrics.protocols.saco_gold.SCORE_THRESHOLD; a test holds them equal)


def _instance(entry: Any) -> list:
    """[RLE, score, category_id] of one COCO result. Raises ValueError when it lacks a compressed or
    uncompressed RLE ``segmentation``, a finite ``score`` or an int ``category_id`` (the evaluator
    reads all three)."""
    seg, score, cat = entry.get("segmentation"), entry.get("score"), entry.get("category_id")
    problem = masks.rle_problem(seg)
    if problem:
        raise ValueError(f"segmentation: {problem}")
    value = as_float(score)
    if value is None or not math.isfinite(value):
        raise ValueError(f"score must be a finite number, got {str(score)[:40]}")
    if isinstance(cat, bool) or not isinstance(cat, int):
        raise ValueError(f"category_id must be an int, got {str(cat)[:40]}")
    return [masks.compress(seg), value, cat]


def _id_key(value: Any) -> str:
    """A pair id as the index's key: str of it, an integral float as its int (10000000.0 is pair
    10000000, as the evaluator's Python dict and set find it: a dump whose ids went through a float
    column matched no pair, and every pair was silently a "no prediction")."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class SACoGoldPredictions:
    """Reads one pair's predictions from ``root`` in the layout of the module docstring.

    root: the folder (eval_sam3.py's ``--pred-folder``); layout: the declared
    rvt_bench.core.benchmark.PredictionLayout (``path`` a template over the sample's meta).
    __call__(sample) -> Prediction: task "segmentation", trace {"layout", "source", "instances":
    [[RLE, score, category_id], ...] (every result of the pair, the file's order)}, masks = [union
    of the instances with score >= 0.5 at the image's size] (what report.html shows). When no
    instance reaches 0.5 (the evaluator's "no prediction" for the pair), Prediction.none_found,
    without a score (the evaluator has none for "no target"), the instances kept in the trace.
    Raises AdapterError (the sample fails, the run goes on) for a file that cannot be read, a path
    leading out of ``root``, or a malformed result of the pair.
    """

    def __init__(self, root: Path, layout: Any) -> None:
        self.root, self.layout = Path(root), layout
        self._lock = threading.Lock()
        self._files: dict[Path, dict | str] = {}

    def _index(self, path: Path) -> dict | str:
        with self._lock:
            found = self._files.get(path)
            if found is not None:
                return found
            try:
                data = files.read_json(path, what="SA-Co/Gold coco_predictions_segm.json")
                if not isinstance(data, list):
                    raise ValueError(f"expected a list of COCO results, got {type(data).__name__}")
                index: dict = {}
                for k, entry in enumerate(data):
                    if isinstance(entry, dict) and "image_id" in entry:
                        index.setdefault(_id_key(entry["image_id"]), []).append((k, entry))
                found = index
            except (RvtBenchError, OSError, ValueError) as exc:
                found = f"cannot read {path}: {exc}"
            self._files[path] = found
            return found

    def __call__(self, sample: Sample) -> Prediction:
        try:
            rel = str(self.layout.path).format(**{k: v for k, v in sample.meta.items() if isinstance(v, str)})
            path = files.inside(self.root, rel, f"sample {sample.id}: predictions file")
        except (KeyError, RvtBenchError) as exc:
            raise AdapterError(f"sample {sample.id}: {exc}") from None
        if not path.exists():
            exc = AdapterError(f"sample {sample.id}: predictions file {path} does not exist")
            exc.trace = {"found": False}  # the precomputed adapter's report reads it
            raise exc
        index = self._index(path)
        if isinstance(index, str):
            raise AdapterError(f"sample {sample.id}: {index}")
        instances = []
        for k, entry in index.get(_id_key(sample.meta.get("image_id", sample.id)), []):
            try:
                instances.append(_instance(entry))
            except ValueError as exc:
                raise AdapterError(f"sample {sample.id}: {path} result {k}: {exc}") from None
        trace = {"layout": self.layout.name, "source": str(path), "instances": instances}
        height, width = sample.meta.get("height"), sample.meta.get("width")
        kept = [r for r, s, _ in instances if s >= SCORE_THRESHOLD and r["size"] == [height, width]]
        if not any(s >= SCORE_THRESHOLD for _, s, _ in instances):
            return Prediction.none_found(sample.id, task="segmentation", trace=trace)
        return Prediction(sample_id=sample.id, task="segmentation", masks=[masks.union(kept, height, width)],
                          trace=trace)
