"""Long-RVOS (Liang et al., CVPR 2026; github.com/iSEE-Laboratory/Long_RVOS) loader: referring
video object segmentation on long videos, from the release's <split>/JPEGImages/,
<split>/meta_expressions.json and <split>/Annotations/<video>/<obj_id>/<frame>.png, as its
eval/eval_long_rvos/ scripts read them; and its prediction folders (``LongRVOSPredictions``, a
``reader:`` layout). Format and the evaluator's rules: docs/benchmarks/long_rvos.md.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rvt_bench.core import files, masks, png
from rvt_bench.core.types import RLE, AdapterError, DatasetFormatError, Prediction, RvtBenchError, Sample, Target
from rvt_bench.loaders import video_meta
from rvt_bench.loaders.base import Dataset, existing_splits, layout_hint, read_json, require_dir, require_keys

PUBLISHED = "https://github.com/iSEE-Laboratory/Long_RVOS"
LAYOUT = (
    "  <split>/JPEGImages/<video>/<frame>.jpg\n"
    "  <split>/meta_expressions.json\n"
    "  <split>/Annotations/<video>/<obj_id>/<frame>.png   (a frame without its PNG: the object is absent)"
)
TYPES = {"static": "static", "dynamic": "dynamic", "static+dynamic": "hybrid"}  # eval_static / _dynamic / _hybrid.py


def read_gray_rle(path: Path) -> tuple[tuple[int, int], RLE]:
    """((H, W), RLE of the nonzero pixels) of a PNG read as cv2.imread(path, IMREAD_GRAYSCALE).
    Raises DatasetFormatError naming the path when it cannot be read."""
    shape, box, crop = png.read_gray(path)
    return shape, masks.encode_box(crop, box, shape)


class LongRVOSDataset(Dataset):
    """A Long-RVOS split as a sequence of video Samples, one per expression.

    root: the ``long_rvos`` directory (holding train/, valid/, test/); split: "valid" or "test"
    (the evaluator's --split).

    Order: videos and expressions in the meta file's order. Each Sample: id "<video>/<exp_id>",
    modality "video", task "segmentation", frames = <split>/JPEGImages/<video>/<frame>.jpg in the
    meta's order; ``target.masks`` = per frame Annotations/<video>/<obj_id>/<frame>.png read as
    grayscale, nonzero = the object (None where the PNG is absent or empty, as the evaluator's
    zeros); ``meta = {"video", "exp_id", "obj_id", "type", "type_name"}`` (type as written:
    "static", "dynamic", "static+dynamic"; type_name "static", "dynamic", "hybrid"). An expression
    without a "type" (the evaluator stops on it), a GT PNG that cannot be read or whose size
    differs from the video's other GT PNGs fails that expression (data errors); raises
    DatasetFormatError when the split's folder or meta file is missing or every expression failed.
    """

    name = "long_rvos"

    def __init__(self, root: str | Path | None, split: str = "valid") -> None:
        super().__init__()
        if root is None:
            raise DatasetFormatError(f"{self.name}: set dataset.root to the long_rvos directory ({PUBLISHED})")
        self.root, self.split = Path(root), split
        layout = f"{self.root}/\n{LAYOUT}"
        require_dir(self.root, dataset=self.name, layout=layout, published=PUBLISHED)
        meta_path = self.root / split / "meta_expressions.json"
        if not meta_path.exists():  # a FIFO or device there is refused when read (core.files), not called missing
            present = [p.parent.name for p in self.root.glob("*/meta_expressions.json")]
            raise DatasetFormatError(f"{self.name}: no split {split!r}: expected the file {meta_path} (not found); "
                                     f"splits present: {existing_splits(present)}; {layout_hint(layout, PUBLISHED)}")
        self.frames_dir = require_dir(self.root / split / "JPEGImages", dataset=self.name, layout=layout,
                                      published=PUBLISHED)
        self.annotations_dir = require_dir(self.root / split / "Annotations", dataset=self.name, layout=layout,
                                           published=PUBLISHED)
        meta = read_json(meta_path, duplicates="mark")
        require_keys(meta, ("videos",), str(meta_path))
        if not isinstance(meta["videos"], dict):
            raise DatasetFormatError(f"{meta_path}: 'videos' must be an object {{<video>: {{...}}}}")
        video_meta.record_repeated(self, meta_path, meta["videos"])
        for video, info in meta["videos"].items():
            try:
                self._samples.extend(self._video_samples(video, info, meta_path))
            except DatasetFormatError as exc:
                for sample_id in video_meta.video_error_ids(video, info):
                    self.record_error(sample_id, str(exc))
        self.require_some_samples(str(meta_path))

    def _video_samples(self, video: str, info: Any, meta_path: Path) -> list[Sample]:
        where = f"{meta_path} video {video!r}"
        frame_ids, frames = video_meta.video_frames(self.frames_dir, video, info, where)
        video_meta.record_repeated_expressions(self, video, info["expressions"], where)
        tracks: dict[str, list[RLE | None] | DatasetFormatError] = {}
        samples = []
        for exp_id, exp in info["expressions"].items():
            sample_id = f"{video}/{exp_id}"
            with self.sample_errors(sample_id):
                where_exp = f"{where} expression {exp_id!r}"
                video_meta.require_expression(exp, ("obj_id", "type"), where_exp)
                key = str(exp["obj_id"])
                if key not in tracks:
                    tracks[key] = self._track(video, key, frame_ids)
                track = tracks[key]
                if isinstance(track, DatasetFormatError):
                    raise DatasetFormatError(f"{track} (expression {sample_id})")
                kind = exp["type"]
                samples.append(Sample(
                    id=sample_id, dataset=self.name, split=self.split, modality="video", frames=frames,
                    frame_ids=frame_ids, query=exp["exp"], task="segmentation", target=Target(masks=list(track)),
                    meta={"video": video, "exp_id": str(exp_id), "obj_id": exp["obj_id"],
                          "type": kind if isinstance(kind, str) else str(kind),
                          "type_name": TYPES.get(kind, str(kind)) if isinstance(kind, str) else str(kind)}))
        return samples

    def _track(self, video: str, obj_id: str, frame_ids: list[str]) -> list[RLE | None] | DatasetFormatError:
        """The object's per-frame GT (None where its PNG is absent or empty), or the error (returned,
        to be remembered) for a PNG that cannot be read or differs in size from the others."""
        try:
            folder = files.inside(files.inside(self.annotations_dir, video, "video name"), obj_id, "obj_id")
            out: list[RLE | None] = []
            shape = None
            for frame in frame_ids:
                path = files.inside(folder, f"{frame}.png", "frame name")
                if not path.exists():
                    out.append(None)
                    continue
                size, rle = read_gray_rle(path)
                if shape is not None and size != shape:
                    return DatasetFormatError(f"{path}: {list(size)} [H, W] differs from the object's other GT PNGs "
                                              f"{list(shape)}")
                shape = size
                out.append(rle if masks.area(rle) else None)
            return out
        except DatasetFormatError as exc:
            return exc


class LongRVOSPredictions:
    """Reads one expression's prediction PNGs as eval_long_rvos reads them (conf/dataset/long_rvos.yaml
    ``predictions.long_rvos``, ``reader:``; ``layout.path`` "{video}/{exp_id}/{frame_id}.png"):
    <root>/<video>/<exp_id>/<frame>.png as grayscale, nonzero = the object; a frame whose PNG is
    absent is empty (not a failure).

    __call__(sample) -> Prediction: masks per frame (None where absent or empty), trace {"layout",
    "source"}. Raises AdapterError (the sample fails, the run goes on) with trace {"missing":
    <video>} when the video's folder is absent (the evaluator scores it 0), and otherwise when the
    first frame's PNG is absent or unreadable, or a PNG's size differs from the first's or from the
    GT's (the evaluator's worker dies on each: the expression is dropped).
    """

    def __init__(self, root: Path, layout: Any) -> None:
        self.root, self.layout = Path(root), layout

    def __call__(self, sample: Sample) -> Prediction:
        video, exp_id = str(sample.meta.get("video")), str(sample.meta.get("exp_id"))
        try:
            video_dir = files.inside(self.root, video, f"sample {sample.id}: video")
            if not video_dir.is_dir():
                exc = AdapterError(f"sample {sample.id}: prediction folder {video_dir} does not exist")
                exc.trace = {"found": False, "missing": video}
                raise exc
            folder = files.inside(video_dir, exp_id, f"sample {sample.id}: exp_id")
            out: list[RLE | None] = []
            shape = None
            for k, frame in enumerate(sample.frame_ids):
                path = files.inside(folder, f"{frame}.png", f"sample {sample.id}: frame")
                if not path.exists():
                    if k == 0:
                        exc = AdapterError(f"sample {sample.id}: first frame's prediction PNG {path} does not exist "
                                           f"(eval_long_rvos reads its size from it)")
                        exc.trace = {"found": False, "missing": f"{video}/{exp_id}"}
                        raise exc
                    out.append(None)
                    continue
                size, rle = read_gray_rle(path)
                if shape is not None and size != shape:
                    raise AdapterError(f"sample {sample.id}: {path} is {list(size)} [H, W], the first frame's "
                                       f"{list(shape)}")
                shape = size
                out.append(rle if masks.area(rle) else None)
            gt = next((m for m in sample.target.masks or [] if m is not None), None)
            if gt is not None and tuple(gt["size"]) != tuple(shape):
                raise AdapterError(f"sample {sample.id}: prediction PNGs are {list(shape)} [H, W], the GT's "
                                   f"{list(gt['size'])}")
        except AdapterError:
            raise
        except (RvtBenchError, OSError, ValueError) as exc:
            raise AdapterError(f"sample {sample.id}: {exc}") from None
        return Prediction(sample_id=sample.id, task="segmentation", masks=out,
                          trace={"layout": self.layout.name, "source": str(self.root / video / exp_id)})
