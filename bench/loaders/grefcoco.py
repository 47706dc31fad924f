"""gRefCOCO (GRES, generalized referring expression segmentation: one, several or no target per
expression) from its release layout, read as ReLA evaluates it (henghuiding/ReLA@3ca9551:
gres_model/data/datasets/grefer.py G_REFER + grefcoco.py load_grefcoco_json + the test
RefCOCOMapper, refcoco_mapper.py). Format, the evaluator's resolution, what its loader drops and
bad data: docs/benchmarks/grefcoco.md.

Layout (``root`` = ReLA's ``datasets`` directory)::

    <root>/grefcoco/grefs(unc).json     the refs (or grefs(unc).p, a plain-data pickle, which G_REFER reads first)
    <root>/grefcoco/instances.json      COCO images + annotations (polygons)
    <root>/images/train2014/<file_name>

Splits: train, val, testA, testB (a ref's ``split`` equal to it, G_REFER.getRefIds).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from rvt_bench.core import masks, safe_pickle
from rvt_bench.core.frames import frame_size
from rvt_bench.core.types import DatasetFormatError, Sample, Target
from rvt_bench.loaders import grefcoco_hub
from rvt_bench.loaders.base import Dataset, read_json, require_dir, require_file, require_keys
from rvt_bench.loaders.refcoco import _check_canvas, _check_polygon_cost, _check_polygon_range, ref_image

PUBLISHED = "https://github.com/henghuiding/gRefCOCO (grefs(unc).json + instances.json) and COCO train2014 images"
SPLITS = ("train", "val", "testA", "testB")
IMAGE_DIR = ("images", "train2014")
NO_TARGET = -1  # G_REFER: a ref whose ann_id is [-1] names no object (Anns[-1] = None)


def layout(root: Path | str, split_by: str = "unc") -> str:
    return (f"{root}/\n  grefcoco/grefs({split_by}).json and grefcoco/instances.json\n"
            f"  {'/'.join(IMAGE_DIR)}/<file_name>")


def scaled_polygon(poly: list, width: int, height: int, size: int | None) -> np.ndarray:
    """One COCO polygon as ReLA's test mapper hands it to pycocotools: the flat coordinates as
    ``np.asarray(poly).reshape(-1, 2)`` (integer coordinates stay an integer array), scaled in place
    by detectron2's ResizeTransform.apply_coords to a ``size`` x ``size`` image (x * (size / W),
    y * (size / H); into an integer array the products are truncated toward zero, as numpy's
    assignment does), flattened to float64. ``size`` None: the coordinates unscaled."""
    coords = np.asarray(poly).reshape(-1, 2)
    if size is not None:
        coords[:, 0] = coords[:, 0] * (size * 1.0 / width)
        coords[:, 1] = coords[:, 1] * (size * 1.0 / height)
    return coords.reshape(-1).astype("float64")


def rela_gt(anns: list[dict], height: int, width: int, size: int | None = 480) -> np.ndarray:
    """The merged GT ReLA's evaluator compares with, bool [size, size] ([H, W] when size is None).

    anns: the ref's annotations (COCO dicts). As load_grefcoco_json + RefCOCOMapper: an ``iscrowd``
    annotation is dropped; of each polygon list only the polygons with an even number of at least 6
    coordinates are kept; each kept polygon scaled (scaled_polygon), rasterized by pycocotools at the
    mapper's size and OR-ed (convert_coco_poly_to_mask's ``any``, ``_merge_masks``' clamped sum).
    Raises DatasetFormatError where ReLA's own code stops with an exception: an RLE (dict)
    segmentation of a non-crowd annotation (the mapper reads ``.polygons``), one with no valid
    polygon (load_grefcoco_json's unbound counter), a ref whose annotations are all crowd (the
    mapper's ``assert empty``), an empty segmentation (``assert segm``), a coordinate that is not
    finite or lies far outside the image, or polygons over RefCOCO's bounds (refcoco._check_polygon_cost:
    dataset.limits.max_polygon_points points per annotation, a boundary's length).
    """
    from pycocotools import mask as coco_mask

    _check_canvas(height, width)
    out_h, out_w = (height, width) if size is None else (size, size)
    merged = np.zeros((out_h, out_w), bool)
    kept = 0
    for ann in anns:
        if ann.get("iscrowd"):
            continue
        segm = ann.get("segmentation")
        if not segm:
            raise DatasetFormatError(f"annotation {ann.get('id')} has no segmentation (ReLA asserts one)")
        if isinstance(segm, dict):
            raise DatasetFormatError(f"annotation {ann.get('id')}: an RLE segmentation on a non-crowd annotation, "
                                     f"which ReLA's test mapper cannot rasterize (it reads polygons)")
        if not isinstance(segm, list) or not all(isinstance(p, list) for p in segm):
            raise DatasetFormatError(f"annotation {ann.get('id')}: segmentation must be a list of polygons")
        polys = [p for p in segm if len(p) % 2 == 0 and len(p) >= 6]
        if not polys:
            raise DatasetFormatError(f"annotation {ann.get('id')} has no valid polygon (at least 6 coordinates, "
                                     f"an even number); ReLA's loader stops on it")
        try:
            coords = [[float(v) for v in p] for p in polys]
            _check_polygon_range(coords, height, width)
            _check_polygon_cost(coords, height, width)
            scaled = [scaled_polygon(p, width, height, size) for p in polys]
            # the polygons' union as one RLE, decoded once: [H, W], not [H, W, polygons] (ReLA's any over them)
            decoded = coco_mask.decode(coco_mask.merge(coco_mask.frPyObjects(scaled, out_h, out_w), intersect=False))
        except DatasetFormatError as exc:
            raise DatasetFormatError(f"annotation {ann.get('id')}: {exc}") from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise DatasetFormatError(f"annotation {ann.get('id')}: segmentation cannot be decoded: {exc}") from None
        merged |= decoded.reshape(out_h, out_w).astype(bool)
        kept += 1
    if not kept:
        raise DatasetFormatError("every annotation of this target ref is a crowd annotation: ReLA's mapper "
                                 "finds no instance for a ref that is not no-target and stops")
    return merged


class GRefCOCODataset(Dataset):
    """One Sample per sentence of every ref in the split, as ReLA evaluates gRefCOCO.

    root:       ReLA's ``datasets`` directory (module docstring).
    split:      "val" (default), "testA", "testB" or "train".
    image_size: the side of the square the test mapper resizes every image to (ReLA's
                cfg.INPUT.IMAGE_SIZE, 480 in every config it ships); the GT is rasterized there from
                the rescaled polygons (rela_gt). None: the corrected variant "image size", the GT at the
                image's own size from the polygons as given.
    split_by:   the refs file's name part, "unc" (the one gRefCOCO ships).
    images:     the folder of the train2014 images; None: <root>/images/train2014 (required with hf_dataset).
    hf_dataset, hf_revision: the release's annotation files from the hub instead of <root>/grefcoco
                (rvt_bench.loaders.grefcoco_hub: FudanCVL/gRefCOCO, or a local folder laid out as it).

    Each Sample: id = str(sent_id); modality "image", task "segmentation", one frame (the train2014
    image); query = the sentence's ``raw`` text (what ReLA tokenizes); target.masks = [RLE of the
    merged GT at the image's size] (the polygons as given, ReLA's drops; an empty mask for a
    no-target ref): what a model at image size is shown against; meta = {"image_id", "ref_id",
    "sent_id", "ann_ids", "no_target" (ann_id == [-1]), "eval_size" ([H, W] scored at),
    "eval_gt" (RLE of the merged GT at image_size x image_size, what ReLA scores against; absent
    when image_size is None), "height", "width" (the image's, from instances.json), "ref_index",
    "sent_index" (ReLA's order)}.
    A ref with an annotation, image record or image file that is missing, an image whose size
    differs from instances.json's (detectron2's check_image_size), a no-target ref whose ann_id list
    holds more than -1, or a GT rela_gt refuses, is a data error for each of its sentences; so is a
    sentence whose sent_id repeats one already read. Raises DatasetFormatError for an unknown split,
    a missing refs / instances file, or when the split selects no ref.
    """

    name = "grefcoco"

    def __init__(self, root: str | Path | None, split: str = "val", image_size: int | None = 480,
                 split_by: str = "unc", images: str | Path | None = None, hf_dataset: str | None = None,
                 hf_revision: str | None = None) -> None:
        super().__init__()
        if root is None and hf_dataset is None:
            raise DatasetFormatError(f"grefcoco: set dataset.root to ReLA's datasets directory, or dataset.hf_dataset="
                                     f"{grefcoco_hub.HUB_ID} with dataset.loader.images=<COCO train2014>; {PUBLISHED}")
        if split not in SPLITS:
            raise DatasetFormatError(f"grefcoco: split {split!r} is not one of {list(SPLITS)}")
        if image_size is not None and (isinstance(image_size, bool) or not isinstance(image_size, int) or image_size <= 0):
            raise ValueError(f"grefcoco: image_size must be a positive int (ReLA: 480) or null, got {image_size!r}")
        if not isinstance(split_by, str) or not split_by.isidentifier():
            raise DatasetFormatError(f"grefcoco: split_by must be a plain name such as 'unc', got {split_by!r}")
        image_folder = Path(images) if images is not None else None
        if hf_dataset is not None:  # the release's annotation files on the hub (rvt_bench.loaders.grefcoco_hub)
            if images is None:
                raise DatasetFormatError(f"grefcoco: {hf_dataset} holds the annotations only: set dataset.loader.images "
                                         f"to the COCO train2014 image folder (docs/benchmarks/grefcoco.md 'Hub copies')")
            annotations = grefcoco_hub.load(self, str(hf_dataset), hf_revision, split_by)
            root = annotations
        else:
            annotations = Path(root) / "grefcoco"
        self.root, self.split, self.image_size = Path(root), split, image_size
        expected = layout(self.root, split_by)
        require_dir(self.root, dataset=self.name, layout=expected, published=PUBLISHED)
        refs = self._read_refs(annotations, split_by, expected)
        inst_path = require_file(annotations / "instances.json", dataset=self.name, layout=expected,
                                 published=PUBLISHED)
        instances = read_json(inst_path)
        require_keys(instances, ("images", "annotations"), str(inst_path))
        if not isinstance(instances["images"], list) or not isinstance(instances["annotations"], list):
            raise DatasetFormatError(f"{inst_path}: 'images' and 'annotations' must be lists (COCO instances format)")
        images = {im.get("id"): im for im in instances["images"] if isinstance(im, dict)}
        anns = {a.get("id"): a for a in instances["annotations"] if isinstance(a, dict)}
        chosen = [(k, r) for k, r in enumerate(refs) if isinstance(r, dict) and r.get("split") == split]
        if not chosen:
            present = sorted({str(r.get("split")) for r in refs if isinstance(r, dict)})
            raise DatasetFormatError(f"grefcoco: no ref in split {split!r}; the ref splits present are {present}")
        self._seen: set[str] = set()
        image_dir = image_folder if image_folder is not None else self.root.joinpath(*IMAGE_DIR)
        for k, ref in chosen:  # ReLA: the refs file's order, each ref's sentences in order
            self._add_ref(ref, k, images, anns, image_dir)
        self.require_some_samples(f"grefcoco split {split}")

    def _read_refs(self, folder: Path, split_by: str, expected: str) -> list:
        pickled = folder / f"grefs({split_by}).p"  # G_REFER reads the pickle first when both exist
        if pickled.is_file():
            refs = safe_pickle.load(pickled)
            where = pickled
        else:
            where = require_file(folder / f"grefs({split_by}).json", dataset=self.name, layout=expected,
                                 published=PUBLISHED)
            refs = read_json(where)
        if not isinstance(refs, list):
            raise DatasetFormatError(f"{where}: expected a list of refs, got {type(refs).__name__}")
        return refs

    def _add_ref(self, ref: dict, k: int, images: dict, anns: dict, image_dir: Path) -> None:
        sents = ref.get("sentences")
        if not isinstance(sents, list) or not all(isinstance(s, dict) and isinstance(s.get("raw"), str) for s in sents):
            self.record_error(f"grefs[{k}]", "'sentences' must be a list of {'raw': str, 'sent_id': ...}")
            return
        ids = [str(s.get("sent_id", f"{ref.get('ref_id')}.{j}")) for j, s in enumerate(sents)]
        try:
            require_keys(ref, ("ref_id", "ann_id", "image_id"), f"grefs[{k}]")
            ann_ids = ref["ann_id"] if isinstance(ref["ann_id"], list) else [ref["ann_id"]]
            image = images.get(ref["image_id"])
            path, height, width = ref_image(image, ref, image_dir)
            if frame_size(path) != (height, width):
                raise DatasetFormatError(f"ref {ref['ref_id']}: image {path} is {list(frame_size(path))} (H, W), "
                                         f"instances.json says {[height, width]} (detectron2 stops on it)")
            no_target = NO_TARGET in ann_ids
            if no_target and ann_ids != [NO_TARGET]:
                raise DatasetFormatError(f"ref {ref['ref_id']}: ann_id {ann_ids} mixes -1 (no target) with objects")
            side = (height, width) if self.image_size is None else (self.image_size, self.image_size)
            if no_target:
                gt, at_eval = np.zeros((height, width), bool), np.zeros(side, bool)
            else:
                missing = [a for a in ann_ids if a not in anns]
                if missing:
                    raise DatasetFormatError(f"ref {ref['ref_id']}: annotation(s) {missing} not in instances.json")
                try:
                    gt = rela_gt([anns[a] for a in ann_ids], height, width, None)
                    at_eval = gt if self.image_size is None else rela_gt([anns[a] for a in ann_ids], height, width,
                                                                          self.image_size)
                except DatasetFormatError as exc:
                    raise DatasetFormatError(f"ref {ref['ref_id']}: {exc}") from None
        except (DatasetFormatError, TypeError, ValueError) as exc:
            # a TypeError: an id of another JSON type (a list or object as image_id / ann_id is unhashable)
            why = str(exc) if isinstance(exc, DatasetFormatError) else \
                f"grefs[{k}] (ref {str(ref.get('ref_id'))[:40]}): malformed ref: {exc}"
            for sid in ids:
                self.record_error(sid, why)
            return
        target = Target(masks=[masks.encode(gt)])
        eval_gt = {} if self.image_size is None else {"eval_gt": masks.encode(at_eval)}
        for j, (sid, sent) in enumerate(zip(ids, sents)):
            if sid in self._seen:
                self.record_error(sid, f"ref {ref['ref_id']}: sent_id {sid} repeats an earlier sentence's")
                continue
            self._seen.add(sid)
            self._samples.append(Sample(
                id=sid, dataset=self.name, split=self.split, modality="image", frames=[str(path)],
                frame_ids=[Path(str(image["file_name"])).stem], query=sent["raw"], task="segmentation",
                target=target,
                meta={"image_id": ref["image_id"], "ref_id": ref["ref_id"], "sent_id": sent.get("sent_id"),
                      "ann_ids": list(ann_ids), "no_target": no_target, "eval_size": list(side),
                      "height": height, "width": width, "ref_index": k, "sent_index": j, **eval_gt},
            ))
