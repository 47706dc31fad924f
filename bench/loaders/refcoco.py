"""RefCOCO, RefCOCO+ and RefCOCOg (referring segmentation of COCO train2014 images) from the REFER
layout, read as LISA's ``ValDataset`` reads it (dvlab-research/LISA@3cb2d43, utils/dataset.py and
utils/refer.py). Format, splits, the summed-polygon ground truth and bad data: docs/benchmarks/refcoco.md.

Layout (``root`` = LISA's ``refer_seg`` directory)::

    <root>/<ds>/refs(<splitBy>).p      REFER refs (a Python pickle, read by rvt_bench.core.safe_pickle)
    <root>/<ds>/instances.json         COCO images + annotations (polygons or RLE)
    <root>/images/mscoco/images/train2014/<file_name>

Split names: ``<ds>/<split>`` with REFER's usual splitBy (refcoco, refcoco+: unc; refcocog: umd),
or ``<ds>/<splitBy>/<split>`` (``refcocog/google/val``). ``<split>`` is REFER's ``getRefIds``
filter: train, val, test (every ref whose split contains "test"), testA / testB / testC (every
ref whose split contains the letter), testAB / testBC / testAC (exact).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from rvt_bench.core import files, masks, safe_pickle
from rvt_bench.core.frames import frame_size
from rvt_bench.core.types import DatasetFormatError, Sample, Target
from rvt_bench.loaders.base import Dataset, read_json, require_dir, require_file, require_keys

PUBLISHED = "https://github.com/lichengunc/refer (refs + instances) and COCO train2014 images, as LISA's README lays them out"
DATASETS = ("refcoco", "refcoco+", "refcocog")
SPLIT_BY = {"refcoco": "unc", "refcoco+": "unc", "refcocog": "umd"}  # the split each paper's "val/test" means
SPLITS = ("train", "val", "test", "testA", "testB", "testC", "testAB", "testBC", "testAC")
IMAGE_DIR = ("images", "mscoco", "images", "train2014")
GT_MODES = ("sum", "union")
HUB_VARIANT = "hub_polygon"  # dataset.loader.gt that reads the hub copy (rvt_bench.loaders.refcoco_hub)
HUB_REFUSAL = ("refcoco: the hub copy is not read as LISA's protocol (lmms-lab/RefCOCO has one row per ref with one "
               "polygon, not LISA's every sentence of every ref with the annotation's polygons summed); set "
               "dataset.root to the official REFER layout instead: <root>/<ds>/refs(<splitBy>).p + instances.json + "
               "images/mscoco/images/train2014, or read the copy as the named variant dataset.loader.gt=hub_polygon "
               "(refcoco/testA and refcoco/testB only, not LISA's protocol; docs/benchmarks/refcoco.md 'Hub copy')")


def layout(root: Path | str, ds: str = "<ds>", split_by: str = "<splitBy>") -> str:
    return (f"{root}/\n  {ds}/refs({split_by}).p and {ds}/instances.json\n"
            f"  {'/'.join(IMAGE_DIR)}/<file_name>")


def parse_split(split: str) -> tuple[str, str, str]:
    """``"refcoco+/testA"`` -> ("refcoco+", "unc", "testA"); ``"refcocog/google/val"`` ->
    ("refcocog", "google", "val"). Raises DatasetFormatError naming the accepted forms."""
    parts = str(split).split("/")
    if len(parts) == 2:
        ds, sub = parts
        split_by = SPLIT_BY.get(ds, "")
    elif len(parts) == 3:
        ds, split_by, sub = parts
    else:
        ds, split_by, sub = "", "", ""
    if ds not in DATASETS or sub not in SPLITS or not split_by or "/" in split_by or split_by.startswith("."):
        raise DatasetFormatError(
            f"refcoco: split {split!r} is not <dataset>/<split> or <dataset>/<splitBy>/<split> with dataset in "
            f"{list(DATASETS)} and split in {list(SPLITS)} (e.g. refcoco/testA, refcoco+/val, refcocog/test, "
            f"refcocog/google/val)")
    return ds, split_by, sub


def refer_split_matches(sub: str, ref_split: str) -> bool:
    """REFER.getRefIds(split=sub) on one ref's ``split`` field (LISA utils/refer.py)."""
    if sub in ("testA", "testB", "testC"):
        return sub[-1] in ref_split
    if sub == "test":
        return "test" in ref_split
    return ref_split == sub


def lisa_gt(segmentation, height: int, width: int, gt: str = "sum") -> tuple[np.ndarray, np.ndarray | None]:
    """The GT of one annotation as LISA's ValDataset builds it, as (target, ignore) bool [H, W].

    "sum" (LISA): the uint8 SUM of the decoded polygons (or RLEs); LISA's intersectionAndUnionGPU
    counts a pixel as target only where that value is 1 and ignores it where it is 255, so a
    pixel covered by two polygons is neither object nor background (a prediction there adds to
    the union only). "union": the corrected GT, any polygon's pixel is the object.
    An empty segmentation list is an empty mask. The polygons are filled one at a time and summed
    from their runs (masks.coverage: LISA's values exactly), so the cost is one polygon's boundary
    and one (H, W) array, whatever their number; (H, W) must be the image's real size (the loader
    checks it against the file's header). Raises DatasetFormatError for a malformed segmentation,
    an H x W no image has, a polygon far off the image, over dataset.limits.max_polygon_points
    points, or a boundary over POLYGON_PERIMETER x (H + W).
    """
    from pycocotools import mask as coco_mask

    if not isinstance(segmentation, list):
        raise DatasetFormatError(f"segmentation must be a list of polygons or RLEs (LISA reads segmentation[0]), "
                                 f"got {type(segmentation).__name__}")
    _check_canvas(height, width)
    if not segmentation:
        return np.zeros((height, width), bool), None
    try:
        if isinstance(segmentation[0], list):
            polys = [[float(v) for v in p] for p in segmentation]
            if any(len(p) < 6 or len(p) % 2 for p in polys):
                raise ValueError("a polygon needs an even number of coordinates, at least 6")
            _check_polygon_range(polys, height, width)
            _check_polygon_cost(polys, height, width)
            # one polygon at a time: pycocotools' memory is one polygon's boundary, never all of them
            rles = [coco_mask.frPyObjects([p], height, width)[0] for p in polys]
        else:
            rles = []
            for r in segmentation:
                require_keys(r, ("size", "counts"), "segmentation RLE")
                counts = r["counts"]
                masks.check_rle(r, (height, width), "segmentation RLE")
                if isinstance(counts, list):
                    rles.extend(coco_mask.frPyObjects([r], height, width))
                else:
                    rles.append({"size": list(r["size"]), "counts": counts if isinstance(counts, bytes) else str(counts).encode()})
        # LISA's np.sum(decode(rles), axis=2), from the runs: the same values without a layer per polygon
        value = masks.coverage(rles, height, width, wrap=gt != "union")
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        raise DatasetFormatError(f"segmentation cannot be decoded: {exc}") from None
    if gt == "union":
        return value, None
    ignore = value == 255  # LISA: np.sum(m, axis=2).astype(np.uint8), 255 ignored
    return value == 1, (ignore if ignore.any() else None)


# How far outside the image a polygon coordinate may lie. COCO's polygons lie on the image up to a
# pixel or two of rounding; nothing real comes near 4x the image's larger side. pycocotools
# (frPyObjects -> rleFrPoly) upsamples every edge 5x and allocates one point per upsampled pixel, so
# an edge's memory grows with its length (a 1e7 coordinate costs ~830 MB, 1e12 is killed for memory)
# and NaN / inf crash it (segfault). Within this bound an edge costs at most ~40 x (8 max(H, W) + 2
# POLYGON_MARGIN) bytes (~200 KB at 640 px).
POLYGON_SPAN = 4
POLYGON_MARGIN = 64


# How long the boundary of one polygon may be: POLYGON_PERIMETER x (H + W) pixels (Chebyshev length,
# the polygon closed); one annotation holds at most dataset.limits.max_polygon_points points.
# pycocotools allocates ~120 bytes per boundary pixel (5x upsampled points, several int arrays), and
# the polygons are filled one at a time: within the bound, at most ~8 MB at once on a 640 x 480
# image. A real COCO polygon's boundary is a small multiple of its image's sides.
POLYGON_PERIMETER = 64


def _check_polygon_cost(polys: list[list[float]], height: int, width: int) -> None:
    """DatasetFormatError when one annotation's polygons hold more than
    dataset.limits.max_polygon_points points, or one polygon's boundary is longer than
    POLYGON_PERIMETER x (H + W) pixels (checked before pycocotools allocates 5 points per pixel of it)."""
    points = sum(len(p) // 2 for p in polys)
    limit = files.limits().max_polygon_points
    if points > limit:
        raise DatasetFormatError(f"its polygons hold {points} points, over the limit of {limit} "
                                 f"(dataset.limits.max_polygon_points)")
    bound = POLYGON_PERIMETER * (int(height) + int(width))
    for k, p in enumerate(polys):
        xy = np.asarray(p, np.float64).reshape(-1, 2)
        length = float(np.abs(np.roll(xy, -1, axis=0) - xy).max(axis=1).sum())
        if length > bound:
            raise DatasetFormatError(f"polygon {k}'s boundary is {length:.0f} pixels long, over {bound} = "
                                     f"{POLYGON_PERIMETER} x (H + W) of the {height}x{width} image")


def _check_canvas(height: int, width: int) -> None:
    """DatasetFormatError for a GT size no readable image has: not positive, or over the pixels PIL
    decodes before calling a file a decompression bomb (2 x Image.MAX_IMAGE_PIXELS; instances.json
    gives the size, and a hostile one would have the masks allocate it)."""
    from PIL import Image

    limit = 2 * int(Image.MAX_IMAGE_PIXELS or 0) or 2**31
    if not (height > 0 and width > 0 and height * width <= limit):
        raise DatasetFormatError(f"the image size {height}x{width} is not one a readable image has "
                                 f"(positive, at most {limit} pixels)")


def _check_polygon_range(polys: list[list[float]], height: int, width: int) -> None:
    """DatasetFormatError for a polygon with a non-finite coordinate or one farther than
    POLYGON_SPAN x max(H, W) + POLYGON_MARGIN from the image (checked before pycocotools sees it)."""
    bound = POLYGON_SPAN * max(int(height), int(width)) + POLYGON_MARGIN
    for k, poly in enumerate(polys):
        for v in poly:
            if not math.isfinite(v):
                raise DatasetFormatError(f"polygon {k} has a non-finite coordinate ({v})")
            if abs(v) > bound:
                raise DatasetFormatError(f"polygon {k} has the coordinate {v:g}, outside the {height}x{width} image "
                                         f"by far (|v| > {bound} = {POLYGON_SPAN} x max(H, W) + {POLYGON_MARGIN})")


class RefCOCODataset(Dataset):
    """One Sample per sentence of every ref in the split, as LISA validates (module docstring).

    root:  LISA's ``refer_seg`` directory (module docstring).
    split: "refcoco/val", "refcoco/testA", "refcoco+/testB", "refcocog/test", "refcocog/google/val", ...
    gt:    "sum" (LISA's summed polygons, default) or "union" (corrected: every polygon's pixel), or
           "hub_polygon": the named variant that reads the hub copy lmms-lab/RefCOCO given as hf_dataset
           (rvt_bench.loaders.refcoco_hub: one polygon per ref, testA / testB only, NOT LISA's protocol).
    hf_dataset, hf_revision: with gt="hub_polygon" the hub copy (id or local directory) and its
           revision; with any other gt refused with one line naming the variant (docs "Hub copy").

    Each Sample: id = the sentence's ``sent_id``; modality "image", task "segmentation", one frame
    (the train2014 image); query = ``sent.strip().lower()`` (LISA); ``target.masks`` = [RLE of the
    GT at instances.json's height x width], ``target.ignore`` = [RLE or None];
    meta = {"image_id", "ref_id", "ann_id", "sent_id", "ref_split", "is_sentence": False, "ref_index"
    (the ref's position in the refs file), "sent_index"} (the last two: LISA's order, for its gIoU).
    Samples are ordered by image id, then the refs file's order, then the sentences' order.
    A ref whose annotation, image record or image file is missing, whose file_name leads out of the
    image folder ('..', absolute), whose image record's height x width is not the image file's (read
    from its header: the GT's canvas is the image), or whose segmentation cannot be decoded (or
    breaks a bound of lisa_gt), is a data error for each of its sentences. Raises DatasetFormatError for an unknown
    split name, a missing refs / instances file, a refs pickle that is not plain data
    (rvt_bench.core.safe_pickle), or when the split selects no ref.
    """

    name = "refcoco"

    @staticmethod
    def hub_refusal(node) -> str | None:
        """Read by rvt_bench.loaders.hub.pin before anything is downloaded: the one line refusing a
        hub copy for the dataset node `node`, None when the hub_polygon variant can read its split."""
        loader = node.get("loader") if hasattr(node, "get") else None
        gt = loader.get("gt") if hasattr(loader, "get") else None
        if gt != HUB_VARIANT:
            return HUB_REFUSAL
        from rvt_bench.loaders.refcoco_hub import split_refusal

        return split_refusal(str(node.get("split")))

    def __init__(self, root: str | Path | None, split: str = "refcoco/val", gt: str = "sum",
                 hf_dataset: str | None = None, hf_revision: str | None = None) -> None:
        super().__init__()
        if gt not in (*GT_MODES, HUB_VARIANT):
            raise ValueError(f"refcoco: gt must be one of {[*GT_MODES, HUB_VARIANT]}, got {gt!r}")
        if gt == HUB_VARIANT:  # the named hub variant (rvt_bench.loaders.refcoco_hub), not LISA's protocol
            if hf_dataset is None:
                raise DatasetFormatError(f"refcoco: dataset.loader.gt={HUB_VARIANT} reads the hub copy: set "
                                         f"dataset.hf_dataset=lmms-lab/RefCOCO (docs/benchmarks/refcoco.md 'Hub copy')")
            from rvt_bench.loaders import refcoco_hub

            self.split, self.gt, self.root = split, gt, None
            refcoco_hub.load(self, str(hf_dataset), hf_revision)
            return
        if hf_dataset is not None:
            raise DatasetFormatError(HUB_REFUSAL)
        if root is None:
            raise DatasetFormatError(f"refcoco: set dataset.root to LISA's refer_seg directory; {PUBLISHED}")
        self.split, self.gt = split, gt
        self.root = Path(root)
        ds, split_by, sub = parse_split(split)
        expected = layout(self.root, ds, split_by)
        require_dir(self.root, dataset=self.name, layout=expected, published=PUBLISHED)
        refs_path = require_file(self.root / ds / f"refs({split_by}).p", dataset=self.name, layout=expected, published=PUBLISHED)
        inst_path = require_file(self.root / ds / "instances.json", dataset=self.name, layout=expected, published=PUBLISHED)
        refs = safe_pickle.load(refs_path)
        if not isinstance(refs, list):
            raise DatasetFormatError(f"{refs_path}: expected a list of refs, got {type(refs).__name__}")
        instances = read_json(inst_path)
        require_keys(instances, ("images", "annotations"), str(inst_path))
        if not isinstance(instances["images"], list) or not isinstance(instances["annotations"], list):
            raise DatasetFormatError(f"{inst_path}: 'images' and 'annotations' must be lists (COCO instances format)")
        images = {im.get("id"): im for im in instances["images"] if isinstance(im, dict)}
        anns = {a.get("id"): a for a in instances["annotations"] if isinstance(a, dict)}
        chosen = []
        for k, ref in enumerate(refs):
            if not isinstance(ref, dict) or not isinstance(ref.get("split"), str):
                self.record_error(f"{refs_path.name}[{k}]", "a ref must be a dict with a str 'split'")
                continue
            if refer_split_matches(sub, ref["split"]):
                chosen.append((k, ref))
        if not chosen:
            present = sorted({r["split"] for r in refs if isinstance(r, dict) and isinstance(r.get("split"), str)})
            raise DatasetFormatError(f"{refs_path}: no ref in split {sub!r}; the ref splits present are {present}")
        chosen.sort(key=lambda kr: (_order(kr[1].get("image_id")), kr[0]))
        image_dir = self.root.joinpath(*IMAGE_DIR)
        for k, ref in chosen:
            self._add_ref(ref, k, images, anns, image_dir, refs_path)
        self.require_some_samples(f"{refs_path} split {sub}")

    def _add_ref(self, ref: dict, k: int, images: dict, anns: dict, image_dir: Path, refs_path: Path) -> None:
        sents = ref.get("sentences")
        if not isinstance(sents, list) or not all(isinstance(s, dict) and isinstance(s.get("sent"), str) for s in sents):
            self.record_error(f"{refs_path.name}[{k}]", "'sentences' must be a list of {'sent': str, 'sent_id': ...}")
            return
        ids = [str(s.get("sent_id", f"{ref.get('ref_id')}.{j}")) for j, s in enumerate(sents)]
        try:
            require_keys(ref, ("ref_id", "ann_id", "image_id"), f"{refs_path.name}[{k}]")
            ann, image = anns.get(ref["ann_id"]), images.get(ref["image_id"])
            if ann is None:
                raise DatasetFormatError(f"ref {ref['ref_id']}: annotation {ref['ann_id']} is not in instances.json")
            path, height, width = ref_image(image, ref, image_dir)
            try:
                _check_canvas(height, width)
            except DatasetFormatError as exc:
                raise DatasetFormatError(f"ref {ref['ref_id']} annotation {ref['ann_id']}: {exc}") from None
            real = frame_size(path)  # from the header (dataset.limits checked): the GT's canvas is the image
            if (height, width) not in (real, real[::-1]):
                raise DatasetFormatError(f"ref {ref['ref_id']}: instances.json gives image {ref['image_id']} the size "
                                         f"{height}x{width} (H x W), its file {path} is {real[0]}x{real[1]}; the GT "
                                         f"is drawn on the image, never on a larger canvas")
            try:
                target, ignore = lisa_gt(ann.get("segmentation"), height, width, self.gt)
            except DatasetFormatError as exc:
                raise DatasetFormatError(f"ref {ref['ref_id']} annotation {ref['ann_id']}: {exc}") from None
        except (DatasetFormatError, TypeError, ValueError) as exc:
            for sid in ids:
                self.record_error(sid, str(exc))
            return
        gt = Target(masks=[masks.encode(target)], ignore=[masks.encode(ignore) if ignore is not None else None])
        for j, (sid, sent) in enumerate(zip(ids, sents)):
            self._samples.append(Sample(
                id=sid, dataset=self.name, split=self.split, modality="image", frames=[str(path)],
                frame_ids=[Path(str(image["file_name"])).stem], query=sent["sent"].strip().lower(),
                task="segmentation", target=gt,
                meta={"image_id": ref["image_id"], "ref_id": ref["ref_id"], "ann_id": ref["ann_id"],
                      "sent_id": sent.get("sent_id"), "ref_split": ref["split"], "is_sentence": False,
                      "ref_index": k, "sent_index": j},
            ))


def _order(image_id) -> tuple:
    return (0, image_id, "") if isinstance(image_id, int) else (1, 0, str(image_id))


def ref_image(image: dict | None, ref: dict, image_dir: Path) -> tuple[Path, int, int]:
    """(path, height, width) of a REFER-style ref's image record in instances.json (RefCOCO, gRefCOCO):
    the file name confined to `image_dir` (rvt_bench.core.files.inside), the declared size as ints.
    Raises DatasetFormatError naming the ref when the record, one of its keys or the file is missing,
    or the name leads out of the folder."""
    if image is None:
        raise DatasetFormatError(f"ref {ref['ref_id']}: image {ref['image_id']} is not in instances.json")
    require_keys(image, ("file_name", "height", "width"), f"instances.json image {ref['image_id']}")
    height, width = int(image["height"]), int(image["width"])
    path = files.inside(image_dir, str(image["file_name"]), f"ref {ref['ref_id']}: instances.json image "
                                                            f"{ref['image_id']} file_name")
    if not path.is_file():
        raise DatasetFormatError(f"ref {ref['ref_id']}: image file {path} not found")
    return path, height, width
