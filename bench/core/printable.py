"""Text from data (file names, sample ids, JSON keys) as it may reach a terminal or a log file: its
control characters escaped, so a name holding a newline cannot forge a log line and one holding an
ANSI escape cannot rewrite the console. JSON files and report.html escape by their own rules.
"""
from __future__ import annotations

import logging
import os
import re
from typing import Any

# C0 controls, DEL, C1 controls, the line / paragraph separators and the bidirectional overrides and
# isolates (which reorder what a terminal shows: "Trojan Source")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    char = match.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def printable(text: Any) -> str:
    """str(text) with every control character written as its escape (\\n, \\x1b, \\u202e); other
    characters, non-ASCII letters included, unchanged."""
    return _CONTROL.sub(_escape, str(text))


MAX_ECHO = 2000
"""Characters of model output (an answer, a reply, an exception quoting them) a message may echo:
an answer with 200k unknown ids was one 1.5 MB line on the console and in run.log (issue 34)."""


def bounded(text: Any, limit: int = MAX_ECHO) -> str:
    """str(text) cut at `limit` characters, with how many were cut: "... (N more characters)"."""
    text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def echo(text: Any, limit: int = MAX_ECHO) -> str:
    """`bounded`, then `printable`: model output as a console or log line may show it."""
    return printable(bounded(text, limit))


def printable_lines(text: Any) -> str:
    """`printable` line by line: the text's own line breaks kept, everything else escaped."""
    return "\n".join(printable(line) for line in str(text).split("\n"))


def printable_text(text: Any) -> str:
    """`printable` with the text's own line breaks and tabs kept: text a page shows as text (a
    model's answer, code output in a <pre>; report.html), every other control character (\x1b,
    \x00, \r, \u202e) visible as its escape. HTML's own escaping (< > &) is the page's."""
    return re.sub("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]", _escape, str(text))


_TEXT = (str, os.PathLike)  # a path argument (a run.root with a newline) is data too


class PrintableArgs(logging.Filter):
    """A handler filter that escapes the string and path arguments of every record (`log.warning("sample %s
    ...", sample_id)`: the data goes in as arguments, the format string is ours) and the lines of
    its traceback (whose messages may quote data)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and not record.exc_text:  # Formatter.format uses a record's exc_text when set
            record.exc_text = printable_lines(logging.Formatter().formatException(record.exc_info))
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(printable(a) if isinstance(a, _TEXT) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: printable(v) if isinstance(v, _TEXT) else v for k, v in record.args.items()}
        return True


PRINTABLE_ARGS = PrintableArgs()


def escape_log_args(logger: logging.Logger | None = None) -> None:
    """Add PRINTABLE_ARGS to every handler of `logger` (the root logger by default) that lacks it."""
    for handler in (logger or logging.getLogger()).handlers:
        if PRINTABLE_ARGS not in handler.filters:
            handler.addFilter(PRINTABLE_ARGS)
