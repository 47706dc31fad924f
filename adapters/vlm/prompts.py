"""The VLM adapter's prompts: templates from conf/model/vlm.yaml (``prompts``), one per task,
rendered for a sample into the user turn's content (frames and text, in order).

Template fields (replaced literally, so JSON braces need no escaping): ``{media}`` (the
``media.image`` or ``media.video`` line; ``{n}`` in it = frames shown), ``{query}``, ``{coords}``
(the coordinate family's phrase, rvt_bench.adapters.vlm.coords.COORDINATE_FAMILIES) and ``{frame_rule}``
(``frame_rule.<task>`` for a video, "" for an image). A video's frames are shown in temporal order,
each after its label ``frame_label`` with ``{index}`` = the frame's 0-based index in the sample,
so the frame a model names in its answer is a sample frame index.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

import numpy as np

from rvt_bench.core.types import TASKS, AdapterError

REQUIRED = ("version", "media", "frame_label", "frame_rule", *TASKS)

Content = list[tuple[str, Any]]
"""A user turn: ("text", str) and ("image", (H, W, 3) uint8 RGB array) parts, in order."""


def check(prompts: Mapping[str, Any]) -> dict:
    """The prompts block as a plain dict; raises AdapterError naming a missing key."""
    prompts = dict(prompts)
    missing = [k for k in REQUIRED if k not in prompts]
    if missing:
        raise AdapterError(f"model.prompts lacks {missing}; expected keys {list(REQUIRED)}")
    for key in ("media", "frame_rule"):
        prompts[key] = dict(prompts[key])
    return prompts


def render_text(prompts: Mapping[str, Any], task: str, modality: str, query: str, coords: str, n_frames: int) -> str:
    """The instruction text for one sample (see module docstring)."""
    template = prompts[task]
    fields = {
        "{media}": str(prompts["media"][modality]).replace("{n}", str(n_frames)),
        "{frame_rule}": str(prompts["frame_rule"].get(task, "")) if modality == "video" else "",
        "{coords}": coords,
        "{query}": query,
    }
    for key, value in fields.items():
        template = template.replace(key, value)
    return template.strip()


def user_content(prompts: Mapping[str, Any], task: str, modality: str, query: str, coords: str,
                 frames: list[np.ndarray], indices: list[int]) -> Content:
    """The user turn: an image then the text, or for a video each shown frame after its label
    (``frame_label`` with its sample frame index from ``indices``) then the text."""
    content: Content = []
    for frame, t in zip(frames, indices):
        if modality == "video":
            content.append(("text", str(prompts["frame_label"]).replace("{index}", str(t))))
        content.append(("image", frame))
    content.append(("text", render_text(prompts, task, modality, query, coords, len(indices))))
    return content


def digest(prompts: Mapping[str, Any]) -> str:
    """Short sha256 of the prompts block, for the adapter fingerprint (a changed prompt is a new run)."""
    return hashlib.sha256(json.dumps(dict(prompts), sort_keys=True, default=dict).encode()).hexdigest()[:12]
