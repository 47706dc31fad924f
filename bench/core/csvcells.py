"""CSV cells a spreadsheet shows as text: the guard against CSV (formula) injection for every CSV the
harness writes (leaderboard CSVs, report_images/samples.csv).

A spreadsheet evaluates a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula, and
some with a leading tab or carriage return too; a run name, model name or sample id is taken from
data or a command line, so ``=HYPERLINK(...)`` in one would run in the reader's spreadsheet. OWASP's
convention (https://owasp.org/www-community/attacks/CSV_Injection) is used: such a text cell is
written with a leading single quote, which spreadsheets show as text and do not display.

- numbers are never changed: a float or int cell (``-0.5``) is written as the number, and so is a
  text cell that is a plain decimal number (``"-0.5"``, ``"+3"``, ``"1e-3"``): a spreadsheet reads
  it as that number, never as a formula;
- a text cell that already starts with a quote gets one more, so that `unguard` gives back exactly
  what `guard` was given: reading our own CSV back round-trips every cell;
- Python's csv writer (and pandas') quotes a cell holding a carriage return only when the line
  terminator holds one: a file with such a cell has its lines end in CRLF (`line_end`, RFC 4180's
  own line end), so that cell is quoted and stays one cell; every other file keeps LF.
"""
from __future__ import annotations

import re
from typing import Any

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
QUOTE = "'"
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _formula_like(text: str) -> bool:
    return text.startswith(TRIGGERS) and _NUMBER.fullmatch(text) is None


def guard(value: Any) -> Any:
    """`value` as it is written to a CSV cell: a str that a spreadsheet would evaluate (module
    docstring) or that starts with a quote, with one quote in front; anything else unchanged."""
    if isinstance(value, str) and (_formula_like(value) or value.startswith(QUOTE)):
        return QUOTE + value
    return value


def unguard(value: Any) -> Any:
    """The inverse of `guard` for a cell read back from a CSV we wrote; anything else unchanged."""
    if isinstance(value, str) and value.startswith(QUOTE):
        rest = value[1:]
        if _formula_like(rest) or rest.startswith(QUOTE):
            return rest
    return value


def line_end(cells: Any) -> str:
    """The line terminator for a CSV of `cells` (an iterable of cell values): "\\r\\n" when a text
    cell holds a carriage return (module docstring), else "\\n"."""
    return "\r\n" if any(isinstance(cell, str) and "\r" in cell for cell in cells) else "\n"


def guard_rows(rows: list[list[Any]]) -> list[list[Any]]:
    """`guard` of every cell of `rows` (the header row included)."""
    return [[guard(cell) for cell in row] for row in rows]
