"""LLM-Seg40K (LLM-Seg, CVPR Workshops 2024) loader: reasoning segmentation of COCO and EgoObjects
images from split JSON files (RLE or PNG masks). Format, sample order and bad data:
docs/benchmarks/llmseg40k.md.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rvt_bench.core import files, masks
from rvt_bench.loaders.base import Dataset, existing_splits, layout_hint, read_json, require_dir, require_keys
from rvt_bench.core.frames import frame_size
from rvt_bench.core.types import RLE, DatasetFormatError, Sample, Target

PUBLISHED = (
    "https://github.com/wangjunchi/LLMSeg#finetuning-and-evaluation-on-llm-seg40k-dataset "
    "(annotations: the Google Drive folder linked there; images: COCO train2017 and EgoObjects)"
)
LAYOUT = (
    "  train.json                 (split 'train')\n"
    "  split/<split>.json         (split 'validation', ...)\n"
    "  each: {<image file name>: {'from_dataset': 'coco'|'ego_objects',\n"
    "         'qa_pairs': [{'question', 'answer', 'rle_seg' | 'segmentation_path'}]}}"
)
# from_dataset value -> constructor argument naming that image directory (LLM-Seg's argument names)
IMAGE_DIR_ARGS = {"coco": "coco_image_dir", "ego_objects": "ego_objects_image_dir"}
# Where the authors keep the images relative to the annotation folder (lisa_dataset/{LLMSeg-40K,
# coco/train2017, ego_objects/images} in finetune_llmseg.py); used when no directory is configured.
# Relative to the parent directory of root.
DEFAULT_IMAGE_DIRS = {"coco": Path("coco") / "train2017", "ego_objects": Path("ego_objects") / "images"}


class LLMSeg40KDataset(Dataset):
    """LLM-Seg40K split as a sequence of image Samples, one per question-answer pair.

    root:        the LLM-Seg40K annotation directory (holding ``train.json`` and ``split/``).
    split:       "validation" (default), "train", "test": read from ``<root>/split/<split>.json``,
                 else ``<root>/<split>.json``.
    coco_image_dir, ego_objects_image_dir: image directories for records whose ``from_dataset``
                 is "coco" / "ego_objects"; None = the authors' layout, ``<root>/../coco/train2017``
                 and ``<root>/../ego_objects/images``.
    annotation:  explicit path of the split's JSON file (overrides the lookup above).
    segmentation_root: directory of the PNG variant's masks; when set, a qa pair's mask is
                 ``<segmentation_root>/<file name of its segmentation_path>``.
    check_sizes: compare every mask's [H, W] with its image's EXIF-oriented size at load (reads each
                 image header once); False skips this and does not touch the images.
    hf_dataset, hf_revision: the authors' files in a hub repository instead of root
                 (rvt_bench.loaders.llmseg40k_hub; no such copy is known today).

    Each Sample: id ``<image stem>_<k>`` (k = index of the qa pair in the image's list), modality
    "image", task "segmentation", one frame; ``query`` = the qa pair's question;
    ``target.masks = [RLE]`` (ASCII counts, pixels in image coordinates), ``target.ignore = [None]``;
    ``meta = {"image": stem, "qa_index": k, "from_dataset", "file_name": image file name,
    "answer": the reference answer text}``; ``annotations`` None.
    A qa pair whose mask or image is missing or malformed, or whose mask size differs from its
    image's, is left out and recorded in ``errors`` (module docstring). Raises DatasetFormatError
    when the annotation file or an image directory is missing or malformed, or every sample failed.
    """

    name = "llmseg40k"

    def __init__(
        self,
        root: str | Path | None,
        split: str = "validation",
        coco_image_dir: str | Path | None = None,
        ego_objects_image_dir: str | Path | None = None,
        annotation: str | Path | None = None,
        segmentation_root: str | Path | None = None,
        check_sizes: bool = True,
        hf_dataset: str | None = None,
        hf_revision: str | None = None,
    ) -> None:
        super().__init__()
        if hf_dataset is not None:  # the authors' files in a hub repository (rvt_bench.loaders.llmseg40k_hub)
            from rvt_bench.loaders import llmseg40k_hub

            self.split = split
            root = llmseg40k_hub.load(self, str(hf_dataset), hf_revision)
        if root is None:
            raise DatasetFormatError(f"{self.name}: set dataset.root to the LLM-Seg40K annotation directory "
                                     f"({PUBLISHED}) or dataset.hf_dataset to a hub copy of its files")
        self.root = Path(root)
        self.split = split
        self.check_sizes = check_sizes
        self.segmentation_root = Path(segmentation_root) if segmentation_root is not None else None
        layout = f"{self.root}/\n{LAYOUT}"
        require_dir(self.root, dataset=self.name, layout=layout, published=PUBLISHED)
        self.annotation = Path(annotation) if annotation is not None else self._find_annotation(layout)
        configured = {"coco": coco_image_dir, "ego_objects": ego_objects_image_dir}
        beside_root = Path(os.path.abspath(self.root)).parent
        self.image_dirs = {
            source: Path(d) if d is not None else beside_root / DEFAULT_IMAGE_DIRS[source] for source, d in configured.items()
        }
        data = read_json(self.annotation)
        if not isinstance(data, dict):
            raise DatasetFormatError(
                f"{self.annotation}: expected a JSON object {{<image file name>: {{'from_dataset', 'qa_pairs'}}}}, "
                f"got {type(data).__name__}"
            )
        checked_dirs: set[str] = set()
        for image, record in data.items():
            where = f"{self.annotation} image {image!r}"
            source = None  # stays None when the record is bad (recorded under the image's file name)
            with self.sample_errors(str(image)):
                require_keys(record, ("from_dataset", "qa_pairs"), where)
                if record["from_dataset"] not in IMAGE_DIR_ARGS:
                    raise DatasetFormatError(
                        f"{where}: from_dataset must be one of {sorted(IMAGE_DIR_ARGS)}, got {record['from_dataset']!r}")
                if not isinstance(record["qa_pairs"], list):
                    raise DatasetFormatError(f"{where}: 'qa_pairs' must be a list, got {type(record['qa_pairs']).__name__}")
                source = record["from_dataset"]
            if source is None:
                continue
            if source not in checked_dirs:  # a missing image directory fails every sample of it: a config problem
                require_dir(
                    self.image_dirs[source],
                    dataset=self.name,
                    layout=f"  <image file name> (images of from_dataset {source!r}; set {IMAGE_DIR_ARGS[source]})",
                    published=PUBLISHED,
                )
                checked_dirs.add(source)
            self._samples.extend(self._image_samples(str(image), source, record["qa_pairs"], where))
        self.require_some_samples(str(self.annotation))

    def _find_annotation(self, layout: str) -> Path:
        candidates = [self.root / "split" / f"{self.split}.json", self.root / f"{self.split}.json"]
        for path in candidates:
            if path.exists():  # a FIFO or a device is refused when read, by name
                return path
        present = [p.stem for d in (self.root / "split", self.root) if d.is_dir() for p in d.glob("*.json")]
        raise DatasetFormatError(
            f"{self.name}: no annotation file for split {self.split!r}; looked for "
            f"{' and '.join(str(p) for p in candidates)}; splits present: {existing_splits(present)}; "
            f"{layout_hint(layout, PUBLISHED)}"
        )

    def _image_samples(self, image: str, source: str, qa_pairs: list, where: str) -> list[Sample]:
        image_path = self.image_dirs[source] / image
        stem = Path(image).stem
        size: list[tuple[int, int] | DatasetFormatError] = []

        def size_of() -> tuple[int, int]:
            # one header read per image, shared by its qa pairs; an unreadable image fails each of them
            if not size:
                try:
                    size.append(frame_size(image_path))
                except DatasetFormatError as exc:
                    size.append(DatasetFormatError(f"{where}: {exc}"))
            if isinstance(size[0], DatasetFormatError):
                raise size[0]
            return size[0]

        samples = []
        for k, qa in enumerate(qa_pairs):
            sample_id = f"{stem}_{k}"
            qa_where = f"{where} qa_pairs[{k}] (sample {sample_id})"
            with self.sample_errors(sample_id):
                samples.append(self._sample(sample_id, k, qa, image, source, qa_where, size_of))
        return samples

    def _sample(self, sample_id: str, k: int, qa: Any, image: str, source: str, qa_where: str, size_of) -> Sample:
        image_path = files.inside(self.image_dirs[source], image, f"{qa_where}: image file name")
        stem = Path(image).stem
        require_keys(qa, ("question", "answer"), qa_where)
        if not isinstance(qa["question"], str) or not qa["question"].strip():
            raise DatasetFormatError(f"{qa_where}: field 'question' must be a non-empty string, got {str(qa['question'])[:80]!r}")
        rle = self._mask(qa, qa_where)
        if self.check_sizes:
            size = size_of()
            if tuple(rle["size"]) != size:
                raise DatasetFormatError(
                    f"{qa_where}: mask size [H, W] = {list(rle['size'])} differs from image {image_path} "
                    f"size {list(size)}"
                )
        return Sample(
            id=sample_id,
            dataset=self.name,
            split=self.split,
            modality="image",
            frames=[str(image_path)],
            frame_ids=[stem],
            query=str(qa["question"]),
            task="segmentation",
            target=Target(masks=[rle], ignore=[None]),
            meta={"image": stem, "qa_index": k, "from_dataset": source, "file_name": image, "answer": str(qa["answer"])},
        )

    def _mask(self, qa: dict[str, Any], where: str) -> RLE:
        """The qa pair's mask as an RLE with ASCII counts, from ``rle_seg`` or ``segmentation_path``."""
        if "rle_seg" in qa:
            rle = qa["rle_seg"]
            if not isinstance(rle, dict):
                raise DatasetFormatError(f"{where}: 'rle_seg' must be a COCO RLE {{'size', 'counts'}}, got {type(rle).__name__}")
            masks.check_rle(rle, None, f"{where} field 'rle_seg'")
            try:
                mask = masks.decode(rle)
            except DatasetFormatError as exc:
                raise DatasetFormatError(f"{where}: {exc}") from exc
            if isinstance(rle["counts"], str):
                return {"size": [int(v) for v in rle["size"]], "counts": rle["counts"]}
            return masks.encode(mask)  # bytes or uncompressed counts: re-encode so counts are ASCII str
        if "segmentation_path" in qa:
            path = Path(str(qa["segmentation_path"]))
            if self.segmentation_root is not None:
                path = self.segmentation_root / path.name
            elif not path.is_absolute():
                path = files.inside(self.root, str(qa["segmentation_path"]), f"{where}: segmentation_path")
            if not path.exists():
                raise DatasetFormatError(
                    f"{where}: mask PNG {path} does not exist (set segmentation_root to the directory holding the PNGs)"
                )
            return masks.encode(masks.read_png_mask(path))
        raise DatasetFormatError(f"{where}: expected a mask under 'rle_seg' (COCO RLE) or 'segmentation_path' (PNG)")
