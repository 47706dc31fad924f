"""ReVOS (VISA, Yan et al. ECCV 2024): reasoning video object segmentation.

On-disk format, as read by VISA ``tools/eval_revos.py`` and ``tools/generate_foreground_mask.py``::

    <root>/JPEGImages/<video>/<frame>.jpg        <video> may be nested, e.g. "UVO/all/<id>"
    <root>/meta_expressions_<split>_.json        {"videos": {<video>: {"vid_id", "height", "width",
                                                   "frames": [<frame>, ...],
                                                   "expressions": {<exp_id>: {"exp", "obj_id": [int],
                                                       "anno_id": [int], "type_id": 0|1|2}}}}}
    <root>/mask_dict.json                        {str(anno_id): [per frame COCO RLE or null]}
    <root>/mask_dict_foreground.json             {<video>: {"masks_rle": [per frame RLE of the union
                                                   of all the video's objects], "foreground_ratio": [..]}}

``mask_dict[anno_id][i]`` belongs to ``frames[i]`` in the meta's order (eval_revos indexes it so).
type_id: 0 referring, 1 reasoning, 2 no target (the expression refers to nothing in the video).
Ground truth of an expression = per frame union of its anno_ids' masks (eval_revos sums them).

Frame-count mismatches: upstream reports some TAO/UVO videos whose anno mask lists are not as long
as the video's frame list. eval_revos indexes ``mask_dict[anno_id][frame_idx]`` for each frame, so a
short list raises there and VISA records that expression as J = F = 0; a long list has its tail
ignored. ``on_length_mismatch`` chooses what happens here, always with a warning naming the video
and anno id: "warn" (default) aligns by index as VISA does (extra masks dropped, missing ones = no
object in that frame, which differs from VISA's J = F = 0 for a short list), "skip" leaves out every
expression of that video that uses the anno id, "error" raises DatasetFormatError. The same rule
applies to a foreground list whose length differs from the frame count.

Foreground (the robustness metric R): with ``foreground`` None (default) mask_dict_foreground.json
is read when present and each sample's ``target.foreground`` is its video's list (shared by the
video's samples; None for a video the file lacks, with a warning); True requires the file and every
video; False never reads it (R is then not reported).

Demo extensions (absent from the real release; read only when present): extra keys on an expression
(the demo's "level", "category") are copied to ``Sample.meta``; ``<root>/instances.json`` =
``{<video>: [{"anno_id", "label", "depth": [per frame metres or null] | null}]}`` gives object labels
and depth for ``Sample.annotations``.
"""
from __future__ import annotations

import logging
from pathlib import Path

from bench import masks
from bench.datasets.base import Dataset, read_json, require_dir, require_file, require_keys
from bench.types import RLE, DatasetFormatError, InstanceAnnotation, Sample, Target

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

log = logging.getLogger(__name__)


class _SkipExpression(Exception):
    """An anno track of the wrong length under on_length_mismatch="skip"."""


class ReVOSDataset(Dataset):
    """ReVOS split as a sequence of video Samples, one per expression.

    root:  the ``ReVOS`` directory; split: "valid" or "train" (selects meta_expressions_<split>_.json).
    on_length_mismatch: "warn" | "skip" | "error", for an anno (or foreground) mask list whose length
           differs from the video's frame count (module docstring).
    foreground: None (read mask_dict_foreground.json when present), True (required), False (never).

    Order: videos and expressions in the meta file's order. Each Sample: id "<video>/<exp_id>",
    modality "video", task "segmentation", frames = JPEGImages/<video>/<frame>.jpg in the meta's
    order; ``target.masks`` = per frame union RLE of the expression's anno masks, None where none of
    them is present (always None for type_id 2 without anno ids);
    ``target.foreground`` = the video's per frame foreground RLEs (see ``foreground``) or None;
    ``meta = {"type_id", "type", "video", "exp_id", "obj_id", "anno_id", ...extra expression keys}``;
    ``annotations`` = every object of the video (anno ids of all its expressions, then any other
    listed in the instances sidecar), one list object shared by all samples of that video.
    Raises DatasetFormatError when a file is missing or malformed (the message names it).
    """

    name = "revos"

    def __init__(self, root: str | Path, split: str = "valid", on_length_mismatch: str = "warn",
                 foreground: bool | None = None) -> None:
        super().__init__()
        if on_length_mismatch not in ON_LENGTH_MISMATCH:
            raise ValueError(f"revos: on_length_mismatch must be one of {ON_LENGTH_MISMATCH}, got {on_length_mismatch!r}")
        self.root = Path(root)
        self.split = split
        self.on_length_mismatch = on_length_mismatch
        self.skipped: list[str] = []  # ids of expressions left out by on_length_mismatch="skip"
        layout = f"{self.root}/\n{LAYOUT}"
        require_dir(self.root, dataset=self.name, layout=layout, published=PUBLISHED)
        require_dir(self.root / "JPEGImages", dataset=self.name, layout=layout, published=PUBLISHED)
        meta_path = require_file(
            self.root / f"meta_expressions_{split}_.json", dataset=self.name, layout=layout, published=PUBLISHED
        )
        mask_path = require_file(self.root / "mask_dict.json", dataset=self.name, layout=layout, published=PUBLISHED)
        meta = read_json(meta_path)
        require_keys(meta, ("videos",), str(meta_path))
        mask_dict = read_json(mask_path)
        if not isinstance(mask_dict, dict):
            raise DatasetFormatError(f"{mask_path}: expected {{anno_id: [per frame RLE or null]}}")
        sidecar_path = self.root / "instances.json"
        sidecar = read_json(sidecar_path) if sidecar_path.is_file() else {}
        self._foreground_path = self.root / "mask_dict_foreground.json"
        self._foreground: dict | None = None
        self._use_foreground = foreground if foreground is not None else self._foreground_path.is_file()
        self._require_foreground = foreground is True
        for video, info in meta["videos"].items():
            self._samples.extend(self._video_samples(video, info, mask_dict, sidecar.get(video), meta_path))

    def _video_samples(self, video: str, info: dict, mask_dict: dict, labels: list | None, meta_path: Path) -> list[Sample]:
        where = f"{meta_path} video {video!r}"
        require_keys(info, ("frames", "expressions"), where)
        frame_ids = [str(f) for f in info["frames"]]
        video_dir = self.root / "JPEGImages" / video
        if not video_dir.is_dir():
            raise DatasetFormatError(f"{where}: frame directory {video_dir} does not exist")
        frames = [str(video_dir / f"{f}.jpg") for f in frame_ids]

        cache: dict[str, list[RLE | None] | _SkipExpression] = {}

        def track(anno_id: object) -> list[RLE | None]:
            # memoised so that a mismatched track warns once per video, not once per use
            if str(anno_id) not in cache:
                try:
                    cache[str(anno_id)] = read_track(anno_id)
                except _SkipExpression as exc:
                    cache[str(anno_id)] = exc
            got = cache[str(anno_id)]
            if isinstance(got, _SkipExpression):
                raise got
            return got

        def read_track(anno_id: object) -> list[RLE | None]:
            rles = mask_dict.get(str(anno_id))
            expected = (f"{self.root / 'mask_dict.json'}: anno_id {anno_id} (video {video!r}) must map to a list "
                        f"of {len(frame_ids)} per-frame RLEs or nulls")
            if not isinstance(rles, list):
                raise DatasetFormatError(f"{expected}, got {type(rles).__name__}")
            # eval_revos treats any falsy entry (null, {}) as "no mask in this frame"
            return self._aligned([r if r else None for r in rles], len(frame_ids), expected)

        samples = []
        foreground = self._video_foreground(video, len(frame_ids))
        annotations = self._annotations(video, info, track, labels, where)
        for exp_id, exp in info["expressions"].items():
            require_keys(exp, EXPRESSION_KEYS, f"{where} expression {exp_id!r}")
            try:
                tracks = [track(a) for a in exp["anno_id"]]
            except _SkipExpression:
                self.skipped.append(f"{video}/{exp_id}")
                continue
            target = [_union([t[i] for t in tracks]) for i in range(len(frame_ids))]
            extra = {k: v for k, v in exp.items() if k not in EXPRESSION_KEYS and k != "exp"}
            type_id = int(exp["type_id"])
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
            for a in exp.get("anno_id", []):
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
            except _SkipExpression:
                continue  # on_length_mismatch="skip": the object is left out with its expressions
            out.append(InstanceAnnotation(id=a, label=str(entry.get("label", "")), masks=track_masks, depth=depth))
        return out

    def _aligned(self, rles: list[RLE | None], num_frames: int, expected: str) -> list[RLE | None]:
        """``rles`` when it has one entry per frame; otherwise per ``on_length_mismatch``: warn and align
        by index (truncate, or pad with None = no object), raise _SkipExpression, or raise."""
        if len(rles) == num_frames:
            return rles
        message = f"{expected}, got {len(rles)} entries"
        if self.on_length_mismatch == "error":
            raise DatasetFormatError(message + " (dataset.on_length_mismatch=error)")
        log.warning("%s (on_length_mismatch=%s)", message, self.on_length_mismatch)
        if self.on_length_mismatch == "skip":
            raise _SkipExpression(message)
        return rles[:num_frames] + [None] * (num_frames - len(rles))

    def _video_foreground(self, video: str, num_frames: int) -> list[RLE | None] | None:
        if not self._use_foreground:
            return None
        try:
            rles = self.foreground(video)
        except DatasetFormatError:
            if self._require_foreground:
                raise
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
            require_file(self._foreground_path, dataset=self.name, layout=LAYOUT, published=PUBLISHED)
            self._foreground = read_json(self._foreground_path)
        entry = self._foreground.get(video) if isinstance(self._foreground, dict) else None
        if not isinstance(entry, dict) or not isinstance(entry.get("masks_rle"), list):
            raise DatasetFormatError(f"{self._foreground_path}: no {{'masks_rle': [...]}} entry for video {video!r}")
        return entry["masks_rle"]


def _union(rles: list[RLE | None]) -> RLE | None:
    present = [r for r in rles if r is not None]
    if not present:
        return None
    height, width = (int(v) for v in present[0]["size"])
    return masks.union(present, height, width)
