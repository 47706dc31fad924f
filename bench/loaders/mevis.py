"""MeViS (Ding et al., ICCV 2023) loader: motion-expression video segmentation from the release's
<split>/JPEGImages/, <split>/meta_expressions.json and, where the GT is released (valid_u, train),
<split>/mask_dict.json. Format, the reference evaluator's rules and the submission of `valid`:
docs/benchmarks/mevis.md.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from rvt_bench.core import files, masks
from rvt_bench.core.frames import frame_size
from rvt_bench.core.types import RLE, DatasetFormatError, Sample, Target
from rvt_bench.loaders import video_meta
from rvt_bench.loaders.base import Dataset, existing_splits, layout_hint, read_json, require_dir, require_keys

PUBLISHED = "https://github.com/henghuiding/MeViS (data: codalab.lisn.upsaclay.fr/competitions/15094)"
LAYOUT = (
    "  <split>/JPEGImages/<video>/<frame>.jpg\n"
    "  <split>/meta_expressions.json\n"
    "  <split>/mask_dict.json (valid_u and train; valid has no GT)"
)
SPLITS = ("valid_u", "valid", "train")
FIRST_FRAME = "00000"  # eval_mevis.py reads <video>/<exp_id>/00000.png for the frame size

log = logging.getLogger(__name__)


class MeViSDataset(Dataset):
    """A MeViS split as a sequence of video Samples, one per expression.

    root: the ``mevis`` directory (holding valid_u/, valid/, train/); split: "valid_u" (GT released,
    scored here as henghuiding/MeViS tools/eval_mevis.py), "valid" (no GT: predictions go to the
    CodaLab server, ``python -m rvt_bench.harness.submission``) or "train".

    Order: videos and expressions in the meta file's order. Each Sample: id "<video>/<exp_id>",
    modality "video", task "segmentation", frames = <split>/JPEGImages/<video>/<frame>.jpg in the
    meta's order; ``target.masks`` = per frame the union of the expression's anno_id masks from
    mask_dict.json (eval_mevis.py sums them as uint8 and binarises: the same mask below 256
    overlapping objects), None where none is present; ``target.masks`` is None for a split without
    mask_dict.json. ``meta = {"video", "exp_id", "obj_id", "anno_id"}`` (the last two when given).
    Per-expression problems (a missing anno id, a malformed or wrongly sized RLE, a track shorter
    than the video) go to ``errors``; raises DatasetFormatError when the split's folder or meta
    file is missing or malformed as a whole, or every expression failed.
    """

    name = "mevis"

    def __init__(self, root: str | Path | None, split: str = "valid_u") -> None:
        super().__init__()
        if root is None:
            raise DatasetFormatError(f"{self.name}: set dataset.root to the mevis directory ({PUBLISHED})")
        self.root, self.split = Path(root), split
        layout = f"{self.root}/\n{LAYOUT}"
        require_dir(self.root, dataset=self.name, layout=layout, published=PUBLISHED)
        split_dir = self.root / split
        meta_path = split_dir / "meta_expressions.json"
        if not meta_path.is_file():
            present = [p.parent.name for p in self.root.glob("*/meta_expressions.json")]
            raise DatasetFormatError(f"{self.name}: no split {split!r}: expected the file {meta_path} (not found); "
                                     f"splits present: {existing_splits(present)}; {layout_hint(layout, PUBLISHED)}")
        self.frames_dir = require_dir(split_dir / "JPEGImages", dataset=self.name, layout=layout, published=PUBLISHED)
        meta = read_json(meta_path, duplicates="mark")
        require_keys(meta, ("videos",), str(meta_path))
        if not isinstance(meta["videos"], dict):
            raise DatasetFormatError(f"{meta_path}: 'videos' must be an object {{<video>: {{...}}}}, "
                                     f"got {type(meta['videos']).__name__}")
        self._mask_path = split_dir / "mask_dict.json"
        mask_dict = None
        if self._mask_path.exists():
            mask_dict = read_json(self._mask_path, duplicates="mark")
            if not isinstance(mask_dict, dict):
                raise DatasetFormatError(f"{self._mask_path}: expected {{anno_id: [per frame RLE or null]}}")
        self.has_gt = mask_dict is not None
        self._repeated_annos = set(files.repeated_keys(mask_dict)) if mask_dict is not None else set()
        self._tracks: dict[tuple, list[RLE | None] | DatasetFormatError] = {}
        video_meta.record_repeated(self, meta_path, meta["videos"])
        for video, info in meta["videos"].items():
            try:
                self._samples.extend(self._video_samples(video, info, mask_dict, meta_path))
            except DatasetFormatError as exc:  # a video-level problem: every expression of the video fails
                for sample_id in video_meta.video_error_ids(video, info):
                    self.record_error(sample_id, str(exc))
        self.require_some_samples(str(meta_path))

    def _video_samples(self, video: str, info: Any, mask_dict: dict | None, meta_path: Path) -> list[Sample]:
        where = f"{meta_path} video {video!r}"
        frame_ids, frames = video_meta.video_frames(self.frames_dir, video, info, where)
        if frame_ids[0] != FIRST_FRAME:
            self.warn(f"mevis: video {video!r} starts at frame {frame_ids[0]!r}: eval_mevis.py reads "
                      f"<video>/<exp_id>/{FIRST_FRAME}.png for the frame size and drops every expression of "
                      f"this video unless that file exists")
        video_meta.record_repeated_expressions(self, video, info["expressions"], where)
        size = frame_size(frames[0]) if mask_dict is not None else None
        samples = []
        for exp_id, exp in info["expressions"].items():
            sample_id = f"{video}/{exp_id}"
            with self.sample_errors(sample_id):
                where_exp = f"{where} expression {exp_id!r}"
                video_meta.require_expression(exp, (), where_exp)
                meta = {"video": video, "exp_id": str(exp_id)}
                for key in ("obj_id", "anno_id"):
                    if key in exp:
                        meta[key] = exp[key]
                target = Target()
                if mask_dict is not None:
                    require_keys(exp, ("anno_id",), where_exp)
                    target = Target(masks=self._target(exp["anno_id"], mask_dict, frame_ids, size, sample_id))
                samples.append(Sample(id=sample_id, dataset=self.name, split=self.split, modality="video",
                                      frames=frames, frame_ids=frame_ids, query=exp["exp"], task="segmentation",
                                      target=target, meta=meta))
        return samples

    def _target(self, anno_ids: Any, mask_dict: dict, frame_ids: list[str], size: tuple[int, int],
                sample_id: str) -> list[RLE | None]:
        """Per frame the union of the anno tracks (None where none is present)."""
        if not isinstance(anno_ids, list) or not anno_ids:
            raise DatasetFormatError(f"expression {sample_id}: 'anno_id' must be a non-empty list, got {str(anno_ids)[:80]}")
        named: dict[str, Any] = {}
        for anno_id in anno_ids:  # an id listed again adds the same track: the reference's union is the same
            named.setdefault(str(anno_id), anno_id)
        tracks = []
        for key, anno_id in named.items():
            cached = self._tracks.get((key, size, len(frame_ids)))
            if cached is None:
                cached = self._tracks[(key, size, len(frame_ids))] = self._track(key, anno_id, mask_dict, frame_ids, size)
            if isinstance(cached, DatasetFormatError):
                raise DatasetFormatError(f"{cached} (expression {sample_id})")
            tracks.append(cached)
        out: list[RLE | None] = []
        for t in range(len(frame_ids)):
            present = [track[t] for track in tracks if track[t] is not None]
            out.append(masks.union(present, *size) if present else None)
        return out

    def _track(self, key: str, anno_id: Any, mask_dict: dict, frame_ids: list[str],
               size: tuple[int, int]) -> list[RLE | None] | DatasetFormatError:
        """One anno id's per-frame RLEs (compressed; None where absent), checked once per (id, frame
        size, frame count) and shared by every expression that names it; the DatasetFormatError
        (returned, to be remembered) when it is missing, repeated in mask_dict.json or malformed."""
        if key not in mask_dict:
            return DatasetFormatError(f"anno_id {anno_id} is missing from {self._mask_path}")
        if key in self._repeated_annos:
            return DatasetFormatError(f"{self._mask_path}: anno_id {anno_id} appears twice (two mask tracks for one object)")
        track = mask_dict[key]
        if not isinstance(track, list) or len(track) < len(frame_ids):
            got = f"{len(track)} entries" if isinstance(track, list) else type(track).__name__
            return DatasetFormatError(f"{self._mask_path}: anno_id {anno_id} must map to a list of {len(frame_ids)} "
                                      f"per-frame RLEs or nulls, got {got}")
        # eval_mevis.py reads entry i for frame i and never the entries past the last frame
        rles = [r if r else None for r in track[:len(frame_ids)]]
        for t, rle in enumerate(rles):
            problem = rle is not None and masks.rle_problem(rle, size)
            if problem:
                return DatasetFormatError(f"{self._mask_path}: anno_id {anno_id} frame {t} ({frame_ids[t]}): {problem} "
                                          f"(expected null or a COCO RLE of the frame's size {list(size)} [H, W])")
        return [masks.compress(r) if r is not None and isinstance(r["counts"], list) else r for r in rles]
