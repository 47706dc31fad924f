"""The harness's side of the pipe protocol (adapters/sandbox/child.py): frames out, and replies in,
decoded under bounds the sandbox cannot move. A reply is whatever bytes the code managed to put on
the pipe, so nothing in it is trusted: its size, its nesting and its shape are checked before it is
a result."""
from __future__ import annotations

import json
import re
import struct
from typing import Any

from rvt_bench.adapters.sandbox.settings import TRUNCATION_MARK

HEADER = struct.Struct(">I")
MAX_DEPTH = 4  # a legal message nests one level ({"ok": ..., "output": ..., "error": ...})
# JSON strings (skipped whole: brackets inside them do not nest) and brackets.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
# The most bytes one character takes in the child's JSON (ensure_ascii): a character beyond the BMP
# is two \uXXXX escapes.
_WIDEST = "\U0010ffff"


def frame(msg: dict) -> bytes:
    """One message as the child reads it: a 4-byte big-endian length and that many bytes of JSON."""
    data = json.dumps(msg).encode()
    return HEADER.pack(len(data)) + data


def max_reply_bytes(max_output_chars: int) -> int:
    """The largest reply a legal run can send, measured on its encoded bytes: output and error
    line of max_output_chars + 1 characters each (the child keeps one beyond the limit so the
    harness can mark a truncation), every one of them the widest a JSON escape makes it."""
    widest = _WIDEST * (max_output_chars + 1)
    return len(json.dumps({"ok": False, "output": widest, "error": widest, "end": ["signal", 2**31]}).encode())


def decode(body: bytes) -> Any:
    """The JSON value of a reply's body, or None when it is not UTF-8 JSON or nests deeper than
    MAX_DEPTH (checked before parsing: a reply of 30,000 '[' would take the parser's recursion
    limit down with it)."""
    depth = 0
    for token in _TOKENS.finditer(body):
        t = token.group()
        if t in (b"[", b"{"):
            depth += 1
            if depth > MAX_DEPTH:
                return None
        elif t in (b"]", b"}"):
            depth -= 1
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def valid_reply(msg: Any) -> tuple[bool, str, str | None, tuple[str, int] | None] | None:
    """(ok, output, error, end) of a run's reply, None when it does not have exactly that shape.
    end: None, or ("signal", n) / ("exit", status) when the round's worker did not finish."""
    if not isinstance(msg, dict) or set(msg) != {"ok", "output", "error", "end"} or not isinstance(msg["ok"], bool):
        return None
    end = msg["end"]
    if end is not None:
        if not (isinstance(end, list) and len(end) == 2 and end[0] in ("signal", "exit") and type(end[1]) is int):
            return None
        return False, "", None, (end[0], end[1])
    if not isinstance(msg["output"], str) or not (msg["error"] is None or isinstance(msg["error"], str)):
        return None
    if not msg["ok"] and msg["error"] is None:
        return None
    return msg["ok"], msg["output"], msg["error"], None


def truncate(text: str, max_chars: int) -> str:
    """At most max_chars characters of the code's text, and text that UTF-8 can carry: a lone
    surrogate (print("\\ud800"), which JSON transports) becomes "?" here rather than failing the
    write of the sample's record later."""
    if text:
        text = text.encode("utf-8", "replace").decode("utf-8")
    if not text or len(text) <= max_chars:
        return text
    keep = max(max_chars - len(TRUNCATION_MARK), 0)
    return text[:keep] + TRUNCATION_MARK
