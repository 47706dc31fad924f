"""gRefCOCO by hub id (`dataset.hf_dataset=ID`, rvt_bench.loaders.hub): the release's annotation
files as the authors' lab publishes them on the hub, `FudanCVL/gRefCOCO`: `grefs(<split_by>).json`
and `instances.json` at the repository's top level (or under `grefcoco/`), the same files as
`<root>/grefcoco/`, read by the same loader. The COCO train2014 images are not in it:
dataset.loader.images=DIR is required. docs/benchmarks/grefcoco.md "Hub copies".
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rvt_bench.core.types import DatasetFormatError
from rvt_bench.loaders import hub

if TYPE_CHECKING:
    from rvt_bench.loaders.grefcoco import GRefCOCODataset

HUB_ID = "FudanCVL/gRefCOCO"
FORMAT = "grefcoco-json"


def load(ds: "GRefCOCODataset", hf_dataset: str, revision: str | None, split_by: str) -> Path:
    """The folder holding `grefs(<split_by>).json` and `instances.json` in hub copy `hf_dataset` at
    `revision` (only those and the card are downloaded into the Hugging Face cache). Sets
    ds.data_source (`official` is null: the authors publish no checksums). Raises DatasetFormatError
    (one line) for a copy without both files at its top level or under grefcoco/."""
    names = [f"grefs({split_by}).json", "instances.json"]
    snap, resolved = hub.snapshot(ds.name, hf_dataset, revision,
                                  allow_patterns=[*names, *(f"grefcoco/{n}" for n in names), "README.md"])
    for folder in (snap, snap / "grefcoco"):
        if all((folder / n).is_file() for n in names):
            ds.data_source = hub.DataSource(hf_dataset, resolved, FORMAT, official=None).to_json()
            return folder
    raise DatasetFormatError(f"grefcoco: {hf_dataset} (revision {resolved[:19]}) has no {' and '.join(names)} at its top "
                             f"level or under grefcoco/ ({HUB_ID}'s layout); set dataset.root to ReLA's datasets "
                             f"directory instead")
