"""The perception backend interface: one method per tool of adapters.twin.registry.TOOLS (its ``method``).

A backend (``oracle``: annotations; ``foundation``: SAM2 / DepthAnything V2 / OWLv2 / Qwen2.5-VL
models, adapters.twin.foundation; ``provided``: twin files shipped with a dataset) fills the
twin field its tool ``provides``, in place, reading what earlier tools of the plan left in the twin
(instances from SAM2, ``twin.artifacts`` such as depth maps). adapters.twin.builder.build_twin calls
``run`` in the plan's topological order. Trajectory is pure geometry over SAM2's centroids and is
implemented here once for every backend.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable

from adapters.twin import geometry
from adapters.twin.registry import TOOLS
from adapters.twin.schema import Trajectory, Twin
from core.types import AdapterError, Sample


class Perception(ABC):
    """Base class of perception backends. Subclasses set ``name`` and implement the tool methods."""

    name: str = "perception"

    def fingerprint(self) -> dict:
        """What identifies this backend's outputs (name, model ids, params), for run names and caches."""
        return {"name": self.name}

    def run(self, tool: str, sample: Sample, twin: Twin) -> None:
        """Run one plan node on ``sample``, filling ``twin`` in place.

        The method is the registry's ``TOOLS[tool].method``. Raises AdapterError for a tool name
        outside the registry (the plan was validated, so this is a programming error upstream) or
        one this backend has no method for, and whatever the tool method raises.
        """
        spec = TOOLS.get(tool)
        method: Callable[[Sample, Twin], None] | None = getattr(self, spec.method, None) if spec else None
        if method is None:
            raise AdapterError(f"sample {sample.id}: perception {self.name!r} has no tool {tool!r}")
        method(sample, twin)
        twin.tools.append(tool)

    @abstractmethod
    def sam2(self, sample: Sample, twin: Twin) -> None:
        """Create ``twin.instances`` (ids 1..N) with per-frame bbox/centroid/area/mask and ``twin.masks``."""

    @abstractmethod
    def depth_anything2(self, sample: Sample, twin: Twin) -> None:
        """Estimate depth for the frames and leave it in ``twin.artifacts["depth"]`` for DepthStats."""

    @abstractmethod
    def owlv2(self, sample: Sample, twin: Twin) -> None:
        """Set ``label`` and ``score`` of each instance (open-vocabulary detection)."""

    @abstractmethod
    def qwen25vl(self, sample: Sample, twin: Twin) -> None:
        """Set ``video.summary``, each frame's ``caption`` and each instance's ``caption``."""

    @abstractmethod
    def depth_stats(self, sample: Sample, twin: Twin) -> None:
        """Set each instance's ``depth`` (mean, std, with the unit and convention of the depth tool:
        metres larger = farther, or relative inverse depth larger = nearer)."""

    @abstractmethod
    def semantic_analysis(self, sample: Sample, twin: Twin) -> None:
        """Set each instance's ``label``."""

    def dinov2(self, sample: Sample, twin: Twin) -> None:
        """Leave ``twin.artifacts["dinov2"]`` = {instance id: (D,) L2-normalised float32 feature}.
        Only model-backed perception has features: the default raises AdapterError."""
        raise AdapterError(f"sample {sample.id}: perception {self.name!r} has no DINOv2 features "
                           "(use perception=foundation or perception=tiny)")

    def trajectory(self, sample: Sample, twin: Twin) -> None:
        """Set each instance's ``trajectory`` from its per-frame centroids (adapters.twin.geometry)."""
        for inst in twin.instances:
            motion = geometry.trajectory({t: fr.centroid for t, fr in inst.frames.items()})
            inst.trajectory = None if motion is None else Trajectory(**motion)
