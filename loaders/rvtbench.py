"""RVTBench (Shen et al. 2025, arXiv:2505.11838): reasoning visual tasks on 200 videos from DAVIS 2017
and SA-V; 3,896 queries of four tasks (segmentation, grounding, VQA, summary), three reasoning
categories (semantic, spatial, temporal) and difficulty levels 1-4.

Published on the Hugging Face hub as ``yiqingshen/rvtbench`` and on Zenodo
(DOI 10.5281/zenodo.19697191), with pre-constructed digital-twin JSON files. Its per-query format is
not publicly documented, so it is read as canonical records (loaders/canonical.py), from a
local directory or through ``datasets.load_dataset`` (``hf_dataset``: the hub id or a local path);
the release's own key names are mapped in conf/dataset/rvtbench.yaml (``fields``, ``task_aliases``:
the paper's "summary" is our "summarization"), not in code.

Twins: a record's ``twin`` path (relative to root) becomes ``Sample.meta["twin_path"]`` (absolute,
checked to exist), which ``perception=provided`` (adapters/twin/provided.py) reads instead of
running perception tools.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from loaders.canonical import CanonicalDataset

CATEGORIES = ("semantic", "spatial", "temporal")
LEVELS = (1, 2, 3, 4)
TASK_ALIASES = {"summary": "summarization", "seg": "segmentation", "qa": "vqa", "VQA": "vqa"}


class RVTBenchDataset(CanonicalDataset):
    """RVTBench split from canonical records; see CanonicalDataset for every argument.

    Defaults: levels 1-4, categories semantic / spatial / temporal, task aliases TASK_ALIASES (merged
    under the config's), no default task (each record names its task). Raises DatasetFormatError
    as CanonicalDataset does.
    """

    name = "rvtbench"
    published = "https://huggingface.co/datasets/yiqingshen/rvtbench and https://doi.org/10.5281/zenodo.19697191"

    def __init__(self, root, split: str = "test", *, levels: Sequence[int] | None = LEVELS,
                 categories: Sequence[str] | None = CATEGORIES, task_aliases: Mapping[str, str] | None = None, **kw) -> None:
        super().__init__(root, split, levels=levels, categories=categories,
                         task_aliases={**TASK_ALIASES, **dict(task_aliases or {})}, **kw)
