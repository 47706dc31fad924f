"""Fast exact decoding of the PNGs that mask submissions are made of: 8-bit grayscale, non-interlaced.

Why: a ReVOS-scale submission is ~10^5 such PNGs, and OpenCV's (libpng's) decoder spends ~6 ms on
each 720p mask, almost all of it in zlib's inflate of the long zero runs (and Sub unfiltering);
zlib-ng inflates the same stream ~20x faster. `decode_gray8` reads the chunks, checks every CRC,
inflates with zlib-ng (Adler-32 checked) and undoes the row filters in numpy on the rows and
columns that hold content.

It decodes only a strict, well-formed subset and returns None for anything else, so that the caller
falls back to OpenCV and gets OpenCV's result (or failure) exactly: colour, palette, 16-bit or
interlaced images, any chunk other than IHDR / IDAT / IEND and the informational tEXt, tIME,
pHYs (an eXIf chunk can rotate OpenCV's output), a bad CRC, a zlib stream that is malformed, short,
long or followed by extra data, bytes after IEND, and rows with the Average or Paeth filter (their
unfiltering is sequential per pixel; OpenCV's and Pillow's mask PNGs use None / Sub / Up).
For every file it accepts, the array equals ``cv2.imdecode(buf, cv2.IMREAD_GRAYSCALE)`` (and
IMREAD_UNCHANGED), which tests/test_png.py checks on generated and corrupted files.
"""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

import cv2
import numpy as np

try:  # zlib-ng inflates runs ~20x faster than zlib; the standard module gives the same bytes, slower
    from zlib_ng import zlib_ng as _inflate
except ImportError:  # pragma: no cover - zlib-ng is a dependency; kept working without it
    _inflate = zlib

from core.types import DatasetFormatError

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# chunks that do not change how OpenCV decodes the pixels of a grayscale PNG
_INFORMATIONAL = {b"tEXt", b"tIME", b"pHYs"}
# OpenCV's imdecode refuses images over 2**30 pixels (CV_IO_MAX_IMAGE_PIXELS) and libpng sides over
# 10**6 (PNG_USER_WIDTH_MAX); larger files go to OpenCV, which decides
_MAX_PIXELS = 1 << 30
_FILTER_NONE, _FILTER_SUB, _FILTER_UP = 0, 1, 2


def decode_gray8(buf: bytes) -> np.ndarray | None:
    """Pixels of an 8-bit grayscale, non-interlaced PNG file's bytes as an (H, W) uint8 array.

    Returns None when the file is outside the subset of the module docstring (the caller then
    decodes with OpenCV); never raises for malformed input.
    """
    found = decode_gray8_box(buf)
    if found is None:
        return None
    (height, width), box, crop = found
    img = np.zeros((height, width), dtype=np.uint8)
    if box is not None:
        img[box[0]:box[1], box[2]:box[3]] = crop
    return img


def decode_gray8_box(buf: bytes) -> tuple[tuple[int, int], tuple[int, int, int, int] | None, np.ndarray] | None:
    """`decode_gray8` as ((H, W), box, crop): box = (y0, y1, x0, x1), the half-open bounding box
    of the nonzero pixels (None when there are none), crop = the (y1 - y0, x1 - x0) uint8 pixels
    inside it (an empty array when box is None); every pixel outside the box is 0.

    A mask's pixels are mostly 0, so this never builds the full frame. Returns None as decode_gray8.
    """
    try:
        return _decode(memoryview(buf))
    except (zlib.error, _inflate.error, ValueError, struct.error, IndexError, MemoryError):
        return None


def read_gray(path: str | Path) -> tuple[tuple[int, int], tuple[int, int, int, int] | None, np.ndarray]:
    """Read a PNG as ``cv2.imread(path, cv2.IMREAD_GRAYSCALE)`` does, in the form of `decode_gray8_box`:
    ((H, W), box of the nonzero pixels or None, uint8 pixels inside the box).

    8-bit grayscale files take the fast decoder, everything else OpenCV's (colour images become
    their gray value, 16-bit ones their top 8 bits, EXIF orientation applied).
    Raises DatasetFormatError naming the path when the file cannot be read or decoded.
    """
    try:
        buf = Path(path).read_bytes()
    except OSError as exc:
        raise DatasetFormatError(f"cannot read mask PNG {path}: {exc}") from exc
    found = decode_gray8_box(buf)
    if found is not None:
        return found
    try:
        gray = cv2.imdecode(np.frombuffer(buf, dtype=np.uint8), cv2.IMREAD_GRAYSCALE)
    except cv2.error:
        gray = None
    if gray is None:
        raise DatasetFormatError(f"cannot read mask PNG {path}")
    box = _nonzero_box(gray)
    crop = gray[box[0]:box[1], box[2]:box[3]] if box is not None else np.zeros((0, 0), dtype=np.uint8)
    return (int(gray.shape[0]), int(gray.shape[1])), box, crop


def _nonzero_box(img: np.ndarray) -> tuple[int, int, int, int] | None:
    rows = np.flatnonzero(img.any(axis=1))
    if rows.size == 0:
        return None
    y0, y1 = int(rows[0]), int(rows[-1]) + 1
    cols = np.flatnonzero(img[y0:y1].any(axis=0))
    return y0, y1, int(cols[0]), int(cols[-1]) + 1


def _decode(buf: memoryview) -> np.ndarray | None:
    if len(buf) < 8 or bytes(buf[:8]) != _SIGNATURE:
        return None
    pos, size, idat, ended = 8, None, [], False
    while pos < len(buf):
        if ended:
            return None  # bytes after IEND
        length, kind = struct.unpack_from(">I4s", buf, pos)
        end = pos + 8 + length
        if length > 0x7FFFFFFF or end + 4 > len(buf):
            return None
        data = buf[pos + 8:end]
        if zlib.crc32(data, zlib.crc32(kind)) != struct.unpack_from(">I", buf, end)[0]:
            return None
        if size is None:
            if kind != b"IHDR" or length != 13:
                return None
            width, height, depth, colour, compression, filtering, interlace = struct.unpack_from(">IIBBBBB", data)
            if (depth, colour, compression, filtering, interlace) != (8, 0, 0, 0, 0):
                return None
            if not (0 < width <= 1_000_000 and 0 < height <= 1_000_000 and width * height <= _MAX_PIXELS):
                return None
            size = (height, width)
        elif kind == b"IDAT":
            if idat and idat[-1] is None:
                return None  # IDAT chunks must be consecutive
            idat.append(data)
        elif kind == b"IEND":
            if length != 0:
                return None
            ended = True
        elif kind in _INFORMATIONAL:
            if idat and idat[-1] is not None:
                idat.append(None)  # marks the end of the IDAT run
        else:
            return None
        pos = end + 4
    if not ended or not idat:
        return None
    return _inflate_rows(b"".join(d for d in idat if d is not None), *size)


def _inflate_rows(stream: bytes, height: int, width: int):
    expected = height * (width + 1)  # each row: its filter byte, then the pixels
    inflater = _inflate.decompressobj()
    out = inflater.decompress(stream, expected)
    if len(out) != expected or not inflater.eof or inflater.unused_data or inflater.unconsumed_tail:
        return None
    raw = np.frombuffer(out, dtype=np.uint8).reshape(height, width + 1)
    return _unfilter(raw[:, 0], raw[:, 1:])


def _unfilter(kinds: np.ndarray, data: np.ndarray):
    """Undo the PNG row filters of 1-byte pixels (kinds: (H,) filter type per row; data: (H, W)
    filtered bytes) and return ((H, W), box, crop) as decode_gray8_box, or None when a row uses
    Average or Paeth (or a filter type that does not exist).

    None rows are their bytes, Sub rows a running sum along the row (mod 256), Up rows a running
    sum down the column from the last row that is not Up. A row of zero bytes is zero unless it is
    an Up row below content, so the work is limited to the rows from the first nonzero one to the
    last (plus the Up rows that continue it), and to the columns from the first nonzero byte (every
    earlier byte of those rows is 0, and so is every pixel left of it).
    """
    if int(kinds.max()) > _FILTER_UP:
        return None
    height, width = data.shape
    shape = (height, width)
    busy = np.flatnonzero(data.any(axis=1))
    if busy.size == 0:
        return shape, None, np.zeros((0, 0), dtype=np.uint8)
    r0, r1 = int(busy[0]), int(busy[-1]) + 1
    while r1 < height and kinds[r1] == _FILTER_UP:  # Up rows of zero bytes repeat the row above
        r1 += 1
    cols = np.flatnonzero(data[busy].any(axis=0))
    c0 = int(cols[0])
    rows = data[r0:r1, c0:]
    kind = kinds[r0:r1]
    block = np.zeros(rows.shape, dtype=np.uint8)
    plain = np.flatnonzero(kind == _FILTER_NONE)
    block[plain] = rows[plain]
    sub = np.flatnonzero(kind == _FILTER_SUB)
    if sub.size:
        block[sub] = _running_sums(rows[sub])
    up = kind == _FILTER_UP
    if up.any():
        # runs [a, b) of consecutive Up rows: row k = bytes of k + row k - 1, from row a - 1 (a None or
        # Sub row done above; zero when a is the block's first row, as every row above it is zero)
        edges = np.flatnonzero(np.diff(np.concatenate(([0], up.view(np.int8), [0]))))
        for a, b in zip(edges[::2].tolist(), edges[1::2].tolist()):
            running = np.cumsum(rows[a:b], axis=0, dtype=np.uint8)
            if a > 0:
                running += block[a - 1]
            block[a:b] = running
    box = _nonzero_box(block)
    if box is None:  # bytes that sum to 0 mod 256: possible, if odd
        return shape, None, np.zeros((0, 0), dtype=np.uint8)
    y0, y1, x0, x1 = box
    return shape, (r0 + y0, r0 + y1, c0 + x0, c0 + x1), block[y0:y1, x0:x1]


def _running_sums(rows: np.ndarray) -> np.ndarray:
    """np.cumsum(rows, axis=1, dtype=np.uint8) of an (n, m) uint8 array that is mostly 0, from its
    nonzero bytes only: between two of them (and from a row's start to its first) the running sum
    is constant, so the result is one np.repeat of those constants (the sequential cumsum costs
    ~3 ns per byte, and so does np.flatnonzero on bytes; the nonzero bytes are found 8 at a time)."""
    n, m = rows.shape
    width = -(-m // 8) * 8  # rows padded with zeros to whole 8-byte words
    padded = np.zeros((n, width), dtype=np.uint8)
    padded[:, :m] = rows
    flat = padded.ravel()
    words = np.flatnonzero(flat.view(np.uint64))
    if words.size == 0:
        return padded[:, :m]
    octets = flat.reshape(-1, 8)[words]
    hit = np.flatnonzero(octets)
    at = words[hit >> 3] * 8 + (hit & 7)  # positions of the nonzero bytes, ascending
    total = np.cumsum(flat[at], dtype=np.uint8)  # mod 256, as the PNG filter arithmetic
    # restart at every row: subtract the total reached before the row's first nonzero byte
    row = at // width
    first = np.flatnonzero(np.concatenate(([True], row[1:] != row[:-1])))
    before = np.concatenate(([0], total[first[1:] - 1])).astype(np.uint8)
    total -= np.repeat(before, np.diff(np.concatenate((first, [at.size]))))
    # constant pieces start at every row start (value 0) and at every nonzero byte (value: the
    # running sum there); where both fall on one byte, the stable sort puts the byte's piece
    # second, and the row start's piece is empty
    starts = np.concatenate((np.arange(0, n * width, width), at))
    values = np.concatenate((np.zeros(n, dtype=np.uint8), total))
    order = np.argsort(starts, kind="stable")
    starts, values = starts[order], values[order]
    out = np.repeat(values, np.diff(np.concatenate((starts, [n * width])))).reshape(n, width)
    return out[:, :m]
