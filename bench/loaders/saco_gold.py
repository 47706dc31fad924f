"""SA-Co/Gold (SAM 3's promptable concept segmentation benchmark: seven subsets, each annotated by
three annotators) from its release layout, read as SAM 3's cgF1 evaluator reads it
(facebookresearch/sam3@99d02f2 sam3/eval/cgf1_eval.py CGF1Evaluator, scripts/eval/gold/eval_sam3.py).
Format, what the evaluator keeps and bad data: docs/benchmarks/saco_gold.md.

Layout (``root`` = eval_sam3.py's ``--gt-folder``, the annotation files as published)::

    <root>/gold_<stem>_merged_<a|b|c>_release_test.json   COCO-style; images = (image, noun phrase) pairs
    <images>/<file_name>                                   the MetaCLIP (or SA-1B) images; default <root>/images

Subsets (eval_sam3.py's names -> file stem): metaclip_nps -> metaclip, sa1b_nps -> sa1b, crowded,
fg_food, fg_sports_equipment, attributes, wiki_common.
"""
from __future__ import annotations

from pathlib import Path

from rvt_bench.core import files, masks
from rvt_bench.core.types import DatasetFormatError, Sample, Target
from rvt_bench.loaders import saco_gold_hub
from rvt_bench.loaders.base import Dataset, read_json, require_dir, require_file, require_keys

PUBLISHED = ("https://huggingface.co/datasets/facebook/SACo-Gold (annotations) and the MetaCLIP / SA-1B images "
             "(facebookresearch/sam3 scripts/eval/gold/README.md)")
SUBSETS = {"metaclip_nps": "metaclip", "sa1b_nps": "sa1b", "crowded": "crowded", "fg_food": "fg_food",
           "fg_sports_equipment": "fg_sports_equipment", "attributes": "attributes", "wiki_common": "wiki_common"}
ANNOTATORS = ("a", "b", "c")


def gt_file(subset: str, annotator: str) -> str:
    """The release's file name of one subset and annotator, as eval_sam3.py names it."""
    return f"gold_{SUBSETS[subset]}_merged_{annotator}_release_test.json"


def parse_annotators(value: object) -> list[str]:
    """["a", "b", "c"] from a list of names or a string of letters ("abc", "a"); the first one's file
    fixes the pairs and their order. Raises ValueError for an unknown or repeated annotator."""
    names = list(value) if isinstance(value, (str, list, tuple)) else None
    if not names or not all(isinstance(n, str) and n in ANNOTATORS for n in names) or len(set(names)) != len(names):
        raise ValueError(f"saco_gold: annotators must be distinct names of {list(ANNOTATORS)} (e.g. [a, b, c] or [a]), "
                         f"got {value!r}")
    return names


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_key(v: object) -> bool:
    return _is_int(v) or isinstance(v, str)


class SACoGoldDataset(Dataset):
    """One Sample per (image, noun phrase) pair that the cgF1 evaluator scores in one subset.

    root:       the folder of the annotation files (module docstring); None with hf_dataset.
    hf_dataset, hf_revision: the same files from the hub instead of root (rvt_bench.loaders.saco_gold_hub:
                facebook/SACo-Gold, or a local folder laid out as it; lmms-eval's copy is refused).
    subset:     one of SUBSETS (eval_sam3.py's names).
    annotators: which annotators' files, in order (default [a, b, c]: the oracle over the three,
                as eval_sam3.py; [a]: single annotator, as standalone_cgf1.py with one file).
    images:     the folder the pairs' file_name is relative to; None: <root>/images. The evaluator
                reads no image, but a run's FrameChecker does: a pair whose image is missing fails as a data error.
    split:      the Samples' split: the subset's name (conf/dataset/saco_gold.yaml sets it so; the
                release has one split, test, and a run scores one subset).

    Pairs kept, as CGF1Evaluator: the first annotator's images with ``is_instance_exhaustive`` true,
    less those any other chosen annotator marks not exhaustive; in the first file's order.
    Each Sample: id = str(pair id); modality "image", task "segmentation"; query = text_input;
    target.masks = [union of the first annotator's non-crowd instances] (empty for a negative pair:
    display only); meta = {"subset", "dump" (the prediction folder name, gold_<subset>), "image_id",
    "height", "width", "order" (index in the first file), "annotations" {annotator: [[RLE, iscrowd],
    ...]} (the annotations whose category is one of the file's categories, as COCOeval keeps
    them), "category_ids" {annotator: [ids]}, "no_target" (no non-crowd instance for any annotator)}.
    A pair with a malformed record or annotation, or a scored pair missing from another chosen
    annotator's file, is a data error. Raises DatasetFormatError for an unknown subset, a missing file, a file
    that is not COCO-style, or an annotation whose image_id is a list or an object (no pair can be told).
    """

    name = "saco_gold"

    hub_refusal = staticmethod(saco_gold_hub.refusal)  # read by rvt_bench.loaders.hub.pin before any download

    def __init__(self, root: str | Path | None, subset: str = "metaclip_nps", annotators: object = ("a", "b", "c"),
                 images: str | Path | None = None, split: str | None = None, hf_dataset: str | None = None,
                 hf_revision: str | None = None) -> None:
        super().__init__()
        if subset not in SUBSETS:
            raise DatasetFormatError(f"saco_gold: subset {subset!r} is not one of {list(SUBSETS)}")
        if split not in (None, subset):
            raise DatasetFormatError(f"saco_gold: split {split!r} differs from subset {subset!r}: a run scores one "
                                     f"subset, its split (set dataset.subset=)")
        self.annotators = parse_annotators(list(annotators) if not isinstance(annotators, str) else annotators)
        if hf_dataset is not None:  # the release's files on the hub (rvt_bench.loaders.saco_gold_hub)
            root = saco_gold_hub.load(self, str(hf_dataset), hf_revision, [gt_file(subset, a) for a in self.annotators])
        elif root is None:
            raise DatasetFormatError(f"saco_gold: set dataset.root to the folder of the annotation JSONs, or "
                                     f"dataset.hf_dataset={saco_gold_hub.HUB_ID}; {PUBLISHED}")
        self.root, self.subset, self.split = Path(root), subset, subset
        self.images = Path(images) if images is not None else self.root / "images"
        expected = "\n".join(f"{self.root}/{gt_file(subset, a)}" for a in self.annotators)
        require_dir(self.root, dataset=self.name, layout=expected, published=PUBLISHED)
        data = {a: self._read(a, expected) for a in self.annotators}
        first = self.annotators[0]
        by_id = {a: {img.get("id"): img for img in data[a]["images"] if isinstance(img, dict) and _is_key(img.get("id"))}
                 for a in self.annotators}
        anns = {a: self._annotations(data[a], gt_file(subset, a)) for a in self.annotators}
        cats = {a: sorted(c["id"] for c in data[a]["categories"] if isinstance(c, dict) and _is_int(c.get("id")))
                for a in self.annotators}
        seen: set = set()
        for k, img in enumerate(data[first]["images"]):
            pid = str(img.get("id")) if isinstance(img, dict) else f"images[{k}]"
            with self.sample_errors(pid):
                self._add(k, img, first, by_id, anns, cats, seen)
        self.require_some_samples(f"saco_gold subset {subset} (annotators {self.annotators})")

    def _read(self, annotator: str, expected: str) -> dict:
        path = require_file(self.root / gt_file(self.subset, annotator), dataset=self.name, layout=expected,
                            published=PUBLISHED)
        data = read_json(path)
        require_keys(data, ("images", "annotations", "categories"), str(path))
        if not all(isinstance(data[k], list) for k in ("images", "annotations", "categories")):
            raise DatasetFormatError(f"{path}: 'images', 'annotations' and 'categories' must be lists (COCO format)")
        return data

    @staticmethod
    def _annotations(data: dict, name: str) -> dict:
        """{image_id: [annotation, ...]} of one file. Raises DatasetFormatError for an image_id that is
        a list or an object: no pair can be told it (COCO's index stops on it; its pair's GT would
        silently lose an instance)."""
        out: dict = {}
        for k, ann in enumerate(data["annotations"]):
            if isinstance(ann, dict):
                if isinstance(ann.get("image_id"), (list, dict)):
                    raise DatasetFormatError(f"{name} annotations[{k}]: image_id must be a pair id (an int or a "
                                             f"string), got {str(ann['image_id'])[:40]}")
                out.setdefault(ann.get("image_id"), []).append(ann)
        return out

    def _add(self, k: int, img: object, first: str, by_id: dict, anns: dict, cats: dict, seen: set) -> None:
        if not isinstance(img, dict):
            raise DatasetFormatError(f"{gt_file(self.subset, first)} images[{k}] is not an object")
        require_keys(img, ("id", "file_name", "text_input", "height", "width", "is_instance_exhaustive"),
                     f"{gt_file(self.subset, first)} images[{k}]")
        pid = img["id"]
        if not _is_key(pid):
            raise DatasetFormatError(f"{gt_file(self.subset, first)} images[{k}]: id must be an int or a string")
        others = [by_id[a].get(pid) for a in self.annotators[1:]]
        for a, rec in zip(self.annotators[1:], others):
            if rec is not None:
                require_keys(rec, ("is_instance_exhaustive",), f"{gt_file(self.subset, a)} pair {pid}")
        if not img["is_instance_exhaustive"] or any(rec is not None and not rec["is_instance_exhaustive"]
                                                    for rec in others):
            return  # CGF1Evaluator scores the pairs instance-exhaustive for every chosen annotator only
        for a, rec in zip(self.annotators[1:], others):
            if rec is None:
                raise DatasetFormatError(f"pair {pid} is not in {gt_file(self.subset, a)}")
        if pid in seen:
            raise DatasetFormatError(f"pair id {pid} repeats an earlier pair's")
        seen.add(pid)
        height, width = img["height"], img["width"]
        if not (_is_int(height) and _is_int(width) and height > 0 and width > 0):
            raise DatasetFormatError(f"pair {pid}: height and width must be positive ints")
        if not isinstance(img["text_input"], str) or not isinstance(img["file_name"], str):
            raise DatasetFormatError(f"pair {pid}: text_input and file_name must be strings")
        per: dict[str, list] = {}
        for a in self.annotators:
            kept = []
            for ann in anns[a].get(pid, []):
                where = f"{gt_file(self.subset, a)} annotation {ann.get('id')}"
                if "iscrowd" not in ann or "category_id" not in ann:
                    raise DatasetFormatError(f"{where}: needs iscrowd and category_id (COCOeval reads both)")
                if ann["category_id"] not in cats[a]:
                    continue  # COCOeval looks only at the file's categories
                masks.check_rle(ann.get("segmentation"), (height, width), where)
                kept.append([masks.compress(ann["segmentation"]), int(bool(ann["iscrowd"]))])
            per[a] = kept
        frame = files.inside(self.images, img["file_name"], f"pair {pid}: file_name")
        shown = [r for r, crowd in per[first] if not crowd]
        self._samples.append(Sample(
            id=str(pid), dataset=self.name, split=self.split, modality="image", frames=[str(frame)],
            frame_ids=[Path(img["file_name"]).stem], query=img["text_input"], task="segmentation",
            target=Target(masks=[masks.union(shown, height, width)]),
            meta={"subset": self.subset, "dump": f"gold_{self.subset}", "image_id": pid, "height": height,
                  "width": width, "order": k, "annotations": per, "category_ids": {a: cats[a] for a in per},
                  "no_target": not any(not crowd for a in per for _, crowd in per[a])},
        ))
