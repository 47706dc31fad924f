"""Text from data (file names, sample ids, JSON keys) as it may reach a terminal or a log file: its
control characters escaped, so a name holding a newline cannot forge a log line and one holding an
ANSI escape cannot rewrite the console. JSON files and report.html escape by their own rules.
"""
from __future__ import annotations

import logging
import os
import re
from typing import Any

# Unicode's format characters (category Cf, Unicode 14): invisible, they hide or reorder what a terminal
# or a page shows: the bidirectional marks, embeddings, overrides and isolates ("Trojan Source":
# U+061C, U+200E/F, U+202A-U+202E, U+2066-U+2069), zero-width spaces and joiners (U+200B-U+200D),
# the byte-order mark U+FEFF, soft hyphen, tag characters. tests/test_printable.py checks this list
# against the running Python's unicodedata.
_FORMAT = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
           "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438"
           "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")
# a lone surrogate (text decoded with surrogateescape, a JSON "\udcff"): no codec writes it, and a
# font renderer (matplotlib) raises on it
_SURROGATE = "\ud800-\udfff"
# C0 controls, DEL, C1 controls, the line / paragraph separators, format characters, lone surrogates
_CONTROL = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029{_FORMAT}{_SURROGATE}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000
                                else f"\\U{code:08x}")


def printable(text: Any) -> str:
    """str(text) with every control character, format character (U+200B, U+202E, U+FEFF) and lone
    surrogate written as its escape (\\n, \\x1b, \\u202e, \\udcff); other characters, non-ASCII
    letters included, unchanged."""
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
    return _TEXT_CONTROL.sub(_escape, str(text))


_TEXT_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{_FORMAT}{_SURROGATE}]")


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
