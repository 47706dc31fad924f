"""ReasonSeg (LISA, CVPR 2024) loader: reasoning segmentation of single images from LISA's
<split>/<name>.jpg + LabelMe <name>.json. Format, ground truth as LISA builds it, options, edge cases
and bad data: docs/benchmarks/reasonseg.md.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rvt_bench.core import masks
from rvt_bench.loaders.base import Dataset, existing_splits, layout_hint, read_json, require_dir, require_keys
from rvt_bench.core.frames import frame_size
from rvt_bench.core.types import DatasetFormatError, InstanceAnnotation, Sample, Target

PUBLISHED = "https://github.com/dvlab-research/LISA#dataset (ReasonSeg)"
LAYOUT = "  <split>/<name>.jpg and <split>/<name>.json (LabelMe JSON with 'text', 'is_sentence', 'shapes')"
JSON_ENCODINGS = ("utf-8", "cp1252")  # LISA's fallback order
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
DEMO_META_KEYS = ("level", "category")
QUERY_LENGTHS = {"all": None, "short": False, "long": True}  # -> the is_sentence value kept


class ReasonSegDataset(Dataset):
    """ReasonSeg split as a sequence of image Samples, sorted by image name.

    root:  the ``ReasonSeg`` directory (holding ``train/``, ``val/``, ``test/``); None with hf_dataset.
    split: sub-directory to read ("val", "test", "train").
    hf_dataset, hf_revision: a hub copy instead of root (rvt_bench.loaders.reasonseg_hub): LISA's
        files, or Seg-Zero's parquet copy (boolean masks, no is_sentence; a warning says so).
    query_length: "all" | "short" | "long" (by ``is_sentence``; module docstring).
    all_texts: False = ``text[0]`` only (LISA); True = one Sample per text.

    Each Sample: id = image stem (``<stem>#<k>`` with all_texts), modality "image", task
    "segmentation", one frame;
    ``target.masks = [RLE of label 1]`` and ``target.ignore = [RLE of label 255, or None when the
    image has no ignore shape]``, at the EXIF-oriented image size;
    ``meta = {"name", "is_sentence"}`` (+ "text_index" with all_texts, + "level", "category" when
    the JSON has them);
    ``annotations`` from the optional instances sidecar, else None.
    A per-image problem (bad JSON, bad shapes, missing or unreadable image) is recorded in
    ``errors`` and the image left out (module docstring). Raises DatasetFormatError when the root or
    split directory is missing (naming the splits that exist), when the split holds no JSON, or when
    every image failed; ValueError for an unknown query_length.
    """

    name = "reasonseg"

    def __init__(self, root: str | Path | None, split: str = "val", query_length: str = "all", all_texts: bool = False,
                 hf_dataset: str | None = None, hf_revision: str | None = None) -> None:
        super().__init__()
        if query_length not in QUERY_LENGTHS:
            raise ValueError(f"reasonseg: query_length must be one of {sorted(QUERY_LENGTHS)}, got {query_length!r}")
        self.split = split
        self.query_length = query_length
        self.all_texts = bool(all_texts)
        if hf_dataset is not None:  # rvt_bench.loaders.reasonseg_hub: Seg-Zero's parquet, or LISA's files in a hub repo
            from rvt_bench.loaders import reasonseg_hub

            root = reasonseg_hub.load(self, str(hf_dataset), hf_revision)
            if root is None:
                self.root = None
                return
        if root is None:
            raise DatasetFormatError(f"{self.name}: set dataset.root to LISA's ReasonSeg directory ({PUBLISHED}) or "
                                     f"dataset.hf_dataset to a hub copy (docs/benchmarks/reasonseg.md 'Data by hub id')")
        self.root = Path(root)
        layout = f"{self.root}/\n{LAYOUT}"
        if not self.root.is_dir():
            require_dir(self.root / split, dataset=self.name, layout=layout, published=PUBLISHED)
        if not (self.root / split).is_dir():
            present = [d.name for d in self.root.iterdir() if d.is_dir() and any(d.glob("*.json"))]
            raise DatasetFormatError(
                f"{self.name}: no split {split!r} in {self.root} (expected the directory {self.root / split}); "
                f"splits present: {existing_splits(present)}; {layout_hint(layout, PUBLISHED)}"
            )
        split_dir = self.root / split
        json_paths = sorted(split_dir.glob("*.json"))
        if not json_paths:
            raise DatasetFormatError(
                f"{self.name}: {split_dir} holds no <name>.json annotation; {layout_hint(LAYOUT, PUBLISHED)}"
            )
        keep = QUERY_LENGTHS[query_length]
        for path in json_paths:
            with self.sample_errors(path.stem):
                samples = self._load(path)
                if keep is None or samples[0].meta["is_sentence"] is keep:
                    self._samples.extend(samples)
        self.require_some_samples(str(split_dir))

    def _load(self, json_path: Path) -> list[Sample]:
        stem = json_path.stem
        image_path = _image_for(json_path)
        anno = read_json(json_path, JSON_ENCODINGS)
        require_keys(anno, ("text", "is_sentence", "shapes"), str(json_path))
        texts = anno["text"]
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t.strip() for t in texts):
            raise DatasetFormatError(f"{json_path}: field 'text' must be a non-empty list of non-empty str, "
                                     f"got {str(anno['text'])[:80]}")
        if not isinstance(anno["is_sentence"], bool):
            raise DatasetFormatError(f"{json_path}: field 'is_sentence' must be true or false, got {anno['is_sentence']!r}")
        if not isinstance(anno["shapes"], list):
            raise DatasetFormatError(f"{json_path}: 'shapes' must be a list of LabelMe shapes, got {type(anno['shapes']).__name__}")
        height, width = frame_size(image_path)
        try:
            label_map = masks.rasterize_labelme(anno["shapes"], height, width)
        except DatasetFormatError as exc:
            raise DatasetFormatError(f"{json_path}: {exc}") from exc
        ignore = label_map == masks.IGNORE_VALUE
        meta = {"name": stem, "is_sentence": bool(anno["is_sentence"])}
        meta.update({k: anno[k] for k in DEMO_META_KEYS if k in anno})
        # shared by the rephrasings of one image: the ground truth does not depend on the text
        target = Target(masks=[masks.encode(label_map == 1)], ignore=[masks.encode(ignore) if ignore.any() else None])
        annotations = _read_instances(json_path.parent / "instances" / f"{stem}.json", height, width)
        chosen = list(enumerate(texts)) if self.all_texts else [(0, texts[0])]
        return [
            Sample(
                id=f"{stem}#{k}" if self.all_texts else stem,
                dataset=self.name,
                split=self.split,
                modality="image",
                frames=[str(image_path)],
                frame_ids=[stem],
                query=text,
                task="segmentation",
                target=target,
                meta={**meta, "text_index": k} if self.all_texts else dict(meta),
                annotations=annotations,
            )
            for k, text in chosen
        ]


def _image_for(json_path: Path) -> Path:
    for suffix in IMAGE_SUFFIXES:
        candidate = json_path.with_suffix(suffix)
        if candidate.exists():  # a FIFO or a device is refused by the frame reader, by name
            return candidate
    raise DatasetFormatError(f"{json_path}: no image beside it (looked for {json_path.stem}{{{','.join(IMAGE_SUFFIXES)}}})")


def _read_instances(path: Path, height: int, width: int) -> list[InstanceAnnotation] | None:
    """The demo's instances sidecar as one-frame InstanceAnnotations, or None when absent."""
    if not os.path.lexists(path):  # a FIFO or a device at its name is read, and refused
        return None
    data = read_json(path)
    require_keys(data, ("instances",), str(path))
    if not isinstance(data["instances"], list):
        raise DatasetFormatError(f"{path}: 'instances' must be a list, got {type(data['instances']).__name__}")
    out = []
    for k, inst in enumerate(data["instances"]):
        require_keys(inst, ("id", "label", "points"), f"{path} instance {k}")
        try:
            mask = masks.rasterize_polygon(inst["points"], height, width)
        except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: a coordinate beyond int32 (1e30)
            raise DatasetFormatError(f"{path} instance {k}: points must be [[x, y], ...]: {exc}") from exc
        out.append(InstanceAnnotation(id=str(inst["id"]), label=str(inst["label"]), masks=[masks.encode(np.asarray(mask))]))
    return out
