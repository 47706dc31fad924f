"""SA-Co/Gold by hub id (`dataset.hf_dataset=ID`, rvt_bench.loaders.hub): the annotation files as
the authors publish them on the hub, `facebook/SACo-Gold` (gated: accept its terms once and log in,
`huggingface-cli login`). Its dataset card declares the seven subsets' files at the repository's
top level, `gold_<stem>_merged_<a|b|c>_release_test.json`, the names eval_sam3.py reads from its
--gt-folder: the same files as `dataset.root`, read by the same loader. The images are not in it
(MetaCLIP's and SA-1B's: dataset.loader.images=DIR; the evaluator reads none).

lmms-eval's parquet copy `yasserDahou/saco-gold` is refused before anything is downloaded: it is not
the release (no pair ids, no exhaustiveness or crowd flags). docs/benchmarks/saco_gold.md "Hub copies".
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rvt_bench.core.types import DatasetFormatError
from rvt_bench.loaders import hub

if TYPE_CHECKING:
    from rvt_bench.loaders.saco_gold import SACoGoldDataset

HUB_ID = "facebook/SACo-Gold"
FORMAT = "saco-gold-json"
LMMS_ID = "yasserDahou/saco-gold"  # lmms-eval's tasks/saco/_default_template_saco_gold_yaml dataset_path
LMMS_REFUSAL = (f"saco_gold: {LMMS_ID} (lmms-eval's parquet copy) is not SA-Co/Gold's release: one row per pair with "
                f"human_1/2/3_masks only, no pair ids, no is_instance_exhaustive and no iscrowd, so the cgF1 evaluator's "
                f"exhaustiveness filter and crowd handling cannot be applied; set dataset.hf_dataset={HUB_ID} or "
                f"dataset.root to the release's JSONs (docs/benchmarks/saco_gold.md 'Hub copies')")


def refusal(node: Any) -> str | None:
    """The one line refusing the hub copy a dataset node names (checked by rvt_bench.loaders.hub.pin
    before anything is downloaded), None when it may be read."""
    hf_dataset = str(node.get("hf_dataset") or "") if hasattr(node, "get") else ""
    return LMMS_REFUSAL if hf_dataset.strip().lower() == LMMS_ID.lower() else None


def load(ds: "SACoGoldDataset", hf_dataset: str, revision: str | None, names: list[str]) -> Path:
    """The folder holding the release's files `names` (one per chosen annotator) in hub copy
    `hf_dataset` at `revision`, downloading only those (and the card) into the Hugging Face cache.
    Sets ds.data_source (`official` is null: the authors publish no checksums). Raises
    DatasetFormatError (one line) for lmms-eval's copy, or a copy without one of the files at its
    top level."""
    refused = refusal({"hf_dataset": hf_dataset})
    if refused:
        raise DatasetFormatError(refused)
    snap, resolved = hub.snapshot(ds.name, hf_dataset, revision, allow_patterns=[*names, "README.md"])
    missing = [n for n in names if not (snap / n).is_file()]
    if missing:
        raise DatasetFormatError(f"saco_gold: {hf_dataset} (revision {resolved[:19]}) has no {', '.join(missing)} at its "
                                 f"top level ({HUB_ID}'s layout, the files eval_sam3.py reads); set dataset.root to the "
                                 f"folder of the release's JSONs instead")
    ds.data_source = hub.DataSource(hf_dataset, resolved, FORMAT, official=None).to_json()
    return snap
