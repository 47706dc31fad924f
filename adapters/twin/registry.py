"""The vision tools a DT-R1 plan may name, and what each one needs and fills in the twin.

Node names follow the DT-R1 paper (arXiv 2511.12365), whose example plan is
``{"SAM2": [], "DepthAnything2": [], "DepthStats": ["SAM2", "DepthAnything2"],
"SemanticAnalysis": ["SAM2"]}``. A tool's ``requires`` are the nodes it must list as its
dependencies for a plan to be valid (rvt_bench.adapters.twin.dag.validate_dag); ``provides`` names the twin
field it fills (rvt_bench.adapters.twin.schema). The order of ``TOOLS`` is also the tie-break order of the
topological sort, so roots run in a fixed order (SAM2 first: later tools attach to its instances).

This is the one list of tools; everything else derives from it: the plan validator
(rvt_bench.adapters.twin.dag), the plan grammar's node enum (rvt_bench.adapters.dtr1.grammar.dag_rules), the prompt's
tool list (describe_tools), the perception dispatch (rvt_bench.adapters.twin.perception.Perception.run: the
perception's method ``method`` when it has one, else the function ``step``) and foundation
perception's model nodes, their ``perception.<backend>`` config keys and ``perception.disable``
(``backend`` / ``uses``).

Adding a tool (no edit to perception.py or foundation.py):
- computed from the twin (like Trajectory): 1. its ToolSpec here with ``step``; 2. the step function
  ``fn(perception, sample, twin)`` in its own module under adapters/twin/ (every perception runs
  it); plus its test.
- backed by a model (like DINOv2): 1. its ToolSpec here with ``step``, ``backend`` and ``uses``;
  2. one module in adapters/twin/backends/ holding the model wrapper and the step, which reads the
  frames and calls the model through FoundationPerception's public helpers (``backend``,
  ``frames``, ``cached``, ``key_frame_index``; rvt_bench.adapters.twin.foundation.crop_box); 3. its block,
  under the ``backend`` key, in conf/perception/foundation.yaml; plus its test (a random-weight
  block in conf/perception/tiny.yaml is optional, for offline runs).
  Perceptions without models (oracle, provided) answer "perception X has no tool Y".
``register_tool`` adds one at run time (plugins, tests).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class ToolSpec:
    """One plan node.

    name:        the node name as the policy writes it in the DAG JSON.
    requires:    nodes that must appear among this node's dependencies.
    provides:    the twin field this tool fills, e.g. "instances[].depth".
    description: one line for the policy's system prompt.
    method:      the rvt_bench.adapters.twin.perception.Perception method that runs the tool on the perceptions
                 that have it (the first tools: each perception has its own way); None for a tool run
                 by its ``step`` alone.
    listed:      shown by describe_tools(); tools added after DT-R1's prompt was fixed (DINOv2, for
                 JiT) are unlisted so that prompt, and the runs named after it, stay as they were.
    backend:     for a model node (a tool that is one model): its key under conf/perception/foundation.yaml
                 (FoundationPerception's keyword argument); None for a tool that owns no model.
    uses:        the model node whose backend the tool calls (a model node uses itself; SemanticAnalysis
                 uses Qwen2.5-VL); None for a tool that calls no model (DepthStats, Trajectory).
    step:        "module:function" run as ``function(perception, sample, twin)`` by a perception without
                 the method ``method``; imported on first use (step_function), so listing tools imports
                 no model code. None for a tool that only perception methods run.
    """

    name: str
    requires: tuple[str, ...]
    provides: str
    description: str
    method: str | None = None
    listed: bool = True
    backend: str | None = None
    uses: str | None = None
    step: str | None = None


def _specs(*specs: ToolSpec) -> dict[str, ToolSpec]:
    return {s.name: s for s in specs}


TOOLS: dict[str, ToolSpec] = _specs(
    ToolSpec(
        "SAM2", (), "instances[].frames",
        "segments and tracks every object: per instance and frame a mask, bbox [x1, y1, x2, y2] px, "
        "centroid [x, y] px and area px",
        method="sam2", backend="sam2", uses="SAM2",
    ),
    ToolSpec(
        "DepthAnything2", (), "depth (internal)",
        "estimates the depth of every frame; use DepthStats to read it",
        method="depth_anything2", backend="depth", uses="DepthAnything2",
    ),
    ToolSpec(
        "OWLv2", (), "instances[].label",
        "open-vocabulary detection: a category label and score for each instance",
        method="owlv2", backend="owlv2", uses="OWLv2",
    ),
    ToolSpec(
        "Qwen2.5-VL", (), "video.summary, frames[].caption, instances[].caption",
        "vision-language captions of the video, of each frame and of each instance",
        method="qwen25vl", backend="qwen", uses="Qwen2.5-VL",
    ),
    ToolSpec(
        "DepthStats", ("SAM2", "DepthAnything2"), "instances[].depth",
        "per instance depth mean and std; unit and direction in the twin's depth_unit "
        "(metres larger = farther, or relative inverse depth larger = nearer)",
        method="depth_stats",
    ),
    ToolSpec(
        "SemanticAnalysis", ("SAM2",), "instances[].label",
        "semantic label of each segmented instance",
        method="semantic_analysis", uses="Qwen2.5-VL",
    ),
    ToolSpec(
        "Trajectory", ("SAM2",), "instances[].trajectory",
        "per instance motion: first/last visible frame, start/end centroid, displacement [dx, dy] px "
        "and path length px",
        method="trajectory",
    ),
    ToolSpec(
        "DINOv2", ("SAM2",), "instances[].embedding, twin.artifacts['dinov2']",
        "DINOv2 appearance feature of each instance (cosine similarity between instances)",
        listed=False, backend="dinov2", uses="DINOv2", step="rvt_bench.adapters.twin.backends.dinov2:dinov2_step",
    ),
)


def describe_tools(also: tuple[str, ...] = ()) -> str:
    """The tool list for the policy's system prompt: one line per tool, ``name (requires: ...): what``;
    the listed tools and the unlisted ones named in ``also`` (e.g. ("DINOv2",)), in registry order."""
    lines = []
    for spec in TOOLS.values():
        if not spec.listed and spec.name not in also:
            continue
        needs = ", ".join(spec.requires) if spec.requires else "nothing"
        lines.append(f"- {spec.name} (requires: {needs}): {spec.description}")
    return "\n".join(lines)


def register_tool(spec: ToolSpec) -> ToolSpec:
    """Append ``spec`` to TOOLS (after every tool it requires, as the grammar needs). Raises
    ValueError for a name already registered, a requirement or ``uses`` that is not a tool, a
    ``backend`` key another tool has, or a spec with neither ``method`` nor a "module:function"
    ``step``. The step is not imported here (step_function does, on first use)."""
    if spec.name in TOOLS:
        raise ValueError(f"tool {spec.name!r} is already registered")
    unknown = [r for r in (*spec.requires, *([spec.uses] if spec.uses and spec.uses != spec.name else [])) if r not in TOOLS]
    if unknown:
        raise ValueError(f"tool {spec.name!r} names unknown tools {unknown}")
    if spec.backend is not None and spec.backend in backend_keys():
        raise ValueError(f"tool {spec.name!r}: backend key {spec.backend!r} is {backend_keys()[spec.backend]}'s")
    if spec.method is None and spec.step is None:
        raise ValueError(f"tool {spec.name!r} has neither a perception method nor a step")
    if spec.step is not None:
        _split_step(spec)
    TOOLS[spec.name] = spec
    return spec


def step_function(spec: ToolSpec) -> Callable[[Any, Any, Any], None]:
    """The function ``spec.step`` names, imported now: ``fn(perception, sample, twin) -> None``,
    filling the twin in place. Raises ValueError when the tool has no step, its path is not
    "module:function", or the module (ImportError chained) or function cannot be found."""
    module_name, function_name = _split_step(spec)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"tool {spec.name!r}: cannot import the module of step {spec.step!r}: {exc}") from exc
    fn = getattr(module, function_name, None)
    if not callable(fn):
        raise ValueError(f"tool {spec.name!r}: step {spec.step!r} names no function")
    return fn


def _split_step(spec: ToolSpec) -> tuple[str, str]:
    module_name, sep, function_name = (spec.step or "").partition(":")
    if not (module_name and sep and function_name):
        raise ValueError(f"tool {spec.name!r}: step must be 'module:function', got {spec.step!r}")
    return module_name, function_name


def model_nodes() -> tuple[str, ...]:
    """The tools that are one model each (``backend`` set), in registry order: what
    ``perception.disable`` may name."""
    return tuple(name for name, spec in TOOLS.items() if spec.backend is not None)


def backend_keys() -> dict[str, str]:
    """{config key (``backend``): model node}, in registry order."""
    return {spec.backend: name for name, spec in TOOLS.items() if spec.backend is not None}
