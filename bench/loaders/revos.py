"""ReVOS (VISA, ECCV 2024) loader: reasoning video object segmentation from the release's
JPEGImages/, meta_expressions_<split>_.json, mask_dict.json and mask_dict_foreground.json.
Format, frame-count mismatches, foreground, bad data and demo extensions: docs/benchmarks/revos.md.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from rvt_bench.core import files, masks
from rvt_bench.loaders import video_meta
from rvt_bench.loaders.base import (Dataset, existing_splits, layout_hint, read_json, require_dir, require_file,
                                    require_keys)
from rvt_bench.core.frames import frame_size
from rvt_bench.core.types import RLE, DatasetFormatError, InstanceAnnotation, Sample, Target

PUBLISHED = "https://github.com/cilinyan/ReVOS-api (ReVOS; loader and evaluation: github.com/cilinyan/VISA)"
LAYOUT = (
    "  JPEGImages/<video>/<frame>.jpg\n"
    "  meta_expressions_<split>_.json\n"
    "  mask_dict.json\n"
    "  mask_dict_foreground.json (optional; robustness metric)"
)
EXPRESSION_KEYS = ("exp", "obj_id", "anno_id", "type_id")
TYPE_NAMES = {0: "referring", 1: "reasoning", 2: "no_target"}
ON_LENGTH_MISMATCH = ("warn", "skip", "error")
MAX_LISTED = 20  # bad frames listed per anno track before "... and N more"

log = logging.getLogger(__name__)


class _SkipExpression(Exception):
    """An anno track of the wrong length under on_length_mismatch="skip"."""


class _BadTrack(Exception):
    """An anno track that cannot be used (missing, not a list, bad RLEs): its expressions are errors."""


class _WholeDatasetError(DatasetFormatError):
    """A DatasetFormatError that must stop loading even where per-sample errors are collected
    (on_length_mismatch="error", foreground=True)."""


class ReVOSDataset(Dataset):
    """ReVOS split as a sequence of video Samples, one per expression.

    root:  the ``ReVOS`` directory; split: "valid" or "train" (selects meta_expressions_<split>_.json).
    on_length_mismatch: "warn" | "skip" | "error", for an anno (or foreground) mask list whose length
           differs from the video's frame count (module docstring).
    foreground: None (read mask_dict_foreground.json when present), True (required), False (never).
    hf_dataset, hf_revision: the release's files in a hub repository instead of root
           (rvt_bench.loaders.revos_hub); frames_dir: the frames' folder under root ("" = Sa2VA's layout).

    Order: videos and expressions in the meta file's order. Each Sample: id "<video>/<exp_id>",
    modality "video", task "segmentation", frames = JPEGImages/<video>/<frame>.jpg in the meta's
    order; ``target.masks`` = per frame union RLE of the expression's anno masks, None where none of
    them is present (always None for type_id 2 without anno ids);
    ``target.foreground`` = the video's per frame foreground RLEs (see ``foreground``) or None;
    ``meta = {"type_id", "type", "video", "exp_id", "obj_id", "anno_id", ...extra expression keys}``;
    ``annotations`` = every object of the video (anno ids of all its expressions, then any other
    listed in the instances sidecar), one list object shared by all samples of that video.
    Per-expression problems go to ``errors`` (module docstring); raises DatasetFormatError when a
    file is missing or malformed as a whole (the message names it), when the split has no meta file
    (naming the splits that have one), or when every expression failed.
    """

    name = "revos"

    def __init__(self, root: str | Path | None, split: str = "valid", on_length_mismatch: str = "warn",
                 foreground: bool | None = None, hf_dataset: str | None = None, hf_revision: str | None = None,
                 frames_dir: str = "JPEGImages") -> None:
        super().__init__()
        if on_length_mismatch not in ON_LENGTH_MISMATCH:
            raise ValueError(f"revos: on_length_mismatch must be one of {ON_LENGTH_MISMATCH}, got {on_length_mismatch!r}")
        self.split = split
        if hf_dataset is not None:  # the release's files in a hub repository (rvt_bench.loaders.revos_hub)
            from rvt_bench.loaders import revos_hub

            root, frames_dir = revos_hub.load(self, str(hf_dataset), hf_revision)
        if root is None:
            raise DatasetFormatError(f"{self.name}: set dataset.root to the ReVOS directory ({PUBLISHED}) or "
                                     f"dataset.hf_dataset to a hub copy of its files (docs/benchmarks/revos.md)")
        self.root = Path(root)
        self.frames_dir = self.root / frames_dir
        self.on_length_mismatch = on_length_mismatch
        self.skipped: list[str] = []  # ids of expressions left out by on_length_mismatch="skip"
        layout = f"{self.root}/\n{LAYOUT}"
        require_dir(self.root, dataset=self.name, layout=layout, published=PUBLISHED)
        require_dir(self.frames_dir, dataset=self.name, layout=layout, published=PUBLISHED)
        meta_path = self.root / f"meta_expressions_{split}_.json"
        if not meta_path.exists():
            present = [p.name[len("meta_expressions_"):-len("_.json")] for p in self.root.glob("meta_expressions_*_.json")]
            raise DatasetFormatError(
                f"{self.name}: no split {split!r}: expected the file {meta_path} (not found); splits present: "
                f"{existing_splits(present)}; {layout_hint(layout, PUBLISHED)}"
            )
        mask_path = require_file(self.root / "mask_dict.json", dataset=self.name, layout=layout, published=PUBLISHED)
        # a repeated video, expression or anno id fails what it would silently have replaced (below)
        meta = read_json(meta_path, duplicates="mark")
        require_keys(meta, ("videos",), str(meta_path))
        if files.repeated_keys(meta):
            raise DatasetFormatError(f"{meta_path}: key {files.repeated_keys(meta)[0]!r} appears twice at the top level")
        if not isinstance(meta["videos"], dict):
            raise DatasetFormatError(f"{meta_path}: 'videos' must be an object {{<video>: {{...}}}}, got {type(meta['videos']).__name__}")
        mask_dict = read_json(mask_path, duplicates="mark")
        if not isinstance(mask_dict, dict):
            raise DatasetFormatError(f"{mask_path}: expected {{anno_id: [per frame RLE or null]}}")
        self._repeated_annos = set(files.repeated_keys(mask_dict))
        self._mask_path = mask_path
        sidecar_path = self.root / "instances.json"
        # an optional file is absent only when nothing is at its name: a FIFO or a device there is read, and refused
        sidecar = read_json(sidecar_path) if os.path.lexists(sidecar_path) else {}
        self._foreground_path = self.root / "mask_dict_foreground.json"
        self._foreground: dict | None = None
        self._use_foreground = foreground if foreground is not None else os.path.lexists(self._foreground_path)
        self._require_foreground = foreground is True
        video_meta.record_repeated(self, meta_path, meta["videos"])
        for video, info in meta["videos"].items():
            try:
                self._samples.extend(self._video_samples(video, info, mask_dict, sidecar.get(video), meta_path))
            except _WholeDatasetError:
                raise
            except DatasetFormatError as exc:  # a video-level problem: every expression of the video fails
                for sample_id in video_meta.video_error_ids(video, info):
                    self.record_error(sample_id, str(exc))
        self.require_some_samples(str(meta_path))

    def _video_samples(self, video: str, info: dict, mask_dict: dict, labels: list | None, meta_path: Path) -> list[Sample]:
        where = f"{meta_path} video {video!r}"
        frame_ids, frames = video_meta.video_frames(self.frames_dir, video, info, where)
        # one header read per video: mask sizes are checked against it without decoding any mask
        size = frame_size(frames[0])

        cache: dict[str, list[RLE | None] | _SkipExpression | _BadTrack] = {}

        def track(anno_id: object) -> list[RLE | None]:
            # memoised so that a mismatched track warns once per video, not once per use
            if str(anno_id) not in cache:
                try:
                    cache[str(anno_id)] = read_track(anno_id)
                except (_SkipExpression, _BadTrack) as exc:
                    cache[str(anno_id)] = exc
            got = cache[str(anno_id)]
            if isinstance(got, Exception):
                raise got
            return got

        def read_track(anno_id: object) -> list[RLE | None]:
            if str(anno_id) not in mask_dict:
                raise _BadTrack(f"anno_id {anno_id} is missing from {self._mask_path}")
            if str(anno_id) in self._repeated_annos:
                raise _BadTrack(f"{self._mask_path}: anno_id {anno_id} appears twice (two mask tracks for one object)")
            rles = mask_dict[str(anno_id)]
            expected = (f"{self._mask_path}: anno_id {anno_id} (video {video!r}) must map to a list "
                        f"of {len(frame_ids)} per-frame RLEs or nulls")
            if not isinstance(rles, list):
                raise _BadTrack(f"{expected}, got {type(rles).__name__}")
            # eval_revos treats any falsy entry (null, {}) as "no mask in this frame"
            aligned = self._aligned([r if r else None for r in rles], len(frame_ids), expected)
            bad = [f"  frame {t} ({frame_ids[t]}): {problem}" for t, r in enumerate(aligned)
                   if r is not None and (problem := rle_problem(r, size)) is not None]
            if bad:
                more = len(bad) - MAX_LISTED
                raise _BadTrack(
                    f"{self._mask_path}: anno_id {anno_id} (video {video!r}): {len(bad)} bad per-frame RLE(s); "
                    f"expected null or a COCO RLE {{'size': {list(size)}, 'counts': str | bytes | list}} "
                    f"(size = the video's frame size [H, W]):\n" + "\n".join(bad[:MAX_LISTED])
                    + (f"\n  ... and {more} more" if more > 0 else "")
                )
            # uncompressed counts (valid COCO) are compressed once here: pycocotools merge needs them so
            return [masks.compress(r) if r is not None and isinstance(r["counts"], list) else r for r in aligned]

        samples = []
        foreground = self._video_foreground(video, len(frame_ids))
        annotations = self._annotations(video, info, track, labels, where)
        video_meta.record_repeated_expressions(self, video, info["expressions"], where)
        for exp_id, exp in info["expressions"].items():
            sample_id = f"{video}/{exp_id}"
            try:
                require_keys(exp, EXPRESSION_KEYS, f"{where} expression {exp_id!r}")
                if files.repeated_keys(exp):
                    raise DatasetFormatError(f"{where} expression {exp_id!r}: field {files.repeated_keys(exp)[0]!r} appears twice")
                _check_expression(exp, f"{where} expression {exp_id!r}")
                missing = [a for a in exp["anno_id"] if str(a) not in mask_dict]
                if missing:
                    raise DatasetFormatError("; ".join(
                        f"anno_id {a} (expression {sample_id}) is missing from {self._mask_path}" for a in missing))
                tracks = [track(a) for a in exp["anno_id"]]
            except _SkipExpression:
                self.skipped.append(sample_id)
                continue
            except (_BadTrack, DatasetFormatError) as exc:
                if isinstance(exc, _WholeDatasetError):
                    raise
                self.record_error(sample_id, str(exc))
                continue
            target = [_union([t[i] for t in tracks]) for i in range(len(frame_ids))]
            extra = {k: v for k, v in exp.items() if k not in EXPRESSION_KEYS and k != "exp"}
            type_id = exp["type_id"]
            samples.append(
                Sample(
                    id=f"{video}/{exp_id}",
                    dataset=self.name,
                    split=self.split,
                    modality="video",
                    frames=frames,
                    frame_ids=frame_ids,
                    query=str(exp["exp"]),
                    task="segmentation",
                    target=Target(masks=target, foreground=foreground),
                    meta={
                        "type_id": type_id,
                        "type": TYPE_NAMES.get(type_id, str(type_id)),
                        "video": video,
                        "exp_id": str(exp_id),
                        "obj_id": list(exp["obj_id"]),
                        "anno_id": list(exp["anno_id"]),
                        **extra,
                    },
                    annotations=annotations,
                )
            )
        return samples

    def _annotations(self, video: str, info: dict, track, labels: list | None, where: str) -> list[InstanceAnnotation]:
        side = {}
        for k, entry in enumerate(labels or []):
            require_keys(entry, ("anno_id", "label"), f"{self.root / 'instances.json'} video {video!r} entry {k}")
            side[str(entry["anno_id"])] = entry
        ids: list[str] = []
        for exp in info["expressions"].values():
            # a malformed expression is reported by its own sample; here only well-formed ids count
            anno_ids = exp.get("anno_id") if isinstance(exp, dict) else None
            for a in anno_ids if isinstance(anno_ids, list) else []:
                if str(a) not in ids:
                    ids.append(str(a))
        ids += [a for a in side if a not in ids]
        out = []
        for a in ids:
            entry = side.get(a, {})
            depth = entry.get("depth")
            if depth is not None and len(depth) != len(info["frames"]):
                raise DatasetFormatError(
                    f"{self.root / 'instances.json'} video {video!r} anno_id {a}: depth has {len(depth)} values, "
                    f"expected one per frame ({len(info['frames'])})"
                )
            try:
                track_masks = track(a)
            except (_SkipExpression, _BadTrack):
                # left out with its expressions ("skip", or bad data: the expressions record the reason)
                continue
            out.append(InstanceAnnotation(id=a, label=str(entry.get("label", "")), masks=track_masks, depth=depth))
        return out

    def _aligned(self, rles: list[RLE | None], num_frames: int, expected: str) -> list[RLE | None]:
        """``rles`` when it has one entry per frame; otherwise per ``on_length_mismatch``: warn and align
        by index (truncate, or pad with None = no object), raise _SkipExpression, or raise."""
        if len(rles) == num_frames:
            return rles
        message = f"{expected}, got {len(rles)} entries"
        if self.on_length_mismatch == "error":
            raise _WholeDatasetError(message + " (dataset.loader.on_length_mismatch=error)")
        log.warning("%s (on_length_mismatch=%s)", message, self.on_length_mismatch)
        if self.on_length_mismatch == "skip":
            raise _SkipExpression(message)
        return rles[:num_frames] + [None] * (num_frames - len(rles))

    def _video_foreground(self, video: str, num_frames: int) -> list[RLE | None] | None:
        if not self._use_foreground:
            return None
        if self._foreground is None:  # the file serves every video: unreadable, it stops the run in one line
            try:
                self._load_foreground()
            except DatasetFormatError as exc:
                raise _WholeDatasetError(str(exc)) from exc
        try:
            rles = self.foreground(video)
        except DatasetFormatError as exc:
            if self._require_foreground:
                raise _WholeDatasetError(str(exc)) from exc
            log.warning("revos: %s has no entry for video %r; R is not scored for its expressions",
                        self._foreground_path, video)
            return None
        expected = f"{self._foreground_path}: video {video!r} must have {num_frames} per-frame 'masks_rle' entries"
        try:
            return self._aligned([r if r else None for r in rles], num_frames, expected)
        except _SkipExpression:
            return None  # R needs it, J and F do not: keep the expressions, without R

    def foreground(self, video: str) -> list[RLE]:
        """Per frame RLE of the union of all objects of ``video`` (VISA's mask_dict_foreground.json,
        used by the robustness metric R). Loaded on first use; raises DatasetFormatError when the file
        or the video is missing."""
        if self._foreground is None:
            self._load_foreground()
        entry = self._foreground.get(video) if isinstance(self._foreground, dict) else None
        if not isinstance(entry, dict) or not isinstance(entry.get("masks_rle"), list):
            raise DatasetFormatError(f"{self._foreground_path}: no {{'masks_rle': [...]}} entry for video {video!r}")
        return entry["masks_rle"]

    def _load_foreground(self) -> None:
        require_file(self._foreground_path, dataset=self.name, layout=LAYOUT, published=PUBLISHED)
        data = read_json(self._foreground_path)
        if not isinstance(data, dict):
            raise DatasetFormatError(f"{self._foreground_path}: expected {{video: {{'masks_rle': [...]}}}}, "
                                     f"got {type(data).__name__}")
        self._foreground = data


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_expression(exp: dict, where: str) -> None:
    """DatasetFormatError naming the field when an expression's fields are not what eval_revos reads:
    exp a non-empty str, obj_id / anno_id lists of ints, type_id one of TYPE_NAMES' ints."""
    if not isinstance(exp["exp"], str) or not exp["exp"].strip():
        raise DatasetFormatError(f"{where}: field 'exp' must be a non-empty string, got {str(exp['exp'])[:80]!r}")
    for key in ("anno_id", "obj_id"):
        if not isinstance(exp[key], list) or not all(_is_int(v) for v in exp[key]):
            raise DatasetFormatError(f"{where}: field {key!r} must be a list of ints, got {str(exp[key])[:80]}")
    if not _is_int(exp["type_id"]) or exp["type_id"] not in TYPE_NAMES:
        raise DatasetFormatError(f"{where}: field 'type_id' must be one of {sorted(TYPE_NAMES)} (int), "
                                 f"got {exp['type_id']!r}")


def _union(rles: list[RLE | None]) -> RLE | None:
    present = [r for r in rles if r is not None]
    if not present:
        return None
    height, width = (int(v) for v in present[0]["size"])
    return masks.union(present, height, width)


def rle_problem(rle: Any, size: tuple[int, int]) -> str | None:
    """What is wrong with one per-frame mask entry of mask_dict.json for a frame of ``size`` (H, W),
    or None when it is a well-formed COCO RLE of that size (``rvt_bench.core.masks.rle_problem``: the runs must
    sum to exactly H*W, so counts that overrun the frame or stop short are caught here, at load)."""
    return masks.rle_problem(rle, size)
