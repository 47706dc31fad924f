"""From a VLM's raw reply to its answer: the reasoning part is set aside, the answer extracted.

Reasoning models (Video-R1, Seg-Zero, VisionReasoner, R1-style fine-tunes) write
``<think>...</think>`` and then the answer, often inside ``<answer>...</answer>``. The answer is the
text after the last ``</think>`` (the whole reply when there is no think block), and within it the
contents of ``<answer>`` when present. A reply that opened ``<think>`` and never closed it (the
generation budget ran out while the model was thinking) has no answer: that is a ReplyError with
reason "think_unclosed", not an empty answer; likewise an ``<answer>`` cut off by the budget
("answer_unclosed").
"""
from __future__ import annotations

from dataclasses import dataclass

from rvt_bench.core.types import ParseError

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"


class ReplyError(ParseError):
    """A reply without a usable answer. ``reason``: "think_unclosed", "answer_unclosed",
    "empty_answer", "no_boxes", "json", "unknown_frame"."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"vlm reply ({reason}): {message}")
        self.reason = reason


@dataclass
class Reply:
    """One generation. text: the decoded reply (special tokens removed). finish_reason: "stop" (the
    model ended its turn) or "length" (max tokens reached). n_tokens: tokens generated.
    input_sizes: (h, w) of each image as the model received it, when the backend knows (hf reads
    Qwen's image_grid_thw); None = as sent. prompt_tokens: the tokens the server counted in the
    request (``usage.prompt_tokens``), None where it reports none."""

    text: str
    finish_reason: str
    n_tokens: int
    input_sizes: list[tuple[int, int]] | None = None
    prompt_tokens: int | None = None


@dataclass
class Parts:
    """thought: contents of the think block (None without one); answer: the extracted answer."""

    thought: str | None
    answer: str


def split_reply(text: str, finish_reason: str = "stop") -> Parts:
    """Split a reply into thought and answer (see module docstring).

    Raises ReplyError("think_unclosed") when <think> is opened and not closed, ("answer_unclosed")
    when <answer> is opened and not closed and the reply was cut (finish_reason "length"), and
    ("empty_answer") when nothing is left.
    """
    thought = None
    rest = text
    if THINK_CLOSE in text:
        head, _, rest = text.rpartition(THINK_CLOSE)
        thought = head.split(THINK_OPEN, 1)[-1].strip()
    elif THINK_OPEN in text:
        cut = "the generation budget ran out" if finish_reason == "length" else "the model ended its turn"
        raise ReplyError("think_unclosed", f"{cut} inside <think> before </think> ({len(text)} characters of thought)")
    if ANSWER_OPEN in rest:
        body = rest.split(ANSWER_OPEN, 1)[1]
        if ANSWER_CLOSE in body:
            body = body.split(ANSWER_CLOSE, 1)[0]
        elif finish_reason == "length":
            raise ReplyError("answer_unclosed", "the generation budget ran out inside <answer> before </answer>")
        rest = body
    answer = rest.strip()
    if not answer:
        raise ReplyError("empty_answer", "the reply has no answer text" + (" after </think>" if thought is not None else ""))
    return Parts(thought, answer)


NO_TARGET_ANSWERS = ("none", "no target", "no object", "no such object", "nothing")
"""Whole answers (case, surrounding space and a final period aside) that say the query names no
object; the prompts ask for ``[]``, which rvt_bench.adapters.vlm.coords.parse_detections reads as
no detection."""


def says_no_target(answer: str) -> bool:
    """True when the whole answer is one of NO_TARGET_ANSWERS."""
    return answer.strip().rstrip(".").strip().lower() in NO_TARGET_ANSWERS
