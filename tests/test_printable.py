"""rvt_bench.core.printable: what data may show on a terminal or a page."""
from __future__ import annotations

import sys
import unicodedata

import pytest

from rvt_bench.core.printable import printable, printable_lines, printable_text

INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
             "\u2066", "\u2067", "\u2068", "\u2069", "\u061c", "\ufeff", "\u2060", "\U000e0041"]


@pytest.mark.parametrize("escape", [printable, printable_text, printable_lines])
@pytest.mark.parametrize("char", INVISIBLE)
def test_invisible_direction_and_format_characters_are_escaped(escape, char):
    """U+200B..U+200F, U+202A..U+202E, U+2066..U+2069, U+061C, U+FEFF (category Cf) reorder or hide
    what a terminal or a page shows; they were passed through (only U+202A-E and U+2066-9 escaped)."""
    shown = escape(f"a{char}b")
    assert char not in shown and shown == "a" + (f"\\u{ord(char):04x}" if ord(char) < 0x10000 else f"\\U{ord(char):08x}") + "b"


def test_every_format_character_of_this_python_s_unicode_is_escaped():
    """The escaped set is Unicode's category Cf as this Python knows it (a newer Unicode adding one fails here)."""
    missed = [hex(c) for c in range(sys.maxunicode + 1)
              if unicodedata.category(chr(c)) == "Cf" and printable(chr(c)) == chr(c)]
    assert missed == []


def test_a_lone_surrogate_is_escaped_and_the_result_encodes():
    shown = printable_text("bad\udcffname")
    assert shown == "bad\\udcffname" and shown.encode("utf-8")


def test_ordinary_text_is_kept():
    text = "Zürich 中文 العربية עברית emoji 😀 naïve – “quoted” ½"
    assert printable(text) == text and printable_text(text) == text
    assert printable_text("line\n\tnext") == "line\n\tnext" and printable("line\n") == "line\\n"
