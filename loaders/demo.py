"""The bundled demo benchmark (``demo/``, built by ``scripts/build_demo.py``): ReasonSeg-format
images, ReVOS-format clips and RVTBench-style queries on those clips, ids prefixed by part.
Layout, scoring and bad data: docs/benchmarks/demo.md.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from loaders.base import Dataset, require_dir
from loaders.reasonseg import ReasonSegDataset
from loaders.revos import ReVOSDataset
from loaders.canonical import CanonicalDataset

LAYOUT = ("  reasonseg/val/<name>.jpg + <name>.json (ReasonSeg)\n"
          "  revos/ (ReVOS: JPEGImages/, meta_expressions_valid_.json, mask_dict.json)\n"
          "  rvtbench/test.jsonl (RVTBench canonical records on revos/JPEGImages/<video>/)")
# RVTBench's declared sets, as conf/dataset/rvtbench.yaml gives them to its loader
RVT_LEVELS = (1, 2, 3, 4)
RVT_CATEGORIES = ("semantic", "spatial", "temporal")
RVT_TASK_ALIASES = {"summary": "summarization", "seg": "segmentation", "qa": "vqa", "VQA": "vqa"}
PUBLISHED = "this repository's demo/ directory (rebuild: python scripts/build_demo.py)"


class DemoDataset(Dataset):
    """Images (ReasonSeg format), videos (ReVOS format), then RVTBench queries from ``root``; see the
    module docstring.

    ``errors``: the parts' per-sample errors, ids prefixed like the samples'. Raises
    DatasetFormatError when ``root`` or a part is missing or malformed as a whole.
    """

    name = "demo"

    def __init__(self, root: str | Path, split: str = "demo") -> None:
        super().__init__()
        self.root = Path(root)
        self.split = split
        require_dir(self.root, dataset=self.name, layout=f"{self.root}/\n{LAYOUT}", published=PUBLISHED)
        images = ReasonSegDataset(self.root / "reasonseg", split="val")
        videos = ReVOSDataset(self.root / "revos", split="valid")
        queries = CanonicalDataset(self.root, split="test", annotation="rvtbench/test.jsonl", frames_dir="revos/JPEGImages",
                                   name="rvtbench", levels=RVT_LEVELS, categories=RVT_CATEGORIES, task_aliases=RVT_TASK_ALIASES)
        clip_annotations = {s.meta["video"]: s.annotations for s in videos}
        for prefix, part in (("image", images), ("video", videos), ("rvt", queries)):
            for error in part.errors:
                self.errors.append({**error, "sample_id": f"{prefix}/{error['sample_id']}"})
            for s in part:
                annotations = s.annotations
                if part is queries:
                    if s.meta["video"] not in clip_annotations:
                        self.record_error(f"{prefix}/{s.id}", f"{self.root}/rvtbench/test.jsonl id {s.id!r}: video "
                                          f"{s.meta['video']!r} is not a clip of {self.root}/revos "
                                          f"(clips: {sorted(clip_annotations)})")
                        continue
                    annotations = clip_annotations[s.meta["video"]]
                self._samples.append(replace(s, id=f"{prefix}/{s.id}", dataset=self.name, split=split,
                                             meta={**s.meta, "source": part.name}, annotations=annotations))
        self.require_some_samples(str(self.root))
