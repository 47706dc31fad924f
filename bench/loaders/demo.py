"""The bundled demo benchmark (``demo/``, built by ``scripts/build_demo.py``): ReasonSeg-format
images, ReVOS-format clips and RVTBench-style queries on those clips, ids prefixed by part.
Layout, scoring and bad data: docs/benchmarks/demo.md.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rvt_bench.core import files
from rvt_bench.core.printable import printable
from rvt_bench.loaders.base import Dataset, DatasetFormatError, require_dir
from rvt_bench.loaders.reasonseg import ReasonSegDataset
from rvt_bench.loaders.revos import ReVOSDataset
from rvt_bench.loaders.canonical import CanonicalDataset

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

    ``split``: "demo" = every sample; another name = the sample ids listed in
    ``root/splits/<split>.txt`` (one per line, ``#`` comments), in the demo's order ("quick": what
    the main job runs).
    ``errors``: the parts' per-sample errors, ids prefixed like the samples'. Raises
    DatasetFormatError when ``root`` or a part is missing or malformed as a whole, or when a split
    file is missing or names a sample the demo does not have.
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
        if split != "demo":
            self._select(self.root / "splits" / f"{split}.txt")
        self.require_some_samples(str(self.root))

    def _select(self, path: Path) -> None:
        """Keep the samples (and per-sample errors) whose ids `path` lists."""
        if not path.is_file():
            known = ["demo", *sorted(p.stem for p in path.parent.glob("*.txt"))]
            raise DatasetFormatError(f"demo split {path.stem!r}: no {path}; splits: {known}")
        # utf-8-sig: a split file saved with a byte-order mark reads the same
        try:
            text = files.read_data(path, "split file").decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DatasetFormatError(f"split file {path} is not UTF-8 text: {exc}") from None
        wanted = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
        twice = sorted({i for i in wanted if wanted.count(i) > 1})
        if twice:
            raise DatasetFormatError(f"{path} lists samples more than once: {twice}")
        have = {s.id for s in self._samples} | {e["sample_id"] for e in self.errors}
        unknown = [i for i in wanted if i not in have]
        if unknown:
            # a listed sample whose data renamed it (its video's name): its data errors say why
            why = "; ".join(f"{printable(e['sample_id'])}: {printable(e['message'])}" for e in self.errors[:3])
            raise DatasetFormatError(f"{path} lists samples the demo does not have: {unknown}"
                                     + (f" (data errors: {why})" if why else ""))
        keep = set(wanted)
        self._samples = [s for s in self._samples if s.id in keep]
        self.errors = [e for e in self.errors if e["sample_id"] in keep]
