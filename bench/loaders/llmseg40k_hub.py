"""LLM-Seg40K by hub id (`dataset.hf_dataset=ID`, rvt_bench.loaders.hub): no hub copy of the
release is known (the authors publish a Google Drive folder; the images are COCO train2017 and
EgoObjects). A hub repository holding the authors' files in their layout (LLMSeg-40K/ with
split/<split>.json, beside coco/train2017/ and ego_objects/images/, in folders or zips) is read
as dataset.root would be; anything else stops with one line pointing to the official download.
docs/benchmarks/llmseg40k.md "Data by hub id".
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rvt_bench.core.types import DatasetFormatError
from rvt_bench.loaders import hub

if TYPE_CHECKING:
    from rvt_bench.loaders.llmseg40k import LLMSeg40KDataset

OFFICIAL = ("https://github.com/wangjunchi/LLMSeg (its Google Drive folder, plus COCO train2017 and EgoObjects "
            "images; set dataset.root to the LLMSeg-40K folder)")


def load(ds: "LLMSeg40KDataset", hf_dataset: str, revision: str | None) -> Path:
    """The LLM-Seg40K annotation folder in hub copy `hf_dataset` (zips extracted once). Sets
    ds.data_source (official: None, LLM-Seg publishes no checksums). Raises DatasetFormatError when
    the copy holds no <split>.json in the authors' layout."""
    snap, resolved = hub.snapshot(ds.name, hf_dataset, revision)
    roots = _roots(snap, ds.split)
    if not roots:
        extracted = hub.extract_archives(ds.name, snap, hub.work_dir(hf_dataset, resolved) / "extracted")
        roots = _roots(extracted, ds.split) if extracted else []
    if not roots:
        raise DatasetFormatError(f"llmseg40k: {hf_dataset} (revision {resolved}) holds no LLM-Seg40K files "
                                 f"(split/{ds.split}.json in the authors' layout); no hub copy of LLM-Seg40K is known: "
                                 f"download it from {OFFICIAL}")
    ds.data_source = hub.DataSource(hf_dataset, resolved, "llmseg-files", None).to_json()
    return roots[0]


def _roots(base: Path, split: str) -> list[Path]:
    return hub.find_dirs(base, lambda d: (d / "split" / f"{split}.json").is_file())
