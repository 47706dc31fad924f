"""Metric units: one metric family each (a name, `score` per sample, `aggregate` over records,
`higher_is_better`), composed by `rvt_bench.metrics.protocols.units.UnitProtocol` from the dataset config.
Adding a metric = one file here + its test. See base.Unit and docs/benchmarks/."""
from rvt_bench.metrics.units.base import Unit

__all__ = ["Unit"]
