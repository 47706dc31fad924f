"""gRefCOCO's precomputed predictions (conf/dataset/grefcoco.yaml ``predictions.grefcoco``,
``reader:``): what ReLA's evaluator reads of a model, per sentence the mask and the [target,
no-target] scores, in a folder::

    <root>/predictions.json   [{"sent_id": 123, "nt_label": [s_target, s_no_target], "mask": "masks/123.png"}, ...]
    <root>/masks/123.png      foreground where any channel is nonzero, at the evaluator's size
                              (480 x 480) or at the image's size (the protocol resizes it)

As ReLA's ``output["nt_label"].argmax(dim=0)``: the answer is "no target" when s_no_target >
s_target (a tie is "target"). docs/benchmarks/grefcoco.md.
"""
from __future__ import annotations

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


def nt_answer(nt_label: Any) -> tuple[bool, float, float]:
    """(no_target, s_target, s_no_target) of one ``nt_label``. Raises ValueError unless it is two
    finite numbers."""
    values = [as_float(v) for v in nt_label] if isinstance(nt_label, list) else []
    if len(values) != 2 or not all(v is not None and math.isfinite(v) for v in values):
        raise ValueError(f"nt_label must be [s_target, s_no_target], two finite numbers, got {str(nt_label)[:80]}")
    s_t, s_nt = values
    return s_nt > s_t, s_t, s_nt


class GRefCOCOPredictions:
    """Reads one sample's prediction from ``root`` in the layout of the module docstring.

    root: the folder; layout: the declared rvt_bench.core.benchmark.PredictionLayout (its ``path``
    names the index file, "predictions.json").
    __call__(sample) -> Prediction: task "segmentation", masks = [RLE of the PNG at the size it has],
    trace {"layout", "source", "nt_label"}; when the no-target score wins, Prediction.none_found
    with that score and the mask kept in trace["masks"] (ReLA's evaluator still counts it in U).
    Raises AdapterError (the sample fails, the run goes on) for an index that cannot be read, an
    entry that is malformed, repeated or missing, a mask path leading out of ``root``, or a PNG
    that cannot be read.
    """

    def __init__(self, root: Path, layout: Any) -> None:
        self.root, self.layout = Path(root), layout
        self._lock = threading.Lock()
        self._index: dict[str, dict | str] | None = None
        self._problem: str | None = None

    def _load(self) -> None:
        index_path = self.root / self.layout.path
        index: dict[str, dict | str] = {}
        try:
            data = files.read_json(index_path, what="gRefCOCO predictions.json")
        except (RvtBenchError, OSError, ValueError) as exc:
            self._problem = f"cannot read {index_path}: {exc}"
            self._index = {}
            return
        if not isinstance(data, list):
            self._problem = f"{index_path}: expected a list of {{sent_id, nt_label, mask}}, got {type(data).__name__}"
            self._index = {}
            return
        for k, entry in enumerate(data):
            if not isinstance(entry, dict) or "sent_id" not in entry:
                continue  # no sample can be named by it
            sid = str(entry["sent_id"])
            index[sid] = f"{index_path}[{k}] repeats sent_id {sid}" if sid in index else entry
        self._index = index

    def __call__(self, sample: Sample) -> Prediction:
        with self._lock:
            if self._index is None:
                self._load()
        if self._problem:
            raise _not_found(f"sample {sample.id}: {self._problem}")
        sid = str(sample.meta.get("sent_id", sample.id))
        entry = self._index.get(sid)  # type: ignore[union-attr]
        if entry is None:
            raise _not_found(f"sample {sample.id}: no entry with sent_id {sid} in {self.root / self.layout.path}")
        if isinstance(entry, str):
            raise AdapterError(f"sample {sample.id}: {entry}")
        try:
            no_target, s_t, s_nt = nt_answer(entry.get("nt_label"))
            if not isinstance(entry.get("mask"), str):
                raise ValueError("'mask' must be the PNG's path relative to the folder")
            path = files.inside(self.root, entry["mask"], f"sample {sample.id}: mask")
            if not path.exists():
                raise _not_found(f"sample {sample.id}: prediction PNG {path} does not exist")
            rle = masks.encode_fast(masks.read_png_mask(path))
        except AdapterError:
            raise
        except (RvtBenchError, ValueError) as exc:
            raise AdapterError(f"sample {sample.id}: sent_id {sid}: {exc}") from None
        trace = {"layout": self.layout.name, "source": str(path), "nt_label": [s_t, s_nt]}
        if no_target:
            return Prediction.none_found(sample.id, s_nt, task="segmentation", trace={**trace, "masks": [rle]})
        return Prediction(sample_id=sample.id, task="segmentation", masks=[rle], trace=trace)
