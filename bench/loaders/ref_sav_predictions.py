"""Ref-SAV's precomputed predictions (conf/dataset/ref_sav.yaml ``predictions.ref_sav``,
``reader:``): the results JSON that Sa2VA's `projects/sa2va/evaluation/sa2va_eval_ref_vos.py
--dataset REF_SAV` writes and `tools/eval/eval_ref_sav.py` reads::

    <root>/results.json   {"<video>": {"<exp_id>": {"prediction_masks": [RLE per frame], ...}}}

Each RLE a COCO RLE ({"size": [H, W], "counts": str}) of the video's size; entry i is scored
against frame i of the meta file's order, the entries past the last frame are never read (as the
reference). docs/benchmarks/ref_sav.md.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from rvt_bench.core import files, masks
from rvt_bench.core.frames import frame_size
from rvt_bench.core.types import AdapterError, Prediction, RvtBenchError, Sample


def _not_found(message: str) -> AdapterError:
    exc = AdapterError(message)
    exc.trace = {"found": False}  # the precomputed adapter's report reads it (adapters/precomputed.not_found)
    return exc


class RefSAVResults:
    """Reads one sample's prediction from ``root`` in the layout of the module docstring.

    root: the folder; layout: the declared rvt_bench.core.benchmark.PredictionLayout (its ``path``
    names the results file, "results.json").
    __call__(sample) -> Prediction: task "segmentation", masks = the first sample.num_frames RLEs
    (compressed), trace {"layout", "source"}. Raises AdapterError (the sample fails, the run goes
    on; the Ref-SAV protocol drops it as the reference does) when the file cannot be read or is not
    {video: {exp_id: {...}}}, the expression is missing, "prediction_masks" is not a list of at
    least as many RLEs as the video has frames, or an RLE is malformed or not of the video's frame size
    (the GT's, or the first frame's when the GT is empty in every frame).
    """

    def __init__(self, root: Path, layout: Any) -> None:
        self.root, self.layout = Path(root), layout
        self._lock = threading.Lock()
        self._results: dict | None = None
        self._problem: str | None = None

    def _load(self) -> None:
        path = self.root / self.layout.path
        try:
            data = files.read_json(path, what="Ref-SAV results JSON")
        except (RvtBenchError, OSError, ValueError) as exc:
            self._problem, self._results = f"cannot read {path}: {exc}", {}
            return
        if not isinstance(data, dict):
            self._problem, self._results = f"{path}: expected {{video: {{exp_id: {{prediction_masks}}}}}}, " \
                                           f"got {type(data).__name__}", {}
            return
        self._results = data

    def __call__(self, sample: Sample) -> Prediction:
        with self._lock:
            if self._results is None:
                self._load()
        path = self.root / self.layout.path
        if self._problem:
            raise _not_found(f"sample {sample.id}: {self._problem}")
        video, exp_id = str(sample.meta.get("video")), str(sample.meta.get("exp_id"))
        entry = self._results.get(video)  # type: ignore[union-attr]
        entry = entry.get(exp_id) if isinstance(entry, dict) else None
        if entry is None:
            raise _not_found(f"sample {sample.id}: no entry [{video!r}][{exp_id!r}] in {path}")
        rles = entry.get("prediction_masks") if isinstance(entry, dict) else None
        n = sample.num_frames
        if not isinstance(rles, list) or len(rles) < n:
            got = f"{len(rles)} entries" if isinstance(rles, list) else type(rles).__name__
            raise AdapterError(f"sample {sample.id}: {path} [{video!r}][{exp_id!r}]['prediction_masks'] must be a list "
                               f"of at least {n} per-frame RLEs (one per frame), got {got}")
        try:
            size = _frame_size(sample)
        except RvtBenchError as exc:
            raise AdapterError(f"sample {sample.id}: {exc}") from None
        out = []
        for t, rle in enumerate(rles[:n]):
            problem = masks.rle_problem(rle, size)
            if problem:
                raise AdapterError(f"sample {sample.id}: {path} [{video!r}][{exp_id!r}] frame {t}: {problem}")
            out.append(masks.compress(rle) if isinstance(rle["counts"], list) else rle)
        return Prediction(sample_id=sample.id, task="segmentation", masks=out,
                          trace={"layout": self.layout.name, "source": str(path)})


def _frame_size(sample: Sample) -> tuple[int, int]:
    """[H, W] the predicted RLEs must have: the sample's GT RLEs' (the meta's height and width), or,
    when every GT frame is empty, its first frame's (from the image header): a prediction is never
    taken at a size of its own, which the scoring would decode (a 100000 x 100000 RLE is 10 GB).
    Raises DatasetFormatError when that frame cannot be read."""
    for rle in sample.target.masks or []:
        if rle is not None:
            return int(rle["size"][0]), int(rle["size"][1])
    return frame_size(sample.frames[0])
