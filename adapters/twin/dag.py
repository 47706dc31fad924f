"""Parse and validate a DT-R1 plan: the JSON DAG inside ``<dt_plan>...</dt_plan>``.

A plan is a JSON object ``{node: [dependencies]}`` over the tools of rvt_bench.adapters.twin.registry.TOOLS,
e.g. the DT-R1 paper's (arXiv 2511.12365) ``{"SAM2": [], "DepthAnything2": [], "DepthStats":
["SAM2", "DepthAnything2"], "SemanticAnalysis": ["SAM2"]}``. Parsing is lenient about whitespace and
Markdown code fences and strict about meaning: a plan is valid when it parses, is non-empty, every
node and dependency is a known tool, every dependency is itself planned, every node lists the tools
it requires, and the graph is acyclic.
"""
from __future__ import annotations

import graphlib
import json
import re

from rvt_bench.adapters.twin.registry import TOOLS
from rvt_bench.core.types import ParseError

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```$", re.DOTALL)


class DAGError(ParseError):
    """An invalid plan. ``reason`` is one of: "json" (not a JSON object), "schema" (a value is not a
    list of node names), "duplicate_node", "empty", "unknown_node", "missing_dependency" (a dependency
    that is not itself a node of the plan), "insufficient_dependencies" (a node does not list what
    its tool requires), "cycle"."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"invalid DAG ({reason}): {message}")
        self.reason = reason


def parse_dag(text: str) -> dict[str, list[str]]:
    """Parse the plan text into ``{node: [dependencies]}`` (only the JSON shape is checked here;
    meaning is checked by validate_dag).

    Accepts surrounding whitespace and one enclosing Markdown code fence (```json ... ```).
    Raises DAGError with reason "json", "duplicate_node" or "schema".
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        obj = json.loads(body, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise DAGError("json", f"not valid JSON ({exc.msg} at char {exc.pos}): {body[:120]!r}") from exc
    except (ValueError, RecursionError) as exc:  # an integer past Python's digit limit, nesting past its stack
        raise DAGError("json", f"JSON Python cannot read ({type(exc).__name__}): {body[:120]!r}") from None
    if not isinstance(obj, dict):
        raise DAGError("json", f"expected a JSON object {{node: [dependencies]}}, got {type(obj).__name__}")
    for node, deps in obj.items():
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            raise DAGError("schema", f"dependencies of {node!r} must be a list of node names, got {deps!r}")
    return obj


def validate_dag(dag: dict[str, list[str]]) -> list[str]:
    """Check a parsed plan against the tool registry and return its nodes in topological order.

    Ties (nodes ready at the same time) are broken by the order of ``TOOLS``, so the order is
    deterministic and SAM2 runs before the tools that attach to its instances.
    Raises DAGError with reason "empty", "unknown_node", "missing_dependency",
    "insufficient_dependencies" or "cycle".
    """
    if not dag:
        raise DAGError("empty", "the plan names no tool")
    known = ", ".join(TOOLS)
    for node, deps in dag.items():
        if node not in TOOLS:
            raise DAGError("unknown_node", f"{node!r} is not a tool (known: {known})")
        for dep in deps:
            if dep not in TOOLS:
                raise DAGError("unknown_node", f"dependency {dep!r} of {node!r} is not a tool (known: {known})")
            if dep not in dag:
                raise DAGError("missing_dependency", f"{node!r} depends on {dep!r}, which the plan does not run")
        lacking = [r for r in TOOLS[node].requires if r not in deps]
        if lacking:
            raise DAGError(
                "insufficient_dependencies",
                f"{node!r} requires {list(TOOLS[node].requires)} as dependencies; missing {lacking}",
            )
    sorter = graphlib.TopologicalSorter({node: set(deps) for node, deps in dag.items()})
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        raise DAGError("cycle", f"dependency cycle {' -> '.join(exc.args[1])}") from exc
    rank = {name: i for i, name in enumerate(TOOLS)}  # per call: registry.register_tool may have added tools
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=rank.__getitem__)
        order.extend(ready)
        sorter.done(*ready)
    return order


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise DAGError("duplicate_node", f"node {key!r} appears twice")
        seen[key] = value
    return seen
