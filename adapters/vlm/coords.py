"""Boxes and points in a VLM's reply: parsing, and the coordinate conventions of model families.

Families (``COORDINATE_FAMILIES``; chosen by ``model.coords`` in conf/model/vlm.yaml):
- ``qwen2_5_vl``: absolute pixels of the model's input image, i.e. the frame after smart_resize
  (Qwen2.5-VL report, arXiv 2502.13923, sec. 2.1: "absolute coordinates based on the actual size of
  the image"); also Video-R1, Seg-Zero and VisionReasoner, which are Qwen2.5-VL fine-tunes.
- ``qwen2_vl``: integers in [0, 1000) relative to the image (Qwen2-VL, arXiv 2409.12191, sec. 2.2:
  "normalized to [0, 1000)"); also InternVL's grounding format.
- ``qwen3_vl``: integers in [0, 1000] relative to the image (Qwen3-VL's grounding format; its input
  is resized at factor 32, which the coordinates do not depend on).
- ``internvl``: integers in [0, 1000] relative to the image, written ``<box>[[x1, y1, x2, y2]]</box>``
  (InternVL2.5 / InternVL3).
- ``normalized``: floats in [0, 1] relative to the image.
Which family a model belongs to, and the check that a run does not read one family's boxes in
another's convention: rvt_bench.adapters.vlm.families.
Every box is mapped to the frame's pixels (continuous xyxy, rvt_bench.core.types.Target's convention) and
clamped to [0, W] x [0, H].

Reply format (``parse_detections``): the JSON list Qwen-style models write, ``[{"bbox_2d": [x1,
y1, x2, y2], "point_2d": [x, y], "frame": t, "label": ...}, ...]`` (a single object or a list;
inside a Markdown fence or not; "bbox"/"box" accepted for "bbox_2d", "point" for "point_2d"), else
Qwen2-VL's box tokens with special tokens stripped, ``(x1,y1),(x2,y2)``, else any bracketed list of
four numbers.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from rvt_bench.adapters.vlm.reply import ReplyError
from rvt_bench.core.types import AdapterError

COORDINATE_FAMILIES: dict[str, str] = {
    "qwen2_5_vl": "in pixels of the image as you see it",
    "qwen2_vl": "as integers from 0 to 1000 relative to the image width and height",
    "qwen3_vl": "as integers from 0 to 1000 relative to the image width and height",
    "internvl": "as integers from 0 to 1000 relative to the image width and height",
    "normalized": "as numbers from 0 to 1 relative to the image width and height",
}
"""family -> how the prompts tell the model to write coordinates (the ``{coords}`` field)."""
PER_MILLE = ("qwen2_vl", "qwen3_vl", "internvl")  # integers 0-1000 relative to the image

_NUM = r"\s*(-?\d+(?:\.\d+)?)\s*"
_BRACKETED = re.compile(r"\[" + ",".join([_NUM] * 4) + r"\]")
_QWEN2_TOKENS = re.compile(r"\(" + _NUM + "," + _NUM + r"\)\s*,\s*\(" + _NUM + "," + _NUM + r"\)")
_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```", re.DOTALL)


@dataclass
class Detection:
    """One object the model located: box [x1, y1, x2, y2] (x1 <= x2, y1 <= y2) and optional point
    [x, y], in the family's coordinates until mapped; frame: the frame index it names, or None."""

    box: list[float]
    point: list[float] | None = None
    frame: int | None = None


def check_family(family: str) -> str:
    """``family`` when it is a key of COORDINATE_FAMILIES; else AdapterError (a config error)."""
    if family not in COORDINATE_FAMILIES:
        raise AdapterError(f"model.coords: unknown coordinate family {family!r}; expected one of {sorted(COORDINATE_FAMILIES)}")
    return family


def parse_detections(text: str) -> list[Detection]:
    """Detections in a reply (see module docstring), in reply order. An explicit empty JSON list
    ``[]`` is a valid answer with no object. Raises ReplyError("no_boxes") when the reply holds neither JSON
    detections nor any box."""
    for body in [m.group(1) for m in _FENCE.finditer(text)] + [text.strip(), _outer_json(text)]:
        if not body:
            continue
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):  # not JSON, an integer past the digit limit, nesting past the stack
            continue
        items = parsed if isinstance(parsed, list) else [parsed]
        dets = [d for d in (_from_json(item) for item in items) if d is not None]
        if dets or parsed == []:
            return dets
    boxes = [[float(v) for v in m.groups()] for m in _QWEN2_TOKENS.finditer(text)]
    boxes = boxes or [[float(v) for v in m.groups()] for m in _BRACKETED.finditer(text)]
    boxes = [b for b in boxes if all(math.isfinite(v) for v in b)]  # "1e999" reads as inf: no coordinate
    if not boxes:
        raise ReplyError("no_boxes", f"no box in the reply: {text.strip()[:160]!r}")
    return [Detection(_ordered(b)) for b in boxes]


def to_frame(det: Detection, family: str, input_hw: tuple[int, int], frame_hw: tuple[int, int]) -> Detection:
    """``det`` mapped from the family's coordinates to the frame's pixels and clamped.

    input_hw: (h, w) of the image the model saw (after smart_resize); frame_hw: (H, W) of the frame.
    """
    sx, sy = _scales(check_family(family), input_hw, frame_hw)
    height, width = frame_hw

    def x(v: float) -> float:
        return min(max(v * sx, 0.0), float(width))

    def y(v: float) -> float:
        return min(max(v * sy, 0.0), float(height))

    x1, y1, x2, y2 = det.box
    point = None if det.point is None else [x(det.point[0]), y(det.point[1])]
    return Detection([x(x1), y(y1), x(x2), y(y2)], point, det.frame)


def from_frame(box: list[float], family: str, input_hw: tuple[int, int], frame_hw: tuple[int, int]) -> list[float]:
    """The inverse of to_frame for a box inside the frame: frame pixels -> the family's coordinates
    (what a model of that family would write for this box)."""
    sx, sy = _scales(check_family(family), input_hw, frame_hw)
    return [box[0] / sx, box[1] / sy, box[2] / sx, box[3] / sy]


def _scales(family: str, input_hw: tuple[int, int], frame_hw: tuple[int, int]) -> tuple[float, float]:
    """(sx, sy): frame pixels per family unit along x and y."""
    height, width = frame_hw
    if family == "qwen2_5_vl":
        return width / input_hw[1], height / input_hw[0]
    if family in PER_MILLE:
        return width / 1000.0, height / 1000.0
    return float(width), float(height)


def _from_json(item: object) -> Detection | None:
    if not isinstance(item, dict):
        return None
    box = next((item[k] for k in ("bbox_2d", "bbox", "box") if k in item), None)
    if not _numbers(box, 4):
        return None
    point = next((item[k] for k in ("point_2d", "point") if k in item), None)
    frame = item.get("frame")
    if frame is not None and (isinstance(frame, bool) or not isinstance(frame, int) or not 0 <= frame < 10**9):
        raise ReplyError("json", f"detection frame must be an integer frame index, got {str(frame)[:20]!r}")
    return Detection(_ordered([float(v) for v in box]),
                     [float(v) for v in point] if _numbers(point, 2) else None, frame)


def _numbers(value: object, n: int) -> bool:
    """`n` finite numbers (a NaN or an integer too large for a float is no coordinate)."""
    return (isinstance(value, list) and len(value) == n
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and _finite(v) for v in value))


def _finite(v: int | float) -> bool:
    return abs(v) < 1e300 if isinstance(v, int) else math.isfinite(v)


def _ordered(b: list[float]) -> list[float]:
    return [min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3])]


def _outer_json(text: str) -> str:
    """The span from the first '[' or '{' to the last matching bracket kind, for JSON inside prose."""
    starts = [i for i in (text.find("["), text.find("{")) if i >= 0]
    if not starts:
        return ""
    start = min(starts)
    end = text.rfind("]" if text[start] == "[" else "}")
    return text[start:end + 1] if end > start else ""
