"""The vision tools a DT-R1 plan may name, and what each one needs and fills in the twin.

Node names follow the DT-R1 paper (arXiv 2511.12365), whose example plan is
``{"SAM2": [], "DepthAnything2": [], "DepthStats": ["SAM2", "DepthAnything2"],
"SemanticAnalysis": ["SAM2"]}``. A tool's ``requires`` are the nodes it must list as its
dependencies for a plan to be valid (adapters.twin.dag.validate_dag); ``provides`` names the twin
field it fills (adapters.twin.schema). The order of ``TOOLS`` is also the tie-break order of the
topological sort, so roots run in a fixed order (SAM2 first: later tools attach to its instances).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolSpec:
    """One plan node.

    name:        the node name as the policy writes it in the DAG JSON.
    requires:    nodes that must appear among this node's dependencies.
    provides:    the twin field this tool fills, e.g. "instances[].depth".
    description: one line for the policy's system prompt.
    listed:      shown by describe_tools(); tools added after DT-R1's prompt was fixed (DINOv2, for
                 JiT) are unlisted so that prompt, and the runs named after it, stay as they were.
    """

    name: str
    requires: tuple[str, ...]
    provides: str
    description: str
    listed: bool = True


def _specs(*specs: ToolSpec) -> dict[str, ToolSpec]:
    return {s.name: s for s in specs}


TOOLS: dict[str, ToolSpec] = _specs(
    ToolSpec(
        "SAM2", (), "instances[].frames",
        "segments and tracks every object: per instance and frame a mask, bbox [x1, y1, x2, y2] px, "
        "centroid [x, y] px and area px",
    ),
    ToolSpec(
        "DepthAnything2", (), "depth (internal)",
        "estimates the depth of every frame; use DepthStats to read it",
    ),
    ToolSpec(
        "OWLv2", (), "instances[].label",
        "open-vocabulary detection: a category label and score for each instance",
    ),
    ToolSpec(
        "Qwen2.5-VL", (), "video.summary, frames[].caption, instances[].caption",
        "vision-language captions of the video, of each frame and of each instance",
    ),
    ToolSpec(
        "DepthStats", ("SAM2", "DepthAnything2"), "instances[].depth",
        "per instance depth mean and std; unit and direction in the twin's depth_unit "
        "(metres larger = farther, or relative inverse depth larger = nearer)",
    ),
    ToolSpec(
        "SemanticAnalysis", ("SAM2",), "instances[].label",
        "semantic label of each segmented instance",
    ),
    ToolSpec(
        "Trajectory", ("SAM2",), "instances[].trajectory",
        "per instance motion: first/last visible frame, start/end centroid, displacement [dx, dy] px "
        "and path length px",
    ),
    ToolSpec(
        "DINOv2", ("SAM2",), "twin.artifacts['dinov2']",
        "DINOv2 appearance feature of each instance (cosine similarity between instances)", listed=False,
    ),
)


def describe_tools() -> str:
    """The tool list for the policy's system prompt: one line per tool, ``name (requires: ...): what``."""
    lines = []
    for spec in TOOLS.values():
        if not spec.listed:
            continue
        needs = ", ".join(spec.requires) if spec.requires else "nothing"
        lines.append(f"- {spec.name} (requires: {needs}): {spec.description}")
    return "\n".join(lines)
