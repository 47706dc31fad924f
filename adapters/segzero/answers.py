"""Seg-Zero's and VisionReasoner's answers, read as their authors' evaluation code reads them.

Source: dvlab-research/Seg-Zero @ 42a3345 (evaluation_scripts/evaluation.py, the Seg-Zero-7B
single-object format; evaluation_scripts/evaluation_visionreasoner.py, the multi-object format) and
dvlab-research/VisionReasoner @ a455092 (vision_reasoner/models/vision_reasoner_model.py,
``extract_bbox_points_think``). Both models see the image resized to 840 x 840 and answer in that
image's pixels; x is scaled by W / 840 and y by H / 840 back to the frame.

- ``seg_zero``: the first ``{...}`` without nested braces in the reply, as JSON; its first key
  containing "bbox" with 4 numbers, and its first two keys containing "points" (``points_1``,
  ``points_2``): one object, one box and two positive clicks. Each coordinate is ``int()``-truncated
  first and the product rounded (``round(int(v) * factor)``). The thought is
  ``<think>([^<]+)</think>``. A reply without any of these (no JSON object, no 4-number bbox, fewer
  than two points keys, no thought) fails in the authors' script, which scores the sample 0.
- ``visionreasoner``: the JSON list inside ``<answer>...</answer>``, one ``{"bbox_2d": [4],
  "point_2d": [2]}`` per object; coordinates ``int(v * factor + 0.5)``. A reply without that (no
  answer block, invalid JSON, an entry without either key) gives no object in the authors' code: an
  empty mask, scored 0. The thought is optional.
Every failure raises rvt_bench.adapters.vlm.reply.ReplyError (kind "parse", with its `reason`): the harness scores it as an empty mask, which is what
both scripts score (intersection 0, union the ground truth's area).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from rvt_bench.adapters.vlm.reply import ReplyError

FORMATS = ("seg_zero", "visionreasoner")
_FIRST_OBJECT = re.compile(r"{[^}]+}")
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)
_THINK = re.compile(r"<think>([^<]+)</think>")


@dataclass
class Answer:
    """Objects in frame pixels: ``boxes[i]`` [x1, y1, x2, y2] (ints, as the authors' code makes
    them, corners as written) with positive clicks ``points[i]`` ([[x, y], ...]); the thought."""

    boxes: list[list[int]] = field(default_factory=list)
    points: list[list[list[int]]] = field(default_factory=list)
    think: str = ""


def parse(text: str, answer_format: str, x_factor: float, y_factor: float) -> Answer:
    """The objects of a reply in frame pixels; x_factor = W / 840, y_factor = H / 840 (the
    resized input's side). Raises ReplyError (kind "parse", with `reason`) as the module docstring says, and
    ValueError for an unknown format."""
    if answer_format == "seg_zero":
        return _seg_zero(text, x_factor, y_factor)
    if answer_format == "visionreasoner":
        return _visionreasoner(text, x_factor, y_factor)
    raise ValueError(f"answer format {answer_format!r}: expected one of {FORMATS}")


def _fail(reason: str, what: str, text: str) -> ReplyError:
    return ReplyError(reason, f"{what}: {text.strip()[:160]!r}")


def _coordinates(value: object, n: int) -> list[float] | None:
    if not isinstance(value, list) or len(value) != n:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < 1e9 for v in value):
        return None
    return [float(v) for v in value]


def _seg_zero(text: str, fx: float, fy: float) -> Answer:
    match = _FIRST_OBJECT.search(text)
    if match is None:
        raise _fail("no_json", "no JSON object in the reply", text)
    try:
        data = json.loads(match.group(0))
    except (ValueError, RecursionError):
        raise _fail("json", "the reply's first {...} is not JSON", text) from None
    if not isinstance(data, dict):
        raise _fail("json", "the reply's first {...} is not a JSON object", text)
    bbox_key = next((k for k in data if "bbox" in k.lower()), None)
    box = _coordinates(data.get(bbox_key), 4) if bbox_key else None
    if box is None:
        raise _fail("no_boxes", "no bbox of 4 numbers in the answer", text)
    point_keys = [k for k in data if "points" in k.lower()][:2]
    points = [_coordinates(data[k], 2) for k in point_keys]
    if len(points) != 2 or any(p is None for p in points):
        raise _fail("no_points", "the answer lacks two points (points_1, points_2)", text)
    think = _THINK.search(text)
    if think is None:  # the authors' script fails on the unset thought: the sample scores 0
        raise _fail("no_think", "no <think>...</think> in the reply", text)
    scaled_box = [round(int(box[0]) * fx), round(int(box[1]) * fy), round(int(box[2]) * fx), round(int(box[3]) * fy)]
    clicks = [[round(int(p[0]) * fx), round(int(p[1]) * fy)] for p in points]  # type: ignore[index]
    return Answer([scaled_box], [clicks], think.group(1))


def _visionreasoner(text: str, fx: float, fy: float) -> Answer:
    match = _ANSWER.search(text)
    if match is None:
        raise _fail("no_answer", "no <answer>...</answer> in the reply", text)
    try:
        data = json.loads(match.group(1))
    except (ValueError, RecursionError):
        raise _fail("json", "the answer is not JSON", text) from None
    if not isinstance(data, list):
        raise _fail("json", "the answer is not a JSON list of objects", text)
    answer = Answer(think=(m.group(1) if (m := _THINK.search(text)) else ""))
    for item in data:
        box = _coordinates(item.get("bbox_2d"), 4) if isinstance(item, dict) else None
        point = _coordinates(item.get("point_2d"), 2) if isinstance(item, dict) else None
        if box is None or point is None:
            raise _fail("no_boxes", "an answer entry lacks bbox_2d [4] or point_2d [2]", text)
        answer.boxes.append([int(box[0] * fx + 0.5), int(box[1] * fy + 0.5), int(box[2] * fx + 0.5), int(box[3] * fy + 0.5)])
        answer.points.append([[int(point[0] * fx + 0.5), int(point[1] * fy + 0.5)]])
    return answer
