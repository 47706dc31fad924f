"""Text no codec accepts: a str holding a lone surrogate (U+D800-U+DFFF), which JSON's "\\ud800"
escape, `surrogateescape` decoding or a server's reply can put into Python text, and which UTF-8,
Java and every tokenizer refuse (pycocoevalcap's PTBTokenizer raised UnicodeEncodeError: a
traceback, exit 1, and the same crash on every resume; issue 34).

Such text is found before it is used: in a model's answer it is the model's parse failure, scored
the way the reference scores a malformed answer (as the empty answer); in a sample's query or
reference it is that sample's data error (rvt_bench.harness.score); the caption metrics refuse it
outright (rvt_bench.metrics.text). Invalid UTF-8 bytes never become text here: every reader
decodes strictly (rvt_bench.core.files), and control characters are valid text, escaped only for
the console (rvt_bench.core.printable).
"""
from __future__ import annotations


def unencodable_at(text: str) -> int | None:
    """The index of the first character of `text` that UTF-8 cannot encode (a lone surrogate), or
    None when every character encodes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def unencodable_reason(what: str, text: str | None) -> str | None:
    """"<what> holds text no codec accepts (U+D800 at character 7)", or None when `text` (None
    included) is encodable."""
    at = None if not isinstance(text, str) else unencodable_at(text)
    if at is None:
        return None
    return f"{what} holds text no codec accepts (U+{ord(text[at]):04X}, a lone surrogate, at character {at})"


def encodable(text: str) -> str:
    """`text` with every character UTF-8 cannot encode written as its escape (\\ud800): for messages
    and files that quote such text."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
