"""Checked reading: the one layer through which the harness opens a file it did not just write
(annotations, meta files, masks, frames, predictions, its own run files).

Every read here is bounded, whatever is on disk:
- regular files only: a FIFO, a device (a symlink to /dev/zero), a directory or a socket is refused
  before a byte is read (opened non-blocking, checked with fstat), so nothing hangs or reads forever;
- bounded size (``ReadLimits.max_file_mb``; a JSONL file is read line by line, each line at most
  ``max_line_mb``);
- JSON through the standard library's parser and its own limits: nesting deeper than
  ``max_json_depth`` (json's RecursionError for the very deep, one pass over the levels for the
  rest), an integer literal over Python's limit (4300 digits, sys.get_int_max_str_digits: its
  ValueError), and a key repeated in one object (``object_pairs_hook``) are refused;
- a relative name from data must stay inside its declared root (`inside`);
- an image is decoded only after its header's width x height passed ``max_image_pixels``
  (`read_image`, `check_image_pixels`; frames: rvt_bench.core.frames, mask PNGs: rvt_bench.core.png).
A violation raises ``FileLimitError`` (a DatasetFormatError) naming the file and what was wrong;
the caller decides whether it is one sample's data error or the whole dataset's.

The limits in force are the dataset config's (``dataset.limits``, set by the harness for a run
with `limits_in_force`), else ``ReadLimits()``'s defaults.
"""
from __future__ import annotations

import json
import os
import re
import stat
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from rvt_bench.core.types import DatasetFormatError

UTF8_BOM = b"\xef\xbb\xbf"
_MB = 1 << 20
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ReadLimits:
    """What one file or sample may cost to read (``dataset.limits`` in the dataset config; none of
    them changes the numbers of a run whose data is within them).

    max_file_mb:        a file read whole (JSON annotation, meta, mask_dict.json, a mask PNG, a frame).
    max_line_mb:        one line of a JSONL file (canonical records, predictions).
    max_json_depth:     nesting of arrays and objects in one JSON document (the formats read need < 10).
    max_image_pixels:   width x height of one frame or mask image, read from its header before any
                        decode (2**26 = an 8192 x 8192 image).
    max_polygon_points: points of all polygons of one annotation file (hand-drawn LabelMe shapes have
                        tens to hundreds; filling costs up to points x rows), or of one COCO
                        annotation (RefCOCO).
    max_sample_pixels:  width x height summed over the frames of one sample (a frame listed twice
                        counts twice: the model reads it twice), checked from the headers before the
                        model sees the sample (2**32: 2,000 frames of 1080p; raise it for longer videos).
    """

    max_file_mb: float = 4096.0
    max_line_mb: float = 64.0
    max_json_depth: int = 64
    max_image_pixels: int = 1 << 26
    max_polygon_points: int = 10_000
    max_sample_pixels: int = 1 << 32

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"dataset.limits.{name} must be a positive number, got {value!r}")


_limits = ReadLimits()


def limits() -> ReadLimits:
    """The limits in force (the run's dataset.limits, else the defaults)."""
    return _limits


@contextmanager
def limits_in_force(value: ReadLimits) -> Iterator[None]:
    """Make `value` the limits of every read in this process while the block runs (a run's
    dataset.limits); the previous ones come back after it."""
    global _limits
    saved, _limits = _limits, value
    try:
        yield
    finally:
        _limits = saved


class FileLimitError(DatasetFormatError):
    """A file that is not a regular file, or breaks a ReadLimits bound; the message names it."""


# --- opening ----------------------------------------------------------------------------------------


def open_regular(path: str | Path, what: str = "file") -> tuple[int, int]:
    """(file descriptor, size in bytes) of `path` opened for reading, after checking that it is a
    regular file (symlinks followed). Opening is non-blocking, so a FIFO without a writer does not
    hang. Raises FileNotFoundError when it does not exist, FileLimitError when it is not a regular
    file, OSError for other failures. The caller closes the descriptor."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileLimitError(f"{what} {path} is not a regular file ({_kind(st.st_mode)}); refused")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def open_binary(path: str | Path, what: str = "file") -> BinaryIO:
    """A binary file object of the regular file `path` (`open_regular`'s checks: a FIFO or a device
    is refused, nothing hangs), for a library that reads the file itself within its own bounds
    (pyarrow reads a parquet footer, zipfile a central directory). The caller closes it. Raises as
    `open_regular`."""
    fd, _ = open_regular(path, what)
    return os.fdopen(fd, "rb")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def read_bytes(path: str | Path, what: str = "file", max_mb: float | None = None) -> bytes:
    """The whole content of the regular file `path`, at most `max_mb` (default
    ReadLimits.max_file_mb) megabytes. Raises FileLimitError (not a regular file, too large: the
    size is checked before reading and again while reading, for a file that grows),
    FileNotFoundError, OSError."""
    limit = int((max_mb if max_mb is not None else _limits.max_file_mb) * _MB)
    fd, size = open_regular(path, what)
    with os.fdopen(fd, "rb", buffering=0) as fh:
        if size > limit:
            raise FileLimitError(f"{what} {path} is {size / _MB:.1f} MB, over the {limit / _MB:g} MB limit "
                                 f"(dataset.limits.max_file_mb)")
        parts, total, want = [], 0, size + 1  # the size fstat gave, then bounded pieces if it grows
        while chunk := fh.read(min(want, limit + 1 - total)):
            parts.append(chunk)
            total += len(chunk)
            if total > limit:
                raise FileLimitError(f"{what} {path} grew past the {limit / _MB:g} MB limit while read "
                                     f"(dataset.limits.max_file_mb)")
            want = _CHUNK
    return parts[0] if len(parts) == 1 else b"".join(parts)


TEXT_MB = 64.0
"""The size cap of a text file the harness reads whole outside a dataset (a turns file, a cache
entry, a run's own files, a paper CSV, a tokenizer or config): 64 MB, past any of them."""


def read_text(path: str | Path, what: str = "file", max_mb: float = TEXT_MB) -> str:
    """The content of the regular file `path` as UTF-8 text (a UTF-8 BOM kept, as Path.read_text
    keeps it), at most `max_mb` megabytes. Raises as `read_bytes` (FileLimitError for a FIFO, a
    device, a directory or an oversize file; FileNotFoundError; OSError), and DatasetFormatError
    naming the file when it is not UTF-8."""
    raw = read_bytes(path, what, max_mb)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetFormatError(f"{what} {path} is not UTF-8 text: {exc}") from None


def read_data(path: str | Path, what: str = "file") -> bytes:
    """`read_bytes`, with every failure to read raised as DatasetFormatError naming the file (for
    loaders: a missing or unreadable file is bad data)."""
    try:
        return read_bytes(path, what)
    except FileNotFoundError as exc:
        raise DatasetFormatError(f"{what} {path} does not exist") from exc
    except OSError as exc:
        raise DatasetFormatError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc


def lines(path: str | Path, what: str = "file") -> Iterator[tuple[int, bytes | None]]:
    """(1-based line number, line) of the regular file `path`, one line at a time; a line keeps its
    b"\\n" (the last one lacks it when the file does not end with a newline: a torn write). A line
    longer than ReadLimits.max_line_mb is yielded as (number, None), skipped unread in bounded
    pieces. Raises as `open_regular`."""
    limit = int(_limits.max_line_mb * _MB)
    fd, _ = open_regular(path, what)
    with os.fdopen(fd, "rb") as fh:
        number = 0
        while True:
            line = fh.readline(limit + 1)
            if not line:
                return
            number += 1
            if len(line) > limit and not line.endswith(b"\n"):
                while line and not line.endswith(b"\n"):
                    line = fh.readline(_CHUNK)
                yield number, None
                continue
            yield number, line


def inside(root: str | Path, name: str, what: str = "name") -> Path:
    """``root / name`` for a relative `name` taken from data, refused (FileLimitError) when it is
    absolute, empty, holds a NUL, or climbs out of `root` with ``..``. The check is on the name
    (``os.path.normpath``), not on resolved symlinks: a dataset may link its folders elsewhere."""
    text = str(name)
    if not text or "\x00" in text or os.path.isabs(text):
        raise FileLimitError(f"{what} {text!r} must be a relative path inside {root}")
    norm = os.path.normpath(text)
    if norm == ".." or norm.startswith(".." + os.sep) or norm == ".":
        raise FileLimitError(f"{what} {text!r} leaves {root} (a '..' path); refused")
    return Path(root) / text


# --- JSON -------------------------------------------------------------------------------------------


class _Duplicate(ValueError):
    pass


class Repeated(dict):
    """A JSON object in which a key appeared more than once (``loads(..., duplicates="mark")``): it
    holds each key's last value, as ``json`` does, and the values that were dropped in
    ``dropped`` [(key, earlier value), ...], so that a loader can fail what was lost."""

    dropped: list[tuple[str, Any]]


def _refuse_repeats(pairs: list[tuple[str, Any]]) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Duplicate()
    return out


def _mark_repeats(pairs: list[tuple[str, Any]]) -> dict:
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    marked, seen = Repeated(out), {}
    marked.dropped = []
    for key, value in pairs:
        if key in seen:
            marked.dropped.append((key, seen[key]))
        seen[key] = value
    return marked


def repeated_keys(value: Any) -> list[str]:
    """The keys repeated in one JSON object read with duplicates="mark" ([] for any other value)."""
    return [k for k, _ in value.dropped] if isinstance(value, Repeated) else []


def _first_repeat(value: Any) -> tuple[str, str] | None:
    """(path of the object, repeated key) of the first Repeated object in a marked document."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, Repeated):
            return path, node.dropped[0][0]
        if isinstance(node, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in reversed(node.items()) if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(node))) if isinstance(v, (dict, list)))
    return None


def depth_over(value: Any, limit: int) -> bool:
    """Whether a JSON value nests arrays and objects more than `limit` levels deep (a scalar is 0,
    [] or {} is 1): level by level, stopping at limit + 1, so a document costs one pass at most."""
    nodes, level = [value], 0
    while nodes:
        level += 1
        if level > limit:
            return True
        nodes = [c for n in nodes for c in (n.values() if isinstance(n, dict) else n) if type(c) in _CONTAINERS]
    return False


_CONTAINERS = {dict, list, Repeated}


def loads(text: str | bytes, where: str, duplicates: str = "error") -> Any:
    """Parse one JSON document with the limits in force; `where` names it in errors ("<file>",
    "<file> line 3").

    duplicates: what a key repeated in one object does: "error" refuses the document (the message
    names the object's path and the key), "mark" keeps the last value in a `Repeated` object that
    lists the dropped ones (the caller fails what was lost), "last" keeps the last value silently
    (files the harness itself wrote). Raises FileLimitError for a limit (nesting, integer size, a
    repeated key) and DatasetFormatError when it is not JSON at all."""
    lim = _limits
    hook = {"error": _refuse_repeats, "mark": _mark_repeats, "last": None}[duplicates]
    try:
        value = json.loads(text, object_pairs_hook=hook)
    except RecursionError:
        raise FileLimitError(f"{where}: JSON nested deeper than Python's parser allows "
                             f"(at most {lim.max_json_depth} levels, dataset.limits.max_json_depth)") from None
    except _Duplicate:
        path, key = _first_repeat(json.loads(text, object_pairs_hook=_mark_repeats)) or ("", "?")
        raise FileLimitError(f"{where}: key {key!r} appears twice in {path or 'the top-level object'} (a JSON reader "
                             f"would silently keep only the last)") from None
    except json.JSONDecodeError as exc:
        raise DatasetFormatError(f"{where} is not valid JSON: {exc}") from None
    except ValueError as exc:  # Python's own limit on integer literals (sys.get_int_max_str_digits)
        if "integer string conversion" not in str(exc):
            raise
        digits = re.search(r"has (\d+) digits", str(exc))
        raise FileLimitError(f"{where}: an integer of {digits.group(1) if digits else 'too many'} digits (Python reads "
                             f"at most {sys.get_int_max_str_digits()})") from None
    if isinstance(value, (dict, list)) and depth_over(value, lim.max_json_depth):
        raise FileLimitError(f"{where}: JSON nested more than {lim.max_json_depth} levels deep "
                             f"(dataset.limits.max_json_depth)")
    return value


def read_json(path: str | Path, encodings: tuple[str, ...] = ("utf-8",), what: str = "file",
              duplicates: str = "error") -> Any:
    """Parse the JSON file `path` (a UTF-8 BOM skipped), trying `encodings` in order, with every
    check of the module docstring (`duplicates` as in `loads`). Raises DatasetFormatError
    (FileLimitError for a limit) naming the file when it is missing, not a regular file, too large,
    undecodable, not JSON, or breaks a limit."""
    raw = read_data(path, what)
    if raw.startswith(UTF8_BOM):  # written by some Windows editors; json.loads refuses it
        raw = raw[len(UTF8_BOM):]
    last: Exception | None = None
    for encoding in encodings:
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError as exc:
            last = exc
            continue
        return loads(text, str(path), duplicates)
    raise DatasetFormatError(f"{path} is not text in any of {list(encodings)}: {last}")


# --- images -----------------------------------------------------------------------------------------

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def image_size(buf: bytes) -> tuple[int, int] | None:
    """(width, height) an image file's bytes declare in their header, without decoding a pixel:
    PNG's IHDR read directly, other formats (JPEG, BMP, TIFF...) through PIL's header parser.
    None when the header cannot be read (the decoder then reports the file as unreadable)."""
    if buf[:8] == _PNG_SIGNATURE and buf[12:16] == b"IHDR" and len(buf) >= 24:
        return int.from_bytes(buf[16:20], "big"), int.from_bytes(buf[20:24], "big")
    import io
    import warnings

    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(buf)) as im:
                return im.size
    except Exception:  # noqa: BLE001 - PIL raises many types for a file that is not an image
        return None


def check_image_pixels(buf: bytes, path: str | Path, what: str = "image") -> None:
    """Raise FileLimitError when the image in `buf` declares more than ReadLimits.max_image_pixels
    pixels (checked from the header, before any decode)."""
    size = image_size(buf)
    limit = _limits.max_image_pixels
    if size is not None and size[0] * size[1] > limit:
        raise FileLimitError(f"{what} {path} is {size[0]} x {size[1]} = {size[0] * size[1]:,} pixels, which exceeds the "
                             f"limit of {limit:,} (dataset.limits.max_image_pixels); not decoded")


def read_image(path: str | Path, what: str = "image", mode: str | None = None):
    """The pixels of the image file `path` as PIL gives them, ``np.asarray(Image.open(path))`` (after
    ``.convert(mode)`` when `mode` is given: "P", "L"...), as a numpy array: (H, W) for palette and
    gray images (palette indices, gray values), (H, W, C) otherwise.

    Read through `read_data` (a regular file, at most max_file_mb) and checked from its header
    against ReadLimits.max_image_pixels before any decode (PIL's own decompression-bomb limit
    still refuses more than 2 x Image.MAX_IMAGE_PIXELS). Raises DatasetFormatError naming the file
    (FileLimitError for a limit) when it is missing, not a regular file, too large, over the pixel
    limit, or not a decodable image."""
    import io
    import warnings

    import numpy as np
    from PIL import Image

    buf = read_data(path, what)
    check_image_pixels(buf, path, what)
    limit = _limits.max_image_pixels
    try:
        with warnings.catch_warnings():  # PIL warns from 89M pixels on; max_image_pixels decides
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(buf)) as img:
                width, height = img.size
                if width * height > limit:  # a header image_size could not read, PIL's parser did
                    raise FileLimitError(f"{what} {path} is {width} x {height} = {width * height:,} pixels, which exceeds "
                                         f"the limit of {limit:,} (dataset.limits.max_image_pixels); not decoded")
                return np.asarray(img.convert(mode) if mode is not None else img)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise DatasetFormatError(f"{what} {path} is not a readable image: {exc}") from None
