"""Per-benchmark scoring protocols (see base.Protocol). Hydra builds them from the dataset config:
`protocol: {_target_: metrics.protocols.revos.ReVOSProtocol}`; nothing is chosen by dataset name. Metric families are units (metrics/units/), composed by
UnitProtocol and routed by CompositeProtocol."""
from metrics.protocols.base import Protocol
from metrics.protocols.composite import CompositeProtocol
from metrics.protocols.llmseg40k import LLMSegProtocol
from metrics.protocols.reasonseg import ReasonSegProtocol
from metrics.protocols.revos import ReVOSProtocol
from metrics.protocols.rvtbench import RVTBenchProtocol
from metrics.protocols.units import UnitProtocol

__all__ = ["Protocol", "CompositeProtocol", "LLMSegProtocol", "ReasonSegProtocol", "ReVOSProtocol", "RVTBenchProtocol",
           "UnitProtocol"]
