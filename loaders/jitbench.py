"""JiTBench: reasoning video segmentation, 200 videos, 895 queries, three reasoning categories
(semantic, spatial, temporal) x difficulty levels 1-3.

Its release format is not publicly documented, so it is read as canonical per-query records
(loaders/canonical.py): every query is a segmentation with per-frame target masks. A release
with other names is adapted in conf/dataset/jitbench.yaml (``fields``, ``annotation``,
``frames_dir``), not in code. Scored by metrics/protocols/rvtbench.py (J, F, J&F per level and
category).
"""
from __future__ import annotations

from collections.abc import Sequence

from loaders.canonical import CanonicalDataset

CATEGORIES = ("semantic", "spatial", "temporal")
LEVELS = (1, 2, 3)


class JiTBenchDataset(CanonicalDataset):
    """JiTBench split from canonical records; see CanonicalDataset for every argument.

    Defaults: task "segmentation" for records without one, levels 1-3, categories semantic /
    spatial / temporal. Raises DatasetFormatError as CanonicalDataset does, the message naming
    the expected layout and where the data is published.
    """

    name = "jitbench"
    published = "the JiTBench authors' release (no public download URL known to rvt-bench; see conf/dataset/jitbench.yaml)"

    def __init__(self, root, split: str = "test", *, levels: Sequence[int] | None = LEVELS,
                 categories: Sequence[str] | None = CATEGORIES, default_task: str | None = "segmentation", **kw) -> None:
        super().__init__(root, split, levels=levels, categories=categories, default_task=default_task, **kw)
