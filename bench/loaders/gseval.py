"""GroundingSuite-Eval (GSEval; Hu et al., arXiv 2503.10596, 2025) loader: referring grounding on
COCO unlabeled2017 images from the release's GroundingSuite-Eval.jsonl, as hustvl/GroundingSuite
`evaluate_grounding.py` reads it. Format and the evaluator's rules: docs/benchmarks/gseval.md.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rvt_bench.core import files, masks
from rvt_bench.core.types import DatasetFormatError, Sample, Target, as_float
from rvt_bench.loaders.base import Dataset, layout_hint, require_dir

PUBLISHED = "https://github.com/hustvl/GroundingSuite (images: huggingface.co/datasets/hustvl/GSEval, COCO unlabeled2017)"
GT_FILE = "GroundingSuite-Eval.jsonl"
LAYOUT = (
    f"  {GT_FILE}   one JSON object a line: idx, image_path, class_id, label, caption, box, segmentation\n"
    "  <image_dir>/<image_path>      (image_dir: the root unless dataset.loader.image_dir says otherwise)"
)
MODES = ("box", "mask")


class GSEvalDataset(Dataset):
    """GroundingSuite-Eval as a sequence of image Samples, one per line of the GT file.

    root: the folder holding GroundingSuite-Eval.jsonl; split: the evaluator's --mode, "box" (task
    "grounding", its default) or "mask" (task "segmentation"); image_dir: the evaluator's
    --image_dir (the folder `image_path` is relative to), None = root, a relative one under root.

    Each Sample: id str(idx), modality "image", frames [<image_dir>/<image_path>], query the
    line's `label` (the referring expression; `caption` is kept in meta); ``target.boxes`` =
    [[box]] ([x1, y1, x2, y2] in pixels, as written), ``target.masks`` = [the segmentation RLE];
    ``meta = {"idx", "class_id", "image_path", "caption"}``. A line the loader cannot use (not
    JSON, a field missing or malformed, an idx repeated, the image missing: the evaluator skips
    that line) fails that sample only; raises DatasetFormatError when the folder or the file is
    missing or every line failed.
    """

    name = "gseval"

    def __init__(self, root: str | Path | None, split: str = "box", image_dir: str | None = None) -> None:
        super().__init__()
        mode = split
        if mode not in MODES:
            raise DatasetFormatError(f"gseval: split must be one of {MODES} (the evaluator's --mode), got {mode!r}")
        if root is None:
            raise DatasetFormatError(f"{self.name}: set dataset.root to the folder holding {GT_FILE} ({PUBLISHED})")
        self.root, self.mode, self.split = Path(root), mode, split
        layout = f"{self.root}/\n{LAYOUT}"
        require_dir(self.root, dataset=self.name, layout=layout, published=PUBLISHED)
        gt_path = self.root / GT_FILE
        if not gt_path.exists():  # a FIFO or device there is refused when read (core.files), not called missing
            raise DatasetFormatError(f"{self.name}: expected the file {gt_path} (not found); {layout_hint(layout, PUBLISHED)}")
        self.image_dir = self.root if image_dir is None else self.root / image_dir
        seen: set = set()
        for number, line in files.lines(gt_path, what="GroundingSuite-Eval.jsonl"):
            where = f"{gt_path} line {number}"
            if line is None or not line.strip():
                if line is None:
                    self.record_error(f"line{number}", f"{where}: longer than the line limit")
                continue
            with self.sample_errors(f"line{number}"):
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DatasetFormatError(f"{where} is not UTF-8 text: {exc}") from None
                item = files.loads(text, where)
                self._samples.append(self._sample(item, where, seen))
        self.require_some_samples(str(gt_path))

    def _sample(self, item: Any, where: str, seen: set) -> Sample:
        if not isinstance(item, dict):
            raise DatasetFormatError(f"{where}: expected a JSON object, got {type(item).__name__}")
        missing = [k for k in ("idx", "image_path", "label", "box", "segmentation") if k not in item]
        if missing:
            raise DatasetFormatError(f"{where}: field(s) {missing} missing")
        idx = item["idx"]
        if not isinstance(idx, int) or isinstance(idx, bool):
            raise DatasetFormatError(f"{where}: 'idx' must be an int, got {str(idx)[:40]!r}")
        if idx in seen:
            raise DatasetFormatError(f"{where}: idx {idx} appears twice (the evaluator matches predictions by idx)")
        seen.add(idx)
        box = item["box"]
        coords = [as_float(v) for v in box] if isinstance(box, list) else []
        if len(coords) != 4 or None in coords:  # a number beyond float's range: the evaluator's arithmetic overflows
            raise DatasetFormatError(f"{where}: 'box' must be [x1, y1, x2, y2] numbers, got {str(box)[:80]}")
        rle = item["segmentation"]
        size = rle.get("size") if isinstance(rle, dict) else None
        if not isinstance(size, list) or len(size) != 2 or not all(isinstance(v, int) and v > 0 for v in size):
            raise DatasetFormatError(f"{where}: 'segmentation' must be a COCO RLE {{'size': [H, W], 'counts'}}, "
                                     f"got {str(rle)[:80]}")
        problem = masks.rle_problem(rle, (size[0], size[1]))
        if problem:
            raise DatasetFormatError(f"{where}: 'segmentation': {problem}")
        if not isinstance(item["image_path"], str) or not isinstance(item["label"], str) or not item["label"].strip():
            raise DatasetFormatError(f"{where}: 'image_path' and 'label' must be non-empty strings")
        image = files.inside(self.image_dir, item["image_path"], f"{where}: image_path")
        if not image.exists():  # as the evaluator's os.path.exists; a FIFO or device is refused when read
            raise DatasetFormatError(f"{where}: image {image} does not exist (the evaluator skips this line)")
        class_id = item.get("class_id", 0)  # the evaluator's default
        rle = masks.compress(rle) if isinstance(rle["counts"], list) else rle
        return Sample(id=str(idx), dataset=self.name, split=self.split, modality="image", frames=[str(image)],
                      frame_ids=["0"], query=item["label"], task="grounding" if self.mode == "box" else "segmentation",
                      target=Target(masks=[rle], boxes=[[coords]]),
                      meta={"idx": idx, "class_id": json.dumps(class_id) if not isinstance(class_id, int) else class_id,
                            "image_path": item["image_path"], "caption": str(item.get("caption", ""))})
