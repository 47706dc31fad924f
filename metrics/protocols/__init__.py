"""Per-benchmark scoring protocols (see base.Protocol). Hydra builds them from the dataset config:
`protocol: {_target_: rvt_bench.metrics.protocols.revos.ReVOSProtocol}`; nothing is chosen by dataset name. Metric families are units (metrics/units/), composed by
UnitProtocol and routed by CompositeProtocol."""
from rvt_bench.metrics.protocols.base import Protocol
from rvt_bench.metrics.protocols.composite import CompositeProtocol
from rvt_bench.metrics.protocols.llmseg40k import LLMSegProtocol
from rvt_bench.metrics.protocols.reasonseg import ReasonSegProtocol
from rvt_bench.metrics.protocols.revos import ReVOSProtocol
from rvt_bench.metrics.protocols.rvtbench import RVTBenchProtocol
from rvt_bench.metrics.protocols.units import UnitProtocol

__all__ = ["Protocol", "CompositeProtocol", "LLMSegProtocol", "ReasonSegProtocol", "ReVOSProtocol", "RVTBenchProtocol",
           "UnitProtocol"]
