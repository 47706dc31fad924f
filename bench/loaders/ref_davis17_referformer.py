"""Ref-DAVIS17 as ReferFormer scores it (wjn922/ReferFormer@06fc218f5d8f04730f81471a15ed89ea7e4d30d8:
inference_davis.py, scripts/dist_test_davis.sh) with davis2017-evaluation's unsupervised task
(davisvideochallenge/davis2017-evaluation@ac7c43fca936f9722837b7fbd337d284ba37004b).
Format, quirks and bad data: docs/benchmarks/ref_davis17.md ("ReferFormer's protocol").

Layout (``root``; ReferFormer's tools/data/convert_davis_to_ytvos.py)::

    <root>/meta_expressions/<split>/meta_expressions.json   {"videos": {video: {"frames": [...],
                                                              "expressions": {exp_id: {"exp", "obj_id"}}}}}
    <root>/<split>/JPEGImages/<video>/<frame>.jpg
    <root>/<split>/Annotations/<video>/<frame>.png           DAVIS 2017 Annotations_unsupervised (palette
                                                              PNGs: object ids, 255 void); or ``annotations``

ReferFormer's numbering (inference_davis.py): a video's expressions in stored (JSON) order, 4 per
object (convert_davis_to_ytvos.py writes annotator 1 first-frame, annotator 1 full-video,
annotator 2 first-frame, annotator 2 full-video), ``num_obj = len(expressions) // 4``; expression
``obj * 4 + k`` is annotator set ``anno_k``'s object ``obj + 1``, the value it gets in that set's
label map. GT as davis2017 reads it: the objects are ids 1..max of the **first** frame (void 255
taken out first); an id above that maximum is background, an id below it absent from the first
frame is still an object.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from rvt_bench.core import files, masks
from rvt_bench.core.types import DatasetFormatError, InstanceAnnotation, Sample, Target
from rvt_bench.loaders.base import Dataset, read_json, require_dir, require_file, require_keys

PUBLISHED = ("https://github.com/wjn922/ReferFormer/blob/main/docs/data.md (DAVIS-2017-Unsupervised-trainval-480p "
             "+ davis_text_annotations, converted by tools/data/convert_davis_to_ytvos.py)")
ANNOTATORS = 4  # ReferFormer: "since there are 4 annotations" (2 annotators x first-frame / full-video)
VOID = 255  # davis2017 DAVIS.VOID_LABEL


def layout(root: Path | str, split: str = "valid") -> str:
    return (f"{root}/\n  meta_expressions/{split}/meta_expressions.json\n  {split}/JPEGImages/<video>/<frame>.jpg\n"
            f"  {split}/Annotations/<video>/<frame>.png  (DAVIS 2017 Annotations_unsupervised/480p)")


def read_label_png(path: Path) -> np.ndarray:
    """(H, W) array of a label PNG's stored values, as davis2017 reads it (``np.array(Image.open(p))``:
    palette indices, or gray values), read through rvt_bench.core.files (a regular file, at most
    dataset.limits.max_file_mb, at most max_image_pixels from its header before any decode).
    Raises DatasetFormatError naming the file when it is missing, not a regular file, over a limit,
    undecodable or not one channel."""
    array = files.read_image(path, "GT PNG")
    if array.ndim != 2:
        raise DatasetFormatError(f"{path}: expected a one-channel (palette or gray) label PNG, got shape {array.shape}")
    return array


def frame_masks(frame: np.ndarray, n: int) -> tuple[object, list]:
    """(void RLE or None, [RLE or None of object g + 1 for g < n]) of one label frame (H, W), as
    davis2017 ``get_all_masks`` splits it; only the values present are compared (one count first)."""
    present = np.bincount(frame.ravel(), minlength=VOID + 1) if frame.dtype == np.uint8 else None
    v = frame == VOID
    out = []
    for g in range(n):
        if present is not None and not present[g + 1]:  # no pixel of it: the mask is empty
            out.append(None)
            continue
        m = frame == g + 1
        out.append(masks.encode(m) if m.any() else None)
    return (masks.encode(v) if v.any() else None), out


def gt_objects(gt_dir: Path, video: str, frames: list[str]) -> tuple[list[list], list]:
    """davis2017 ``get_all_masks(seq, True)`` on the label PNGs ``<gt_dir>/<video>/<frame>.png`` of
    `frames`: (objects, void) where objects[g][t] is the RLE of object g + 1 in frame t (None when
    absent), g < max of frame 0 after void removal, and void[t] the RLE of the frame's 255 pixels
    (None when none).

    One frame is decoded at a time (a video's frames decoded together would cost frames x pixels),
    and a frame name listed again is read once (its RLEs are reused): the work is the distinct
    files'. Raises DatasetFormatError for a PNG read_label_png refuses, a first frame with a label
    above 254 (DAVIS label maps are 8-bit), a frame of another size than the first, and
    (FileLimitError) a video or frame name that leads out of its folder."""
    folder = files.inside(gt_dir, video, "video name")
    done: dict[str, tuple[object, list]] = {}
    n, shape = 0, None
    for f in frames:
        if f in done:
            continue
        path = files.inside(folder, f"{f}.png", f"video {video!r} frame name")
        frame = read_label_png(path)
        if shape is None:
            shape, n = frame.shape, int(np.where(frame == VOID, 0, frame).max())
            if n >= VOID:  # a 16-bit label map: davis2017 would build n x frames x pixels masks
                raise DatasetFormatError(f"{path}: the first frame holds label {n}; DAVIS label maps are 8-bit, "
                                         f"objects 1..{VOID - 1} (255 is void)")
        elif frame.shape != shape:
            raise DatasetFormatError(f"{path}: GT PNGs of different sizes: {list(frame.shape)} [H, W], the video's first "
                                     f"is {list(shape)}")
        done[f] = frame_masks(frame, n)
        del frame
    void = [done[f][0] for f in frames]
    objects = [[done[f][1][g] for f in frames] for g in range(n)]
    return objects, void


class RefDAVIS17ReferFormerDataset(Dataset):
    """One Sample per expression ReferFormer runs (module docstring), in stored video order.

    root: the converted Ref-DAVIS17 directory (module docstring); split: "valid" (default).
    annotations: None = ``<root>/<split>/Annotations``, else a directory (absolute or under root)
      holding ``<video>/<frame>.png``, e.g. ``DAVIS/Annotations_unsupervised/480p``.

    Each Sample: id "<video>/<exp_id>", frames = the video's JPEGs in ``frames`` order, frame_ids =
    those names; meta = {"video", "exp_id", "annotator" (0..3, the folder anno_<k>), "object" (its
    value in the label map, 1-based), "objects" (num_obj), "obj_id" (the JSON's)}; annotations =
    every GT object of the video as davis2017 counts them (id "1".."n"); target.masks = GT object
    obj_id's masks (all None when obj_id is not one of them); target.ignore = the void pixels.
    Data errors (the video's expressions left out): a video without frames or expressions, a GT PNG
    missing, unreadable or over dataset.limits (not a regular file, too large, over max_image_pixels:
    checked before any decode), GT PNGs of different sizes, a video or frame name that leads out of
    its folder ('..', absolute). Raises DatasetFormatError for a missing root, meta file or
    annotations directory, or a meta without "videos".
    """

    name = "ref_davis17_referformer"

    def __init__(self, root: str | Path, split: str = "valid", annotations: str | None = None) -> None:
        super().__init__()
        self.root, self.split = Path(root), split
        expected = layout(self.root, split)
        require_dir(self.root, dataset=self.name, layout=expected, published=PUBLISHED)
        meta_path = require_file(self.root / "meta_expressions" / split / "meta_expressions.json",
                                 dataset=self.name, layout=expected, published=PUBLISHED)
        gt_dir = self.root / split / "Annotations" if annotations is None else Path(annotations)
        if not gt_dir.is_absolute():
            gt_dir = self.root / gt_dir
        require_dir(gt_dir, dataset=self.name, layout=expected, published=PUBLISHED)
        meta = read_json(meta_path)
        require_keys(meta, ("videos",), str(meta_path))
        videos = meta["videos"]
        if not isinstance(videos, dict):
            raise DatasetFormatError(f"{meta_path}: 'videos' must be an object of video -> {{frames, expressions}}")
        image_root = self.root / split / "JPEGImages"
        for video in sorted(videos):  # davis2017 scores ImageSets/2017/val.txt's order, alphabetical
            vid = videos[video]
            exps = vid.get("expressions") if isinstance(vid, dict) else None
            frames = vid.get("frames") if isinstance(vid, dict) else None
            if not isinstance(exps, dict) or not isinstance(frames, list) or not frames \
                    or not all(isinstance(f, str) for f in frames):
                self.record_error(str(video), f"{meta_path}: video {video!r} needs 'frames' (non-empty list of str) "
                                  f"and 'expressions' (object)")
                continue
            exp_ids = list(exps)  # stored order: ReferFormer's list(expressions.keys())
            num_obj = len(exp_ids) // ANNOTATORS
            if len(exp_ids) % ANNOTATORS:
                self.warn(f"{video}: {len(exp_ids)} expressions, not a multiple of {ANNOTATORS}: ReferFormer runs "
                          f"the first {num_obj * ANNOTATORS} (expressions {exp_ids[num_obj * ANNOTATORS:]} unused)")
            try:
                objects, void = gt_objects(gt_dir, str(video), frames)
                video_frames = [str(files.inside(files.inside(image_root, str(video), "video name"), f"{f}.jpg",
                                                 f"video {video!r} frame name")) for f in frames]
            except DatasetFormatError as exc:
                for exp_id in exp_ids[:num_obj * ANNOTATORS]:
                    self.record_error(f"{video}/{exp_id}", str(exc))
                continue
            for obj in range(num_obj):
                for anno in range(ANNOTATORS):
                    exp_id = exp_ids[obj * ANNOTATORS + anno]
                    with self.sample_errors(f"{video}/{exp_id}"):
                        self._samples.append(self._sample(video, exp_id, exps[exp_id], frames, anno, obj + 1, num_obj,
                                                          objects, void, video_frames))
        self.require_some_samples(str(meta_path))

    def _sample(self, video: str, exp_id: str, exp, frames: list[str], anno: int, obj: int, num_obj: int,
                objects: list[list], void: list, video_frames: list[str]) -> Sample:
        if not isinstance(exp, dict) or not isinstance(exp.get("exp"), str):
            raise DatasetFormatError(f"expression {video}/{exp_id}: needs 'exp' (str)")
        obj_id = str(exp.get("obj_id", ""))
        own = int(obj_id) - 1 if obj_id.isdigit() and 0 < int(obj_id) <= len(objects) else None
        meta = {"video": video, "exp_id": exp_id, "annotator": anno, "object": obj, "objects": num_obj, "obj_id": obj_id}
        return Sample(id=f"{video}/{exp_id}", dataset=self.name, split=self.split, modality="video",
                      frames=list(video_frames), frame_ids=list(frames),
                      query=exp["exp"], task="segmentation",
                      target=Target(masks=list(objects[own]) if own is not None else [None] * len(frames),
                                    ignore=list(void)),
                      meta=meta,
                      annotations=[InstanceAnnotation(id=str(g + 1), label="", masks=list(m)) for g, m in enumerate(objects)])
