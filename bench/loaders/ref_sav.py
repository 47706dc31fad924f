"""Ref-SAV (Sa2VA, 2025) loader: referring video segmentation on SA-V videos, from the release's
``ref_sav_eval/`` folder as Sa2VA's evaluation reads it (videos/<video>/<frame>.jpg,
meta_expressions_valid.json, mask_dict.json). Format and the evaluator's rules:
docs/benchmarks/ref_sav.md.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rvt_bench.core import files, masks
from rvt_bench.core.types import RLE, DatasetFormatError, InstanceAnnotation, Sample, Target
from rvt_bench.loaders import video_meta
from rvt_bench.loaders.base import Dataset, existing_splits, layout_hint, read_json, require_dir, require_keys

PUBLISHED = "https://github.com/bytedance/Sa2VA (Ref-SAV: huggingface.co/datasets/Dense-World/Sa2VA-Training)"
LAYOUT = (
    "  videos/<video>/<frame>.jpg\n"
    "  meta_expressions_<split>.json   (valid)\n"
    "  mask_dict.json"
)
TYPE_NAMES = {0: "long", 1: "short"}  # eval_ref_sav.py's split by type_id; any other id is in neither


class RefSAVDataset(Dataset):
    """The Ref-SAV evaluation set as a sequence of video Samples, one per expression.

    root: the ``ref_sav_eval`` directory; split: "valid" (meta_expressions_<split>.json).

    Order: videos and expressions in the meta file's order. Each Sample: id "<video>/<exp_id>",
    modality "video", task "segmentation", frames = videos/<video>/<frame>.jpg in the meta's order
    (eval_ref_sav.py pairs prediction i with GT frame i of that order); ``target.masks`` = per frame
    the union of the expression's anno masks from mask_dict.json (None where none is present),
    RLEs of the meta's [height, width]; ``annotations`` = the expression's anno tracks (the
    evaluator sums them as uint8, which its A sees where two overlap); ``meta = {"video",
    "exp_id", "type_id", "type", "anno_id"(, "obj_id")}``. Per-expression problems (a missing or
    malformed anno track, an RLE of another size, a non-int type_id) go to ``errors``; raises
    DatasetFormatError when the folder, the meta file or mask_dict.json is missing or malformed as
    a whole, or every expression failed.
    """

    name = "ref_sav"

    def __init__(self, root: str | Path | None, split: str = "valid") -> None:
        super().__init__()
        if root is None:
            raise DatasetFormatError(f"{self.name}: set dataset.root to the ref_sav_eval directory ({PUBLISHED})")
        self.root, self.split = Path(root), split
        layout = f"{self.root}/\n{LAYOUT}"
        require_dir(self.root, dataset=self.name, layout=layout, published=PUBLISHED)
        meta_path = self.root / f"meta_expressions_{split}.json"
        if not meta_path.exists():  # a FIFO or device there is refused when read (core.files), not called missing
            present = [p.name[len("meta_expressions_"):-len(".json")] for p in self.root.glob("meta_expressions_*.json")]
            raise DatasetFormatError(f"{self.name}: no split {split!r}: expected the file {meta_path} (not found); "
                                     f"splits present: {existing_splits(present)}; {layout_hint(layout, PUBLISHED)}")
        self.frames_dir = require_dir(self.root / "videos", dataset=self.name, layout=layout, published=PUBLISHED)
        self._mask_path = self.root / "mask_dict.json"
        if not self._mask_path.exists():
            raise DatasetFormatError(f"{self.name}: expected the file {self._mask_path} (not found); "
                                     f"{layout_hint(layout, PUBLISHED)}")
        meta = read_json(meta_path, duplicates="mark")
        require_keys(meta, ("videos",), str(meta_path))
        if not isinstance(meta["videos"], dict):
            raise DatasetFormatError(f"{meta_path}: 'videos' must be an object {{<video>: {{...}}}}, "
                                     f"got {type(meta['videos']).__name__}")
        mask_dict = read_json(self._mask_path, duplicates="mark")
        if not isinstance(mask_dict, dict):
            raise DatasetFormatError(f"{self._mask_path}: expected {{anno_id: [per frame RLE or null]}}")
        self._repeated_annos = set(files.repeated_keys(mask_dict))
        video_meta.record_repeated(self, meta_path, meta["videos"])
        for video, info in meta["videos"].items():
            try:
                self._samples.extend(self._video_samples(video, info, mask_dict, meta_path))
            except DatasetFormatError as exc:  # a video-level problem: every expression of the video fails
                for sample_id in video_meta.video_error_ids(video, info):
                    self.record_error(sample_id, str(exc))
        self.require_some_samples(str(meta_path))

    def _video_samples(self, video: str, info: Any, mask_dict: dict, meta_path: Path) -> list[Sample]:
        where = f"{meta_path} video {video!r}"
        frame_ids, frames = video_meta.video_frames(self.frames_dir, video, info, where)
        require_keys(info, ("height", "width"), where)
        size = (info["height"], info["width"])
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size):
            raise DatasetFormatError(f"{where}: 'height' and 'width' must be positive ints, got {list(size)}")
        video_meta.record_repeated_expressions(self, video, info["expressions"], where)
        tracks: dict[str, list[RLE | None] | DatasetFormatError] = {}
        samples = []
        for exp_id, exp in info["expressions"].items():
            sample_id = f"{video}/{exp_id}"
            with self.sample_errors(sample_id):
                where_exp = f"{where} expression {exp_id!r}"
                video_meta.require_expression(exp, ("anno_id", "type_id"), where_exp)
                type_id = exp["type_id"]
                if not isinstance(type_id, int) or isinstance(type_id, bool):
                    raise DatasetFormatError(f"{where_exp}: field 'type_id' must be an int (0 long, 1 short), "
                                             f"got {type_id!r}")
                anno_ids = exp["anno_id"]
                if not isinstance(anno_ids, list) or not anno_ids:
                    raise DatasetFormatError(f"{where_exp}: 'anno_id' must be a non-empty list, got {str(anno_ids)[:80]}")
                annotations = []
                for anno_id in anno_ids:  # listed twice, it is summed twice by the reference: kept twice
                    key = str(anno_id)
                    if key not in tracks:
                        tracks[key] = self._track(key, mask_dict, frame_ids, size)
                    track = tracks[key]
                    if isinstance(track, DatasetFormatError):
                        raise DatasetFormatError(f"{track} (expression {sample_id})")
                    annotations.append(InstanceAnnotation(id=key, label="", masks=track))
                target = []
                for t in range(len(frame_ids)):
                    present = [a.masks[t] for a in annotations if a.masks[t] is not None]
                    target.append(masks.union(present, *size) if present else None)
                meta = {"video": video, "exp_id": str(exp_id), "type_id": type_id,
                        "type": TYPE_NAMES.get(type_id, str(type_id)), "anno_id": list(anno_ids)}
                if "obj_id" in exp:
                    meta["obj_id"] = exp["obj_id"]
                samples.append(Sample(id=sample_id, dataset=self.name, split=self.split, modality="video",
                                      frames=frames, frame_ids=frame_ids, query=exp["exp"], task="segmentation",
                                      target=Target(masks=target), meta=meta, annotations=annotations))
        return samples

    def _track(self, key: str, mask_dict: dict, frame_ids: list[str],
               size: tuple[int, int]) -> list[RLE | None] | DatasetFormatError:
        """One anno id's per-frame RLEs (compressed; None where absent: eval_ref_sav.py skips any
        falsy entry), or the DatasetFormatError (returned, to be remembered) when it is missing,
        repeated, shorter than the video (the reference's IndexError) or holds an RLE that is
        malformed or not of the video's size."""
        if key not in mask_dict:
            return DatasetFormatError(f"anno_id {key} is missing from {self._mask_path}")
        if key in self._repeated_annos:
            return DatasetFormatError(f"{self._mask_path}: anno_id {key} appears twice (two mask tracks for one object)")
        track = mask_dict[key]
        if not isinstance(track, list) or len(track) < len(frame_ids):
            got = f"{len(track)} entries" if isinstance(track, list) else type(track).__name__
            return DatasetFormatError(f"{self._mask_path}: anno_id {key} must map to a list of {len(frame_ids)} "
                                      f"per-frame RLEs or nulls, got {got}")
        rles = [r if r else None for r in track[:len(frame_ids)]]  # entries past the last frame are never read
        for t, rle in enumerate(rles):
            problem = rle is not None and masks.rle_problem(rle, size)
            if problem:
                return DatasetFormatError(f"{self._mask_path}: anno_id {key} frame {t} ({frame_ids[t]}): {problem} "
                                          f"(expected null or a COCO RLE of the video's [height, width] {list(size)})")
        return [masks.compress(r) if r is not None and isinstance(r["counts"], list) else r for r in rles]
