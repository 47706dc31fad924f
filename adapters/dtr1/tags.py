"""DT-R1's rollout markup: tag names, stop strings and extraction of tagged blocks.

A rollout is one assistant turn (docs/architecture.md "The DT-R1 rollout", after the DT-R1 paper, arXiv 2511.12365):
``<think>..</think> <dt_plan>DAG</dt_plan> <dt_rep>twin</dt_rep>
(<think>..</think> <execute>code</execute> <results>out</results>)* <task>..</task> <answer>..</answer>``.
The model writes think/dt_plan/execute/task/answer; the harness writes dt_rep and results.

Extraction is lenient about whitespace (around contents, inside the angle brackets, letter case of
tag names) and strict about meaning: a missing, unclosed or repeated block is a TagError,
never a guess.
"""
from __future__ import annotations

import re

from rvt_bench.core.types import ParseError

THINK, PLAN, REP, EXECUTE, RESULTS, TASK, ANSWER = "think", "dt_plan", "dt_rep", "execute", "results", "task", "answer"


def open_tag(tag: str) -> str:
    return f"<{tag}>"


def close_tag(tag: str) -> str:
    return f"</{tag}>"


# Generation pauses at these: the harness acts after a plan and after each code block.
STOP_PLAN = close_tag(PLAN)
STOP_EXECUTE = close_tag(EXECUTE)
STOP_ANSWER = close_tag(ANSWER)


class TagError(ParseError):
    """Model output that breaks the rollout markup. `reason` is one of "missing_tag",
    "unclosed_tag", "duplicate_tag", "out_of_order", "unknown_task", "json", "schema",
    "unknown_instance", "token_budget", "max_rounds", "empty_answer"."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"{reason}: {message}")
        self.reason = reason


def _open_re(tag: str) -> re.Pattern:
    return re.compile(rf"<\s*{re.escape(tag)}\s*>", re.IGNORECASE)


def _close_re(tag: str) -> re.Pattern:
    return re.compile(rf"<\s*/\s*{re.escape(tag)}\s*>", re.IGNORECASE)


def find_blocks(text: str, tag: str) -> list[str]:
    """Contents (whitespace-stripped) of every complete ``<tag>...</tag>`` block, in order.

    Raises TagError("unclosed_tag") when an opening tag has no closing tag before the next
    opening of the same tag or the end of the text, and ("unclosed_tag") for a closing tag
    without an opening one.
    """
    opens, closes = _open_re(tag), _close_re(tag)
    blocks, pos = [], 0
    while True:
        o = opens.search(text, pos)
        c = closes.search(text, pos)
        if o is None:
            if c is not None:
                raise TagError("unclosed_tag", f"{close_tag(tag)} without {open_tag(tag)}")
            return blocks
        if c is not None and c.start() < o.start():
            raise TagError("unclosed_tag", f"{close_tag(tag)} without {open_tag(tag)}")
        if c is None:
            raise TagError("unclosed_tag", f"{open_tag(tag)} is never closed")
        nxt = opens.search(text, o.end())
        if nxt is not None and nxt.start() < c.start():
            raise TagError("unclosed_tag", f"{open_tag(tag)} is opened again before {close_tag(tag)}")
        blocks.append(text[o.end(): c.start()].strip())
        pos = c.end()


def extract_one(text: str, tag: str) -> str:
    """Contents of the one ``<tag>...</tag>`` block of `text`.

    Raises TagError "missing_tag" (none), "duplicate_tag" (more than one: which one was meant
    is unknowable) or "unclosed_tag".
    """
    blocks = find_blocks(text, tag)
    if not blocks:
        raise TagError("missing_tag", f"expected one {open_tag(tag)}...{close_tag(tag)} block, found none")
    if len(blocks) > 1:
        raise TagError("duplicate_tag", f"expected one {open_tag(tag)} block, found {len(blocks)}")
    return blocks[0]


def extract_optional(text: str, tag: str) -> str | None:
    """Like extract_one, but None when the block is absent."""
    blocks = find_blocks(text, tag)
    if len(blocks) > 1:
        raise TagError("duplicate_tag", f"expected at most one {open_tag(tag)} block, found {len(blocks)}")
    return blocks[0] if blocks else None


def extract_open_block(segment: str, tag: str) -> str:
    """Contents of the block a generation stopped inside: the text after the last ``<tag>`` of
    `segment` (generation stops at ``</tag>``, which the policy does not return).

    Raises TagError("missing_tag") when `segment` has no ``<tag>``.
    """
    starts = list(_open_re(tag).finditer(segment))
    if not starts:
        raise TagError("missing_tag", f"generation stopped at {close_tag(tag)} but wrote no {open_tag(tag)}")
    return segment[starts[-1].end():].strip()


def has_open(text: str, tag: str) -> bool:
    return _open_re(tag).search(text) is not None


def has_close(text: str, tag: str) -> bool:
    return _close_re(tag).search(text) is not None


def wrap(tag: str, content: str) -> str:
    """``<tag>content</tag>``, as the harness inserts dt_rep and results."""
    return f"{open_tag(tag)}{content}{close_tag(tag)}"
