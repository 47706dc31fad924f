"""Ref-DAVIS17 (Khoreva et al. 2018: DAVIS 2017 val with referring expressions) as VISA's
``tools/eval_davis17.py`` reads it (cilinyan/VISA@ec158fde9cdf87f702399c73618aa0f1127062e9).
Format, expression numbering, quirks and bad data: docs/benchmarks/ref_davis17.md.

Layout (``root``; VISA's defaults, ReferFormer's data preparation)::

    <root>/meta_expressions/<split>/meta_expressions.json   {"videos": {video: {"frames": [...],
                                                              "expressions": {exp_id: {"exp": str, ...}}}}}
    <root>/<split>/mask_dict.pkl (or mask_dict.json)        {str(anno_id): [RLE or None per frame]}
    <root>/<split>/JPEGImages/<video>/<frame>.jpg

VISA numbers the expressions itself (``get_meta_exp``): videos sorted, each video's expression ids
sorted as strings, ``anno_id`` = 0, 1, ... in that order, and expression ``anno_id``'s GT of frame
``k`` is ``mask_dict[str(anno_id)][k]``, k indexing the video's ``frames`` list as stored (not sorted).
"""
from __future__ import annotations

from pathlib import Path

from rvt_bench.core import files, masks, safe_pickle
from rvt_bench.core.types import DatasetFormatError, Sample, Target
from rvt_bench.loaders.base import Dataset, read_json, require_dir, require_file, require_keys

PUBLISHED = ("https://github.com/wjn922/ReferFormer/blob/main/docs/data.md (Ref-DAVIS17: DAVIS 2017 + the "
             "expressions of Khoreva et al.) and VISA's mask_dict.pkl (https://github.com/cilinyan/VISA)")


def layout(root: Path | str, split: str = "valid") -> str:
    return (f"{root}/\n  meta_expressions/{split}/meta_expressions.json\n  {split}/mask_dict.pkl (or mask_dict.json)\n"
            f"  {split}/JPEGImages/<video>/<frame>.jpg")


class RefDAVIS17Dataset(Dataset):
    """One Sample per (video, expression), in VISA's numbering order (module docstring).

    root: the Ref-DAVIS17 directory (module docstring); split: "valid" (default) or "train".
    mask_dict: None = ``<split>/mask_dict.pkl``, else ``<split>/mask_dict.json``; or a path.

    Each Sample: id "<video>/<exp_id>", modality "video", task "segmentation", frames = the video's
    JPEGs in ``frames`` order, frame_ids = those names; ``target.masks`` = per frame the RLE of
    ``mask_dict[str(anno_id)][k]`` (None where it is empty or None, as VISA's ``if mask_rle``);
    meta = {"video", "exp_id", "anno_id", "obj_id" (when the JSON has it)}.
    The pickle is read by rvt_bench.core.safe_pickle (plain containers and numbers only).
    Data errors (the expression left out, VISA's script would crash on it and drop it): no
    ``mask_dict`` entry for its anno_id, fewer masks than frames, a malformed RLE, a video or frame
    name that leads out of its folder ('..', absolute). Raises
    DatasetFormatError for a missing root, meta or mask file, a mask file that is not plain data,
    or a meta without "videos".
    """

    name = "ref_davis17"

    def __init__(self, root: str | Path, split: str = "valid", mask_dict: str | None = None) -> None:
        super().__init__()
        self.root, self.split = Path(root), split
        expected = layout(self.root, split)
        published = PUBLISHED
        require_dir(self.root, dataset=self.name, layout=expected, published=published)
        meta_path = require_file(self.root / "meta_expressions" / split / "meta_expressions.json",
                                 dataset=self.name, layout=expected, published=published)
        if mask_dict is None:
            mask_path = self.root / split / "mask_dict.pkl"
            if not mask_path.exists() and (self.root / split / "mask_dict.json").exists():
                mask_path = self.root / split / "mask_dict.json"
        else:
            mask_path = Path(mask_dict) if Path(mask_dict).is_absolute() else self.root / split / mask_dict
        require_file(mask_path, dataset=self.name, layout=expected, published=published)
        meta = read_json(meta_path)
        require_keys(meta, ("videos",), str(meta_path))
        videos = meta["videos"]
        if not isinstance(videos, dict):
            raise DatasetFormatError(f"{meta_path}: 'videos' must be an object of video -> {{frames, expressions}}")
        mask_dict_ = read_json(mask_path) if mask_path.suffix == ".json" else safe_pickle.load(mask_path)
        if not isinstance(mask_dict_, dict):
            raise DatasetFormatError(f"{mask_path}: expected a dict of str(anno_id) -> per-frame RLEs, "
                                     f"got {type(mask_dict_).__name__}")
        image_root = self.root / split / "JPEGImages"
        anno_id = 0
        for video in sorted(videos):  # VISA get_meta_exp: videos sorted, exp ids sorted (as strings)
            vid = videos[video]
            exps = vid.get("expressions") if isinstance(vid, dict) else None
            frames = vid.get("frames") if isinstance(vid, dict) else None
            if not isinstance(exps, dict) or not isinstance(frames, list) or not all(isinstance(f, str) for f in frames):
                self.record_error(str(video), f"{meta_path}: video {video!r} needs 'frames' (list of str) and "
                                  f"'expressions' (object)")
                anno_id += len(exps) if isinstance(exps, dict) else 0
                continue
            for exp_id in sorted(exps):
                with self.sample_errors(f"{video}/{exp_id}"):
                    self._samples.append(self._sample(video, exp_id, exps[exp_id], frames, anno_id,
                                                      mask_dict_, mask_path, image_root))
                anno_id += 1
        self.require_some_samples(str(meta_path))

    def _sample(self, video: str, exp_id: str, exp, frames: list[str], anno_id: int, mask_dict: dict,
                mask_path: Path, image_root: Path) -> Sample:
        if not isinstance(exp, dict) or not isinstance(exp.get("exp"), str):
            raise DatasetFormatError(f"expression {video}/{exp_id}: needs 'exp' (str)")
        rles = mask_dict.get(str(anno_id))
        if rles is None:
            raise DatasetFormatError(f"{mask_path}: no entry {str(anno_id)!r} (anno_id of {video}/{exp_id} in VISA's numbering)")
        if not isinstance(rles, list) or len(rles) < len(frames):
            n = len(rles) if isinstance(rles, list) else type(rles).__name__
            raise DatasetFormatError(f"{mask_path}: entry {anno_id} holds {n} masks, the video has {len(frames)} frames")
        gt = []
        for k, rle in enumerate(rles[:len(frames)]):
            if not rle:  # VISA: `if mask_rle:`
                gt.append(None)
                continue
            masks.check_rle(rle, None, f"{mask_path}: entry {anno_id} frame {k}")
            gt.append(masks.compress(rle))
        video_dir = files.inside(image_root, video, "video name")
        paths = [str(files.inside(video_dir, f"{f}.jpg", f"video {video!r} frame name")) for f in frames]
        meta = {"video": video, "exp_id": exp_id, "anno_id": anno_id}
        if "obj_id" in exp:
            meta["obj_id"] = str(exp["obj_id"])
        return Sample(id=f"{video}/{exp_id}", dataset=self.name, split=self.split, modality="video",
                      frames=paths, frame_ids=list(frames),
                      query=exp["exp"], task="segmentation", target=Target(masks=gt), meta=meta)
