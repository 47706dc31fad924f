"""The bundled demo benchmark (``demo/``, built by ``scripts/build_demo.py``): images + videos.

Layout::

    <root>/reasonseg/val/...   ReasonSeg format (bench.datasets.reasonseg), split "val"
    <root>/revos/...           ReVOS format (bench.datasets.revos), split "valid"

Sample ids are prefixed by modality so they stay unique: "image/<stem>", "video/<video>/<exp_id>".
Every sample's ``dataset`` is "demo" and ``split`` is "demo"; ``meta["source"]`` names the format it
came from ("reasonseg" or "revos"). Scored by CompositeProtocol (image -> ReasonSeg's gIoU/cIoU,
video -> ReVOS's J/F), see conf/dataset/demo.yaml.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bench.datasets.base import Dataset, require_dir
from bench.datasets.reasonseg import ReasonSegDataset
from bench.datasets.revos import ReVOSDataset

LAYOUT = "  reasonseg/val/<name>.jpg + <name>.json (ReasonSeg)\n  revos/ (ReVOS: JPEGImages/, meta_expressions_valid_.json, mask_dict.json)"
PUBLISHED = "this repository's demo/ directory (rebuild: python scripts/build_demo.py)"


class DemoDataset(Dataset):
    """Images (ReasonSeg format) then videos (ReVOS format) from ``root``; see the module docstring.

    Raises DatasetFormatError when ``root`` or either part is missing or malformed.
    """

    name = "demo"

    def __init__(self, root: str | Path, split: str = "demo") -> None:
        super().__init__()
        self.root = Path(root)
        self.split = split
        require_dir(self.root, dataset=self.name, layout=f"{self.root}/\n{LAYOUT}", published=PUBLISHED)
        images = ReasonSegDataset(self.root / "reasonseg", split="val")
        videos = ReVOSDataset(self.root / "revos", split="valid")
        self.videos = videos  # keeps ReVOSDataset.foreground() reachable for the robustness metric
        for prefix, part in (("image", images), ("video", videos)):
            for s in part:
                self._samples.append(
                    replace(s, id=f"{prefix}/{s.id}", dataset=self.name, split=split, meta={**s.meta, "source": part.name})
                )
