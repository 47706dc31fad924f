"""JiT's prompts: templates from conf/model/jit.yaml (``prompts``), rendered with literal field
replacement (JSON braces need no escaping). Fields: {specialists} (one "- name: what" line per
offered specialist), {media} ("an image" / "a video of N frames"), {task}, {query}, {graph} (the
scene graph as text, rvt_bench.adapters.jit.scene_graph.to_text)."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from rvt_bench.core.types import AdapterError, Sample

REQUIRED = ("version", "specialists", "planner_system", "planner_user", "answer_ids", "answer_text", "program",
            "query_user")


def check(prompts: Mapping[str, Any]) -> dict:
    """The prompts block as a plain dict; AdapterError naming a missing key."""
    prompts = dict(prompts)
    missing = [k for k in REQUIRED if k not in prompts]
    if missing:
        raise AdapterError(f"model.prompts lacks {missing}; expected keys {list(REQUIRED)}")
    prompts["specialists"] = dict(prompts["specialists"])
    return prompts


def fill(template: str, **fields: str) -> str:
    for key, value in fields.items():
        template = template.replace("{" + key + "}", value)
    return template.strip()


def media(sample: Sample) -> str:
    return "an image" if sample.modality == "image" else f"a video of {sample.num_frames} frames"


def planner_messages(prompts: Mapping[str, Any], sample: Sample, offered: list[str]) -> list[dict]:
    """[system, user] for the planner; ``offered``: the specialist names this run may plan."""
    lines = "\n".join(f"- {name}: {prompts['specialists'][name]}" for name in offered)
    return [{"role": "system", "content": fill(prompts["planner_system"], specialists=lines)},
            {"role": "user", "content": fill(prompts["planner_user"], media=media(sample), task=sample.task,
                                             query=sample.query)}]


def reasoning_messages(prompts: Mapping[str, Any], system_key: str, sample: Sample, graph_text: str) -> list[dict]:
    """[system, user] for a reasoning call: ``system_key`` is answer_ids, answer_text or program."""
    return [{"role": "system", "content": fill(prompts[system_key])},
            {"role": "user", "content": fill(prompts["query_user"], graph=graph_text, task=sample.task,
                                             query=sample.query)}]


def digest(prompts: Mapping[str, Any]) -> str:
    """Short sha256 of the prompts block, for the fingerprint (a changed prompt is a new run)."""
    return hashlib.sha256(json.dumps(dict(prompts), sort_keys=True, default=dict).encode()).hexdigest()[:12]
