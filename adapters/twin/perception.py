"""The perception backend interface: a method per tool of rvt_bench.adapters.twin.registry.TOOLS that has a
``method`` (the DT-R1 tools, which each backend serves its own way); later tools are step functions
the registry names (``step``), which need no edit here.

A backend (``oracle``: annotations; ``foundation``: SAM2 / DepthAnything V2 / OWLv2 / Qwen2.5-VL
models, rvt_bench.adapters.twin.foundation; ``provided``: twin files shipped with a dataset) fills the
twin field its tool ``provides``, in place, reading what earlier tools of the plan left in the twin
(instances from SAM2, ``twin.artifacts`` such as depth maps). rvt_bench.adapters.twin.builder.build_twin calls
``run`` in the plan's topological order. Trajectory is pure geometry over SAM2's centroids and is
implemented here once for every backend.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable

from rvt_bench.adapters.twin import geometry
from rvt_bench.adapters.twin.registry import TOOLS, ToolSpec, step_function
from rvt_bench.adapters.twin.schema import Trajectory, Twin
from rvt_bench.core.types import AdapterError, Sample


class Perception(ABC):
    """Base class of perception backends. Subclasses set ``name`` and implement the tool methods."""

    name: str = "perception"

    def refuse_segmenter(self, segmenter: object) -> None:
        """AdapterError when `segmenter` is set (perception/segmenter=NAME) on a backend whose
        instances come from no segmentation model (oracle, provided)."""
        if segmenter:
            raise AdapterError(f"perception/segmenter applies to perception=foundation or perception=tiny; perception "
                               f"{self.name!r} takes its instances from no segmentation model (drop perception/segmenter)")

    def fingerprint(self) -> dict:
        """What identifies this backend's outputs (name, model ids, params), for run names and caches."""
        return {"name": self.name}

    def depth_convention(self) -> tuple[str, str] | None:
        """(unit, convention) of the depth this perception's twins will state in ``depth_unit``, known
        before any sample (a policy's prompt may say it); None when this perception does not declare
        one (the default)."""
        return None

    def run(self, tool: str, sample: Sample, twin: Twin) -> None:
        """Run one plan node on ``sample``, filling ``twin`` in place, and append it to ``twin.tools``.

        The node runs as this backend's method ``TOOLS[tool].method`` when it has one, else as the
        registry's step function ``step(self, sample, twin)`` when ``serves_step`` allows it. Raises
        AdapterError "perception X has no tool Y" for a tool name outside the registry (the plan was
        validated, so this is a programming error upstream) or one this backend can run neither
        way; ValueError for a step that cannot be imported; and whatever the tool raises.
        """
        spec = TOOLS.get(tool)
        method: Callable[[Sample, Twin], None] | None = (
            getattr(self, spec.method, None) if spec is not None and spec.method else None)
        if method is not None:
            method(sample, twin)
        elif spec is not None and spec.step is not None and self.serves_step(spec):
            step_function(spec)(self, sample, twin)
        else:
            hint = " (it needs a model: perception=foundation or perception=tiny)" if spec and spec.uses else ""
            raise AdapterError(f"sample {sample.id}: perception {self.name!r} has no tool {tool!r}{hint}")
        twin.tools.append(tool)

    def serves_step(self, spec: ToolSpec) -> bool:
        """Whether this backend runs ``spec``'s step function: here only steps that call no model
        (``spec.uses`` None), since a model-backed step calls FoundationPerception's helpers."""
        return spec.uses is None

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

    def trajectory(self, sample: Sample, twin: Twin) -> None:
        """Set each instance's ``trajectory`` from its per-frame centroids (rvt_bench.adapters.twin.geometry)."""
        for inst in twin.instances:
            motion = geometry.trajectory({t: fr.centroid for t, fr in inst.frames.items()})
            inst.trajectory = None if motion is None else Trajectory(**motion)
