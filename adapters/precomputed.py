"""`precomputed`: evaluate predictions produced elsewhere, read from official submission layouts.

Layouts (``layout`` in conf/model/precomputed.yaml): the benchmark declares where a sample's
predicted masks lie (conf/dataset/<name>.yaml ``predictions``: a path template over sample meta
keys, ``{frame_id}`` for one file per frame; rvt_bench.core.benchmark.PredictionLayout); the runner
hands the run's benchmark's layouts to the adapter (``use_prediction_layouts``). The shipped ones::

    revos      <root>/<video>/<exp_id>/<frame id>.png   read: gray. ReVOS submissions, as read by VISA
                                                        tools/eval_revos.py; <video> may be nested
                                                        ("UVO/all/<id>").
    reasonseg  <root>/<name>.png                        read: any.
    llmseg40k  <root>/<image>_<qa_index>.png            read: any.
    a layout with a `reader` (gRefCOCO's predictions.json of masks and no-target scores): the
               declared class reads it (rvt_bench.core.benchmark.PredictionLayout.reader).

    jsonl      <root> = a run directory holding predictions*.jsonl, or one .jsonl file: our own
               Prediction records (rvt_bench.core.store), matched by sample id.
    auto       jsonl when <root> is a .jsonl file or holds predictions*.jsonl; otherwise PNGs, the
               layout chosen per sample: a declared reader layout whose index file is in the folder;
               else of the declared layouts whose meta keys the sample has, the one that needs the
               most (declared order breaks ties), so a mixed set such as the demo works too.

The adapter never looks at the dataset's name, only at the declared layouts, the sample's meta and
frame ids. Outside a run (no layouts handed over), every declared benchmark's layouts are known.
A PNG mask is foreground wherever any channel is nonzero (rvt_bench.core.masks.read_png_mask), except in a
``read: gray`` layout, which reads each PNG as VISA eval_revos.py does (``cv2.imread(path, IMREAD_GRAYSCALE)``:
a colour PNG becomes its gray value, so a pixel can vanish) and keeps the gray values: foreground
where the value is nonzero, and ``trace["pixel_values"]`` per frame = the one nonzero value the
frame holds (0 when empty), or ``[[value, RLE], ...]`` when it holds several; VISA's A and R use
these values (metrics/protocols/revos.py).

Failures (raised as AdapterError, recorded by the runner for that sample, the run goes on):
- a missing PNG: the message names the expected path; the trace's "missing" names the first part
  of it that does not exist (``first_missing``). For a video, one missing frame PNG (first,
  middle or last; or the whole expression or video folder) fails the whole expression, as in VISA
  eval_revos.py, whose bare ``except`` then records J = F = A = R = 0; the ReVOS protocol scores a
  failed expression 0 the same way (its ``failed="zero"`` default), and metrics.json lists it.
- an unreadable PNG (OpenCV returns None), likewise.
- a PNG (or a jsonl RLE) whose [H, W] differs from its frame's EXIF-oriented size: the message names
  both sizes (VISA would fail the expression on such a PNG as well).
- a sample whose id has no record in the jsonl file(s), or whose meta lacks the keys its layout needs.
PNGs are read one sample at a time, so memory stays at one expression's masks.

Its report: prediction found (the file or record exists; a failure before it has trace
{"found": false}) -> decoded at the right size (masks of the frames' sizes; a stored failure stays
a failure here) -> result correct; the seconds spent reading.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from rvt_bench.adapters import measures as M
from rvt_bench.adapters.base import Adapter, ScoredSample
from rvt_bench.core import benchmark, files, masks, png
from rvt_bench.core.benchmark import PredictionLayout
from rvt_bench.core.bounds import WORKERS
from rvt_bench.core.frames import frame_size
from rvt_bench.core.records import Measure
from rvt_bench.core.store import prediction_files, read_predictions
from rvt_bench.core.types import RLE, AdapterError, DatasetFormatError, Prediction, RunStoreError, Sample

MODES = ("auto", "jsonl")  # besides the PNG layouts the benchmarks declare


class PrecomputedAdapter(Adapter):
    """Predictions read from files under ``root`` in one of the layouts of the module docstring.

    root:   directory of PNG masks or of a run's predictions*.jsonl, or one .jsonl file.
    layout: "auto" | "jsonl" | a declared PNG layout's name ("revos", "reasonseg", "llmseg40k", ...).
    name:   model name for run directories and leaderboards.

    predict(sample) -> Prediction with task "segmentation" and ``masks`` = one RLE per frame (ASCII
    counts, [H, W] = the frame's size) for PNG layouts; for jsonl, the stored record (a stored failure
    stays a failure). Raises AdapterError as listed in the module docstring.
    Construction raises AdapterError when ``root`` does not exist, ``layout`` is unknown, or
    layout "jsonl" finds no predictions file.
    """

    stages = (("prediction_found", "prediction found"), ("decoded", "decoded at the right size"))

    def __init__(self, root: str | Path, layout: str = "auto", name: str = "precomputed", workers: int = 2) -> None:
        self.name = name
        # PNG decoding releases the GIL: threads read several samples' files at once.
        if not float(workers) <= WORKERS:
            raise AdapterError(f"precomputed: model.workers must be at most {WORKERS} (a pool's bound, "
                               f"rvt_bench.core.bounds.WORKERS), got {workers!r}")
        self.workers = max(1, int(workers))
        self.preferred_batch_size = 8 * self.workers
        self.root = Path(root)
        self._layouts = _declared()
        if layout not in MODES and layout not in self._layouts:
            raise AdapterError(f"precomputed: layout must be one of {[*MODES, *self._layouts]}, got {layout!r}")
        if not self.root.exists():
            raise AdapterError(f"precomputed: model.root {self.root} does not exist (expected a directory of predictions)")
        self._jsonl_files = [self.root] if self.root.is_file() else prediction_files(self.root)
        if layout == "auto":
            layout = "jsonl" if self._jsonl_files and (self.root.is_dir() or self.root.suffix == ".jsonl") else "auto"
        if layout == "jsonl" and not self._jsonl_files:
            raise AdapterError(f"precomputed: layout jsonl but {self.root} holds no predictions*.jsonl")
        if layout != "jsonl" and not self.root.is_dir():
            raise AdapterError(f"precomputed: layout {layout} expects {self.root} to be a directory of PNG masks")
        self.layout = layout
        # the layouts auto chooses among: outside a run, those a sample's meta can pick (a layout
        # without keys, such as gRefCOCO's index file, would fit every sample)
        self._auto = tuple(n for n, lay in self._layouts.items() if lay.keys)
        self._predictions: dict[str, Prediction] | None = None
        self._readers: dict[str, object] = {}  # layout name -> its declared reader over root
        self._readers_lock = threading.Lock()

    def fingerprint(self) -> dict:
        return {"name": self.name, "root": str(self.root.resolve()), "layout": self.layout}

    def use_prediction_layouts(self, layouts: Mapping[str, PredictionLayout]) -> None:
        """The run's benchmark's declared layouts (auto chooses among them); a named layout the
        benchmark does not declare is still found among every benchmark's."""
        if layouts:
            self._layouts = {**layouts, **{k: v for k, v in self._layouts.items() if k not in layouts}}
            self._auto = tuple(layouts)

    def preflight(self) -> None:
        """jsonl layout: read the prediction files once, before the first sample, so a malformed line
        stops the run with one message naming the file and line (RunStoreError from
        rvt_bench.core.store.read_predictions) instead of failing every sample."""
        if self.layout == "jsonl" and self._predictions is None:
            try:
                self._predictions = read_predictions(self._jsonl_files)
            except RunStoreError as exc:
                raise AdapterError(f"precomputed: {exc}") from exc

    def predict(self, sample: Sample) -> Prediction:
        if self.layout == "jsonl":
            return self._from_jsonl(sample)
        layout = self._layouts[self.layout] if self.layout != "auto" else self._layout_for(sample)
        if layout.reader is not None:
            return self._reader(layout)(sample)
        return self._from_pngs(sample, layout)

    def _reader(self, layout: PredictionLayout):
        """The declared reader of `layout` over this folder (PredictionLayout.reader), built once."""
        with self._readers_lock:
            reader = self._readers.get(layout.name)
            if reader is None:
                import importlib

                module, _, cls = str(layout.reader).rpartition(".")
                try:
                    reader = getattr(importlib.import_module(module), cls)(self.root, layout)
                except (ImportError, AttributeError, TypeError) as exc:
                    raise AdapterError(f"precomputed: layout {layout.name}: reader {layout.reader} cannot be "
                                       f"built: {exc}") from exc
                self._readers[layout.name] = reader
        return reader

    def passed(self, item: ScoredSample) -> dict[str, bool]:
        pred = item.prediction
        found = not (pred.error and isinstance(pred.trace, dict) and pred.trace.get("found") is False)
        return {"prediction_found": found, "decoded": found and not pred.error}

    def measures(self, scored: Sequence[ScoredSample]) -> list[Measure]:
        # only the harness's wall time: a jsonl record's own timings are another run's
        return [Measure("reading_s", "reading", m.value, "s") for m in M.latency(scored, [M.TOTAL])]

    def predict_batch(self, samples: list[Sample]) -> list[Prediction | AdapterError]:
        """predict over `samples` in a pool of `workers` threads; per sample a Prediction or its AdapterError."""
        def one(sample: Sample) -> Prediction | AdapterError:
            try:
                return self.predict(sample)
            except AdapterError as exc:
                return exc

        if self.workers == 1 or len(samples) == 1:
            return [one(s) for s in samples]
        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(one, samples))

    # --- PNG layouts ---------------------------------------------------------------------------

    def _layout_for(self, sample: Sample) -> PredictionLayout:
        fits = self._fitting(sample)
        if not fits:
            raise not_found(
                f"sample {sample.id}: cannot choose a PNG layout from its meta {sorted(sample.meta)}; expected "
                + (" or ".join(f"{list(self._layouts[n].keys)} ({n})" for n in self._auto) or "a layout its benchmark "
                   "declares (conf/dataset/<name>.yaml `predictions`), and it declares none")
            )
        indexed = [lay for lay in fits if lay.reader is not None and (self.root / lay.path).is_file()]
        if indexed:  # a reader's index file in the folder (Ref-SAV's results.json beside its PNG layout)
            return indexed[0]
        return max(fits, key=lambda lay: len(lay.keys))  # max keeps the first of equals: declared order

    def _fitting(self, sample: Sample) -> list[PredictionLayout]:
        """The auto layouts, in declared order, whose keys the sample's meta holds."""
        return [self._layouts[n] for n in self._auto if all(k in sample.meta for k in self._layouts[n].keys)]

    def _no_index_file(self, sample: Sample, layout: PredictionLayout) -> str:
        """What auto looked for before the PNGs: "; nor is there <root>/results.json (layout ref_sav)"
        for each reader layout the sample fits whose index file is absent (Ref-SAV's results.json), so
        a model.root one folder off names both places; '' for a layout chosen by name."""
        if self.layout != "auto":
            return ""
        fits = self._fitting(sample)
        return "".join(f"; nor is there {self.root / lay.path} (layout {lay.name})"
                       for lay in fits if lay is not layout and lay.reader is not None and "{" not in str(lay.path))

    def _from_pngs(self, sample: Sample, layout: PredictionLayout) -> Prediction:
        if sample.task != "segmentation":
            raise not_found(f"sample {sample.id}: PNG layouts hold masks only; cannot answer task {sample.task!r}")
        paths = png_paths(self.root, layout, sample)
        missing = [p for p in paths if not p.exists()]  # a FIFO or device is refused by name when read
        if missing:
            exc = not_found(
                f"sample {sample.id}: prediction PNG {missing[0]} does not exist"
                + (f" ({len(missing)} of {len(paths)} frame PNGs missing)" if len(paths) > 1 else "")
                + self._no_index_file(sample, layout)
            )
            exc.trace["missing"] = first_missing(self.root, missing[0])
            raise exc
        rles, values = [], []
        for path, frame in zip(paths, sample.frames):
            try:
                if layout.read == "gray":
                    shape, rle, value = _read_gray(path)
                else:
                    mask = masks.read_png_mask(path)
                    shape, rle, value = tuple(mask.shape), None, None
            except DatasetFormatError as exc:
                raise AdapterError(f"sample {sample.id}: {exc}") from exc
            _check_size(sample, frame, shape, str(path))
            rles.append(rle if rle is not None else masks.encode_fast(mask))
            values.append(value)
        source = paths[0].parent if layout.per_frame else paths[0]
        trace = {"layout": layout.name, "source": str(source)}
        if layout.read == "gray":
            trace["pixel_values"] = values
        return Prediction(sample_id=sample.id, task="segmentation", masks=rles, trace=trace)

    # --- jsonl ---------------------------------------------------------------------------------

    def _from_jsonl(self, sample: Sample) -> Prediction:
        if self._predictions is None:
            self._predictions = read_predictions(self._jsonl_files)
        stored = self._predictions.get(sample.id)
        if stored is None:
            raise not_found(
                f"sample {sample.id}: no prediction with this sample_id in {', '.join(str(p) for p in self._jsonl_files)}"
            )
        if stored.error is None and stored.masks is not None:
            if len(stored.masks) != sample.num_frames:
                raise AdapterError(
                    f"sample {sample.id}: stored prediction has {len(stored.masks)} masks, the sample has {sample.num_frames} frames"
                )
            for rle, frame in zip(stored.masks, sample.frames):
                if rle is not None:
                    try:
                        size = tuple(int(v) for v in rle["size"])
                    except (TypeError, KeyError, ValueError) as exc:
                        raise AdapterError(f"sample {sample.id}: stored mask {str(rle)[:80]} is not a COCO RLE "
                                           f"with a 'size' [H, W]: {exc}") from exc
                    _check_size(sample, frame, size, "stored RLE")
        # a copy, so that the runner's timing of this call does not alter the cached record
        return replace(stored, timings=dict(stored.timings))


def not_found(message: str) -> AdapterError:
    """The failure of a sample whose prediction is not there (no file, no record, no layout for
    its meta): an AdapterError whose trace {"found": False} the report reads."""
    exc = AdapterError(message)
    exc.trace = {"found": False}
    return exc


def first_missing(root: Path, path: Path) -> str:
    """The first part of ``path`` (a path under ``root``) that does not exist, relative to ``root``
    ("vid" when the folder ``root/vid`` is missing, "vid/3/00000.png" when only that file is): a
    failed sample's trace["missing"], which a benchmark whose reference treats a missing folder
    apart reads (MeViS: a missing video folder scores 0, a missing expression folder is dropped)."""
    relative = path.relative_to(root)
    for depth in range(1, len(relative.parts) + 1):
        part = Path(*relative.parts[:depth])
        if not (root / part).exists():
            return part.as_posix()
    return relative.as_posix()


def png_paths(root: Path, layout: PredictionLayout, sample: Sample) -> list[Path]:
    """The PNG file(s) holding ``sample``'s prediction under ``root`` in ``layout``, one per frame
    (a per-frame layout) or one.

    Raises AdapterError naming the missing meta keys when the sample's meta lacks what the layout needs,
    or when a name from the sample (video, expression, frame id) would lead out of ``root`` ("..").
    """
    missing = [k for k in layout.keys if k not in sample.meta]
    if missing:
        raise not_found(f"sample {sample.id}: layout {layout.name} needs sample meta keys {missing}, "
                        f"meta has {sorted(sample.meta)}")
    names = layout.names(sample.meta, sample.frame_ids)
    try:  # names come from the data: none may lead out of root
        return [files.inside(root, name, f"sample {sample.id}: prediction PNG") for name in names]
    except DatasetFormatError as exc:
        raise AdapterError(str(exc)) from exc


def _read_gray(path: Path) -> tuple[tuple[int, int], RLE, int | list]:
    """((H, W), RLE, value) of one PNG read as VISA reads it (cv2 IMREAD_GRAYSCALE, rvt_bench.core.png):
    RLE of gray != 0; value = the frame's one nonzero gray value (0 when empty) or
    [[value, RLE], ...] for several. Raises DatasetFormatError when the file cannot be decoded."""
    shape, box, crop = png.read_gray(path)
    if box is None:
        return shape, masks.empty(*shape), 0
    rle = masks.encode_box(crop, box, shape)
    top = int(crop.max())
    nonzero = np.count_nonzero(crop)
    if np.count_nonzero(crop == top) == nonzero:
        return shape, rle, top
    levels = np.flatnonzero(np.bincount(crop[crop != 0], minlength=256))
    return shape, rle, [[int(v), masks.encode_box(crop == v, box, shape)] for v in levels]


def _declared() -> dict[str, PredictionLayout]:
    try:
        return benchmark.prediction_layouts()
    except benchmark.DeclarationError as exc:
        raise AdapterError(f"precomputed: {exc}") from exc


def _check_size(sample: Sample, frame: str, size: tuple[int, ...], what: str) -> None:
    expected = frame_size(frame)
    if size != expected:
        raise AdapterError(
            f"sample {sample.id}: prediction {what} has size [H, W] = {list(size)} but frame {frame} is {list(expected)}"
        )
