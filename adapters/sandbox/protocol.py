"""The harness's side of the pipe protocol (adapters/sandbox/child.py): frames out, and replies in,
decoded under bounds the sandbox cannot move. A reply is whatever bytes the code managed to put on
the pipe, so nothing in it is trusted: its size, its brackets and its shape are checked before it is
a result."""
from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from rvt_bench.adapters.sandbox.settings import TRUNCATION_MARK

HEADER = struct.Struct(">I")
# A legal message holds at most two brackets outside its strings ({"ok": ..., "end": ["signal", n]}):
# more is not the protocol, whatever its nesting (a bound the parser's recursion never reaches).
MAX_BRACKETS = 4
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
    """The JSON value of a reply's body, or None when it is not UTF-8 JSON or holds more than
    MAX_BRACKETS opening brackets outside its strings (checked before parsing: a reply of 30,000 '['
    would take the parser's recursion limit down with it). Linear in len(body): bytes methods and
    NumPy passes, then json.loads (a scan that skipped strings with a backtracking regex was
    quadratic: b'"' + b'\\\\"' * 24000 took 18 s). perf/decode_reply.py times the worst bodies."""
    if body.count(b"[") + body.count(b"{") > MAX_BRACKETS and _brackets_outside_strings(body) > MAX_BRACKETS:
        return None
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def _brackets_outside_strings(body: bytes) -> int:
    """How many '[' and '{' of `body` lie outside JSON strings."""
    # Escapes out first (pairs of backslashes, then backslash-quote), so every remaining '"' opens or
    # closes a string: a byte after an odd number of them is inside one.
    plain = np.frombuffer(body.replace(b"\\\\", b"").replace(b'\\"', b""), dtype=np.uint8)
    inside = np.cumsum(plain == ord('"'), dtype=np.int64) & 1
    return int(np.count_nonzero(((plain == ord("[")) | (plain == ord("{"))) & (inside == 0)))


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
