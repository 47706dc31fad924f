"""JiT's planner (arXiv 2503.21056, sec. 3.2): an LLM reads the query and returns a JSON
configuration of the specialist vision models it needs, each with a rationale, and the query's
reasoning type. Only those specialists run ("just in time"): the configuration becomes the DAG the
twin builder runs (rvt_bench.adapters.twin.dag / builder), the same machinery as DT-R1's plans.

Reply format: ``{"query_type": "semantic" | "spatial" | "temporal", "specialists": [{"name":
"SAM2", "rationale": "..."}, ...]}``, lenient about a Markdown fence and prose around the object,
strict about meaning (a known query type, known specialist names, a list of objects).

From specialists to a DAG (``to_dag``): SAM2 always runs (objects and their masks are the answer's
material; the paper's pipeline segments every frame) and so does Trajectory (pure geometry over SAM2's
tracks, the temporal attributes of the scene graph). DepthAnything2 brings DepthStats (per-object
depth for "behind"); OWLv2 labels SAM2's objects; DINOv2 adds appearance features.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from rvt_bench.core.types import ParseError

QUERY_TYPES = ("semantic", "spatial", "temporal")
SPECIALISTS = ("SAM2", "DepthAnything2", "OWLv2", "DINOv2")
_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```", re.DOTALL)


class JiTError(ParseError):
    """A JiT model output that cannot be used. ``reason``: "plan_json", "plan_schema",
    "unknown_specialist", "unknown_query_type", "answer_json", "unknown_id", "program_error",
    "program_output", "empty_answer"."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"jit ({reason}): {message}")
        self.reason = reason


@dataclass
class Plan:
    """query_type: semantic | spatial | temporal; specialists: [(name, rationale)] in reply order."""

    query_type: str
    specialists: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"query_type": self.query_type,
                "specialists": [{"name": n, "rationale": r} for n, r in self.specialists]}


def json_object(text: str, what: str, reason: str) -> dict:
    """The first JSON object in ``text``: inside a Markdown fence, the whole text, or the span from
    the first '{' to the last '}'. Raises JiTError(reason) when none parses."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text.strip()]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for body in candidates:
        try:
            obj = json.loads(body)
        except (ValueError, RecursionError):  # not JSON, an integer past the digit limit, nesting past the stack
            continue
        if isinstance(obj, dict):
            return obj
    raise JiTError(reason, f"{what} is not a JSON object: {text.strip()[:160]!r}")


def parse_plan(text: str, allowed: tuple[str, ...] = SPECIALISTS) -> Plan:
    """The planner's reply as a Plan (see module docstring). ``allowed``: the specialists this
    run offers. Raises JiTError with reason "plan_json", "plan_schema", "unknown_query_type" or
    "unknown_specialist"."""
    obj = json_object(text, "the plan", "plan_json")
    query_type = obj.get("query_type")
    if not isinstance(query_type, str) or query_type.strip().lower() not in QUERY_TYPES:
        raise JiTError("unknown_query_type", f"query_type must be one of {list(QUERY_TYPES)}, got {query_type!r}")
    items = obj.get("specialists")
    if not isinstance(items, list):
        raise JiTError("plan_schema", f'"specialists" must be a list of {{"name", "rationale"}}, got {items!r}'[:200])
    specialists: list[tuple[str, str]] = []
    for item in items:
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str):
            raise JiTError("plan_schema", f"a specialist must be {{\"name\", \"rationale\"}}, got {item!r}"[:200])
        if name not in allowed:
            raise JiTError("unknown_specialist", f"{name!r} is not a specialist (known: {', '.join(allowed)})")
        rationale = item.get("rationale", "") if isinstance(item, dict) else ""
        if name not in [n for n, _ in specialists]:
            specialists.append((name, str(rationale)))
    return Plan(query_type.strip().lower(), specialists)


def to_dag(plan: Plan) -> dict[str, list[str]]:
    """The twin-builder DAG of a plan (see module docstring), e.g. DepthAnything2 ->
    {"SAM2": [], "Trajectory": ["SAM2"], "DepthAnything2": [], "DepthStats": ["SAM2", "DepthAnything2"]}."""
    names = {n for n, _ in plan.specialists}
    dag: dict[str, list[str]] = {"SAM2": [], "Trajectory": ["SAM2"]}
    if "OWLv2" in names:
        dag["OWLv2"] = ["SAM2"]
    if "DepthAnything2" in names:
        dag["DepthAnything2"] = []
        dag["DepthStats"] = ["SAM2", "DepthAnything2"]
    if "DINOv2" in names:
        dag["DINOv2"] = ["SAM2"]
    return dag
