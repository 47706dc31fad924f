"""Metric units: one metric family each (a name, `score` per sample into its typed values,
`aggregate` over records, `estimator` per metric, `higher_is_better`), composed by
`rvt_bench.metrics.protocols.units.UnitProtocol` from the dataset config. Adding a metric = one file
here (the unit and its UnitValues kind, imported in rvt_bench/metrics/__init__.py) + its test. See
base.Unit and docs/benchmarks/."""
from rvt_bench.metrics.units.base import Unit

__all__ = ["Unit"]
