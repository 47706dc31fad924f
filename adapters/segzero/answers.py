"""Seg-Zero's and VisionReasoner's answers, read as their authors' evaluation code reads them.

Source: dvlab-research/Seg-Zero @ 42a3345 (evaluation_scripts/evaluation.py, the Seg-Zero-7B
single-object format; evaluation_scripts/evaluation_visionreasoner.py, the multi-object format) and
dvlab-research/VisionReasoner @ a455092 (vision_reasoner/models/vision_reasoner_model.py,
``extract_bbox_points_think``). Both models see the image resized to 840 x 840 and answer in that
image's pixels; x is scaled by W / 840 and y by H / 840 back to the frame.

- ``seg_zero``: evaluation.py's ``extract_bbox_points_think``: the first ``{...}`` without nested
  braces in the reply, as JSON; its first key containing "bbox" when its value has 4 entries, and
  its first two keys containing "points" (``points_1``, ``points_2``): one object, one box and two
  positive clicks. Each coordinate is ``round(int(v) * factor)``, applied as they apply it, so
  whatever their code reads is read (a string number "12", a boolean, a point's third value is
  ignored, a 4-character string's digits) and whatever raises there fails here. The thought is
  ``<think>([^<]+)</think>``. A reply without any of these (no JSON object, no 4-entry bbox, fewer
  than two points keys, no thought) raises in the authors' script, which scores the sample 0.
- ``visionreasoner`` (default for VisionReasoner: the script that printed its paper's ReasonSeg
  number, Seg-Zero's evaluation_visionreasoner.py): the JSON inside ``<answer>...</answer>``, each
  entry's ``bbox_2d[0..3]`` and ``point_2d[0..1]`` as ``int(v * factor + 0.5)``: numbers and
  booleans read, extra values (a 5-value box, a 3-value point) ignored, a string number raises
  (str * float), so does a missing key or a JSON object where the list belongs. Anything that
  raises is their "Reasoning error": the sample scores 0. An empty list is no object: an empty
  mask, not a failure. The thought is optional.
- ``visionreasoner_model``: VisionReasoner @ a455092's own vision_reasoner_model.py
  ``extract_bbox_points_think``: the same reading, but an error is caught and gives no object (the
  boxes already read stay, the points are dropped, so no mask), never a failure.
Every failure raises rvt_bench.adapters.vlm.reply.ReplyError (kind "parse", with its `reason`): the
harness scores it as an empty mask, which is what both scripts score (intersection 0, union the
ground truth's area). tests/test_segzero_parity.py holds the three readers to the authors' functions
over a fuzzed set of replies (tests/data/segzero/reference/run_segzero_parsers.py).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from rvt_bench.adapters.vlm.reply import ReplyError

FORMATS = ("seg_zero", "visionreasoner", "visionreasoner_model")
_FIRST_OBJECT = re.compile(r"{[^}]+}")
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)
_THINK = re.compile(r"<think>([^<]+)</think>")
# what the authors' expressions raise on a value they cannot read (their bare `except Exception`)
_UNREADABLE = (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError, RecursionError)


@dataclass
class Answer:
    """Objects in frame pixels: ``boxes[i]`` [x1, y1, x2, y2] (ints, as the authors' code makes
    them, corners as written) with positive clicks ``points[i]`` ([[x, y], ...]; empty when the
    format read boxes but no points: no mask); the thought."""

    boxes: list[list[int]] = field(default_factory=list)
    points: list[list[list[int]]] = field(default_factory=list)
    think: str = ""


def parse(text: str, answer_format: str, x_factor: float, y_factor: float) -> Answer:
    """The objects of a reply in frame pixels; x_factor = W / 840, y_factor = H / 840 (the
    resized input's side). Raises ReplyError (kind "parse", with `reason`) as the module docstring says, and
    ValueError for an unknown format."""
    if answer_format == "seg_zero":
        return _seg_zero(text, float(x_factor), float(y_factor))
    if answer_format in ("visionreasoner", "visionreasoner_model"):
        return _visionreasoner(text, float(x_factor), float(y_factor), caught=answer_format == "visionreasoner_model")
    raise ValueError(f"answer format {answer_format!r}: expected one of {FORMATS}")


def _fail(reason: str, what: str, text: str) -> ReplyError:
    return ReplyError(reason, f"{what}: {text.strip()[:160]!r}")


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
    try:
        box = data[bbox_key] if bbox_key and len(data[bbox_key]) == 4 else None
        if box is None:
            raise _fail("no_boxes", "no bbox of 4 entries in the answer", text)
        scaled_box = [round(int(box[0]) * fx), round(int(box[1]) * fy), round(int(box[2]) * fx), round(int(box[3]) * fy)]
    except _UNREADABLE as exc:
        raise _fail("no_boxes", f"the bbox is unreadable ({type(exc).__name__})", text) from None
    point_keys = [k for k in data if "points" in k.lower()][:2]
    if len(point_keys) != 2:
        raise _fail("no_points", "the answer lacks two points (points_1, points_2)", text)
    try:
        clicks = [[round(int(data[k][0]) * fx), round(int(data[k][1]) * fy)] for k in point_keys]
    except _UNREADABLE as exc:
        raise _fail("no_points", f"a point is unreadable ({type(exc).__name__})", text) from None
    think = _THINK.search(text)
    if think is None:  # the authors' script fails on the unset thought: the sample scores 0
        raise _fail("no_think", "no <think>...</think> in the reply", text)
    return Answer([scaled_box], [clicks], think.group(1))


def _visionreasoner(text: str, fx: float, fy: float, caught: bool) -> Answer:
    answer = Answer(think=(m.group(1) if (m := _THINK.search(text)) else ""))
    match = _ANSWER.search(text)
    if match is None:
        if caught:
            return answer
        raise _fail("no_answer", "no <answer>...</answer> in the reply", text)
    try:
        data = json.loads(match.group(1))
    except (ValueError, RecursionError):
        if caught:
            return answer
        raise _fail("json", "the answer is not JSON", text) from None
    try:
        answer.boxes = [[int(item["bbox_2d"][0] * fx + 0.5), int(item["bbox_2d"][1] * fy + 0.5),
                         int(item["bbox_2d"][2] * fx + 0.5), int(item["bbox_2d"][3] * fy + 0.5)] for item in data]
    except _UNREADABLE as exc:
        if caught:
            return answer
        raise _fail("no_boxes", f"an answer entry has no readable bbox_2d ({type(exc).__name__})", text) from None
    try:
        answer.points = [[[int(item["point_2d"][0] * fx + 0.5), int(item["point_2d"][1] * fy + 0.5)]] for item in data]
    except _UNREADABLE as exc:
        if caught:  # the boxes read stay, the points are []: vision_reasoner_model.generate_masks makes no mask
            return answer
        raise _fail("no_points", f"an answer entry has no readable point_2d ({type(exc).__name__})", text) from None
    return answer
