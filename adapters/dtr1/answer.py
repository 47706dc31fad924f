"""Turn DT-R1's final ``<task>`` and ``<answer>`` into prediction fields.

Answer formats (docs/architecture.md "The DT-R1 rollout"):
- segmentation: ``{"instances": [ids]}`` with ids from the twin; the mask of each frame is the
  union of those instances' masks in that frame (twin.masks_for). ``[]`` means "nothing matches".
- grounding: ``{"boxes": {"<frame index>": [[x1, y1, x2, y2], ...], ...}}``, boxes normalized
  xyxy in [0, 1] (x by width, y by height), frame index 0-based as in the twin's frames; frames not
  listed have no box. Returned per frame in pixels (continuous coordinates, x * W, y * H).
- vqa, summarization: the answer text (whitespace-stripped, non-empty).
JSON may be wrapped in one Markdown code fence. Anything else is a TagError.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from rvt_bench.adapters.dtr1.tags import TagError
from rvt_bench.core.types import RLE, TASKS

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```$", re.DOTALL)


class TwinView(Protocol):
    """What answer parsing needs from rvt_bench.adapters.twin.schema.Twin."""

    size: Any  # [H, W] pixels
    num_frames: int

    def instance_ids(self) -> list[int]: ...

    def masks_for(self, ids: list[int]) -> list[RLE | None]: ...


@dataclass
class Answer:
    """Parsed answer: exactly one of masks (per frame RLE or None), boxes (per frame list of
    [x1, y1, x2, y2] pixel boxes) or text is set, according to `task`."""

    task: str
    masks: list[RLE | None] | None = None
    boxes: list[list[list[float]]] | None = None
    text: str | None = None


def parse_task(text: str | None) -> str | None:
    """The declared task name (case and whitespace insensitive), None when undeclared.
    Raises TagError("unknown_task") for a name outside rvt_bench.core.types.TASKS."""
    if text is None:
        return None
    task = text.strip().lower()
    if task not in TASKS:
        raise TagError("unknown_task", f"<task> must be one of {list(TASKS)}, got {text.strip()[:60]!r}")
    return task


def answered_task(declared: str | None, sample_task: str, task_hint: bool) -> str:
    """The task an answer is read as: the one the policy declared (parse_task's result); an
    undeclared task is `sample_task` under task_hint, else TagError("missing_tag"): under the
    paper's protocol only the policy knows which task it answered."""
    if declared is not None:
        return declared
    if task_hint:
        return sample_task
    raise TagError("missing_tag", "no <task> block: the policy must declare the task it answers "
                                  "(segmentation, grounding, vqa or summarization)")


def parse_answer(task: str, text: str, twin: TwinView) -> Answer:
    """Parse the contents of ``<answer>`` for `task` against `twin` (see module docstring).
    Raises TagError with reason "json", "schema", "unknown_instance" or "empty_answer"."""
    if task == "segmentation":
        return Answer(task, masks=_segmentation(text, twin))
    if task == "grounding":
        return Answer(task, boxes=_grounding(text, twin))
    answer = text.strip()
    if not answer:
        raise TagError("empty_answer", f"{task} answer is empty")
    return Answer(task, text=answer)


def _json_object(text: str, key: str, example: str) -> Any:
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as exc:
        raise TagError("json", f"answer is not JSON ({exc.msg} at char {exc.pos}); expected {example}, got {body[:120]!r}") from exc
    except (ValueError, RecursionError) as exc:  # an integer past Python's digit limit, nesting past its stack
        raise TagError("json", f"answer is JSON Python cannot read ({type(exc).__name__}); expected {example}, "
                               f"got {body[:120]!r}") from None
    if not isinstance(obj, dict) or set(obj) != {key}:
        raise TagError("schema", f"expected {example}, got {body[:120]!r}")
    return obj[key]


def _segmentation(text: str, twin: TwinView) -> list[RLE | None]:
    ids = _json_object(text, "instances", '{"instances": [ids]}')
    # bool is an int subclass in Python; true/false are not instance ids.
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise TagError("schema", f'"instances" must be a list of integer ids, got {ids!r}')
    known = set(twin.instance_ids())
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise TagError("unknown_instance", f"ids {unknown} are not in the twin (ids: {sorted(known)})")
    if not ids:
        return [None] * twin.num_frames
    return twin.masks_for(list(dict.fromkeys(ids)))


def _grounding(text: str, twin: TwinView) -> list[list[list[float]]]:
    per_frame = _json_object(text, "boxes", '{"boxes": {"<frame index>": [[x1, y1, x2, y2], ...]}}')
    if not isinstance(per_frame, dict):
        raise TagError("schema", f'"boxes" must map frame indices to box lists, got {per_frame!r}'[:200])
    height, width = (float(v) for v in twin.size)
    out: list[list[list[float]]] = [[] for _ in range(twin.num_frames)]
    for key, boxes in per_frame.items():
        # ASCII digits only ("²".isdigit() is True), and short: int() of 5000 digits raises
        if not (str(key).isascii() and str(key).isdigit() and len(str(key)) <= 9) or int(key) >= twin.num_frames:
            raise TagError("schema", f"frame index {str(key)[:20]!r} is not in 0..{twin.num_frames - 1}")
        if not isinstance(boxes, list):
            raise TagError("schema", f"boxes of frame {key} must be a list of [x1, y1, x2, y2]")
        for box in boxes:
            if (
                not isinstance(box, list) or len(box) != 4
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in box)
            ):
                raise TagError("schema", f"box {box!r} of frame {key} is not [x1, y1, x2, y2]")
            try:
                x1, y1, x2, y2 = (float(v) for v in box)
            except OverflowError:  # an integer too large for a float
                raise TagError("schema", f"box of frame {key} has a coordinate too large for a float") from None
            if not (0.0 <= x1 <= x2 <= 1.0 and 0.0 <= y1 <= y2 <= 1.0):
                raise TagError("schema", f"box {box!r} of frame {key} is not normalized xyxy in [0, 1]")
            out[int(key)].append([x1 * width, y1 * height, x2 * width, y2 * height])
    return out
