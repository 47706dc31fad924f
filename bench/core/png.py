"""Fast exact decoding of the PNGs that mask submissions are made of: 8-bit grayscale or 8-bit
indexed (palette), non-interlaced, read as ``cv2.imread(path, cv2.IMREAD_GRAYSCALE)`` reads them.

Why: a ReVOS-scale submission is ~10^5 such PNGs, and OpenCV's (libpng's) decoder spends ~6 ms on
each 720p mask, almost all of it in zlib's inflate of the long zero runs and in unfiltering;
zlib-ng inflates the same stream ~20x faster. `decode_gray8_box` reads the chunks, checks every
CRC, inflates with zlib-ng (Adler-32 checked) and undoes the row filters in numpy on the rows and
columns that hold content, returning that content's box. Palette entries become the gray values
OpenCV gives them, read from OpenCV itself (`_palette_lut`).

It decodes only a strict, well-formed subset and returns None for anything else, so that the caller
falls back to OpenCV and gets OpenCV's result (or failure) exactly: colour, 16-bit, low bit depth
or interlaced images, any chunk other than IHDR / PLTE / tRNS (indexed) / IDAT / IEND and the
informational tEXt, tIME, pHYs (an eXIf chunk can rotate OpenCV's output), a bad CRC, a zlib
stream that is malformed, short, long or followed by extra data, bytes after IEND, a palette
index without an entry, and Average / Paeth rows that would need more than _SEQUENTIAL_BUDGET
pixels visited one by one (photographs, not masks).
For every file it accepts, the pixels equal ``cv2.imdecode(buf, cv2.IMREAD_GRAYSCALE)``, which
tests/test_png.py checks on files written by OpenCV, Pillow and by hand (every filter type,
palettes) and on damaged files.
"""
from __future__ import annotations

import struct
import zlib
from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np

try:  # zlib-ng inflates runs ~20x faster than zlib; the standard module gives the same bytes, slower
    from zlib_ng import zlib_ng as _inflate
except ImportError:  # pragma: no cover - zlib-ng is a dependency; kept working without it
    _inflate = zlib

from rvt_bench.core import files
from rvt_bench.core.types import DatasetFormatError

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# ancillary chunks that do not change the pixels OpenCV decodes
_INFORMATIONAL = {b"tEXt", b"tIME", b"pHYs"}
# OpenCV's imdecode refuses images over 2**30 pixels (CV_IO_MAX_IMAGE_PIXELS) and libpng sides over
# 10**6 (PNG_USER_WIDTH_MAX); larger files go to OpenCV, which decides
_MAX_PIXELS = 1 << 30
_FILTER_NONE, _FILTER_SUB, _FILTER_UP, _FILTER_AVERAGE, _FILTER_PAETH = 0, 1, 2, 3, 4
_GRAY, _INDEXED = 0, 3  # IHDR colour types decoded here
# Average / Paeth pixels visited one by one per image (see _sequential_row): masks need a few per
# row; a photograph's rows would need every pixel, and OpenCV is faster at that
_SEQUENTIAL_BUDGET = 1 << 14


def decode_gray8(buf: bytes) -> np.ndarray | None:
    """Pixels of an 8-bit grayscale or indexed, non-interlaced PNG file's bytes as an (H, W) uint8
    array, as ``cv2.imdecode(buf, cv2.IMREAD_GRAYSCALE)`` gives them (palette entries as gray values).

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

    8-bit grayscale and indexed files take the fast decoder, everything else OpenCV's (colour
    images become their gray value, 16-bit ones their top 8 bits, EXIF orientation applied).
    Raises DatasetFormatError naming the path when the file cannot be read or decoded, is not a
    regular file, or is larger than dataset.limits allows (bytes, or pixels from its header:
    checked before any decode).
    """
    buf = files.read_data(path, "mask PNG")
    files.check_image_pixels(buf, path, "mask PNG")
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


def _decode(buf: memoryview):
    if len(buf) < 8 or bytes(buf[:8]) != _SIGNATURE:
        return None
    pos, size, colour, idat, ended = 8, None, 0, [], False
    palette = transparency = None
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
            if depth != 8 or colour not in (_GRAY, _INDEXED) or (compression, filtering, interlace) != (0, 0, 0):
                return None
            if not (0 < width <= 1_000_000 and 0 < height <= 1_000_000 and width * height <= _MAX_PIXELS):
                return None
            size = (height, width)
        elif kind == b"IDAT":
            if (idat and idat[-1] is None) or (colour == _INDEXED and palette is None):
                return None  # IDAT chunks must be consecutive, after the palette
            idat.append(data)
        elif kind == b"IEND":
            if length != 0:
                return None
            ended = True
        elif kind == b"PLTE" and colour == _INDEXED and palette is None and not idat:
            if length == 0 or length % 3 or length > 768:
                return None
            palette = bytes(data)
        elif kind == b"tRNS" and colour == _INDEXED and palette is not None and transparency is None and not idat:
            if length > len(palette) // 3:
                return None
            transparency = bytes(data)
        elif kind in _INFORMATIONAL:
            if idat and idat[-1] is not None:
                idat.append(None)  # marks the end of the IDAT run
        else:
            return None
        pos = end + 4
    if not ended or not idat:
        return None
    found = _inflate_rows(b"".join(d for d in idat if d is not None), *size)
    if found is None or colour == _GRAY:
        return found
    return _palette_to_gray(found, palette, transparency)


def _palette_to_gray(found, palette: bytes, transparency: bytes | None):
    """Indexed pixels (decode_gray8_box's form) to the gray values OpenCV gives them; None when an
    index has no palette entry (libpng's verdict on that is OpenCV's to give)."""
    shape, box, crop = found
    lut = _palette_lut(palette, transparency)
    if lut is None or (crop.size and int(crop.max()) >= lut.size):
        return None
    if lut[0] != 0:  # the background itself is not 0: every pixel is "content"
        img = np.full(shape, lut[0], dtype=np.uint8)
        if box is not None:
            img[box[0]:box[1], box[2]:box[3]] = lut[crop]
        return shape, (0, shape[0], 0, shape[1]), img
    if box is None:
        return found
    gray = lut[crop]
    inner = _nonzero_box(gray)  # an entry may itself be gray 0
    if inner is None:
        return shape, None, np.zeros((0, 0), dtype=np.uint8)
    y0, y1, x0, x1 = inner
    return shape, (box[0] + y0, box[0] + y1, box[2] + x0, box[2] + x1), gray[y0:y1, x0:x1]


@lru_cache(maxsize=64)
def _palette_lut(palette: bytes, transparency: bytes | None) -> np.ndarray | None:
    """Gray value of each palette entry as OpenCV's PNG reader computes it: read from OpenCV itself,
    by decoding a 1 x n image of the entries 0..n-1 with the same PLTE and tRNS chunks (the
    conversion is per pixel). None when OpenCV cannot read that image."""
    n = len(palette) // 3
    probe = (_SIGNATURE + _chunk(b"IHDR", struct.pack(">IIBBBBB", n, 1, 8, _INDEXED, 0, 0, 0)) + _chunk(b"PLTE", palette)
             + (_chunk(b"tRNS", transparency) if transparency is not None else b"")
             + _chunk(b"IDAT", zlib.compress(b"\x00" + bytes(range(n)))) + _chunk(b"IEND", b""))
    try:
        gray = cv2.imdecode(np.frombuffer(probe, dtype=np.uint8), cv2.IMREAD_GRAYSCALE)
    except cv2.error:
        return None
    if gray is None or gray.shape != (1, n):
        return None
    lut = gray[0].copy()
    lut.setflags(write=False)
    return lut


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _inflate_rows(stream: bytes, height: int, width: int):
    expected = height * (width + 1)  # each row: its filter byte, then the pixels
    inflater = _inflate.decompressobj()
    out = inflater.decompress(stream, expected)
    if len(out) != expected or not inflater.eof or inflater.unused_data or inflater.unconsumed_tail:
        return None
    raw = np.frombuffer(out, dtype=np.uint8)
    kinds = raw[::width + 1]
    if int(kinds.max()) <= _FILTER_SUB:  # OpenCV's mask PNGs: every row Sub
        return _unfilter_sparse(raw, kinds, height, width)
    raw = raw.reshape(height, width + 1)
    return _unfilter(kinds, raw[:, 1:])


def _nonzero_positions(flat: np.ndarray) -> np.ndarray:
    """Ascending indices of the nonzero bytes of a 1-D uint8 array, found 8 bytes at a time (a
    mask is mostly 0 and np.flatnonzero on bytes costs ~2 ns each)."""
    whole = flat.size // 8 * 8
    # (x != 0) then flatnonzero of the bools: numpy's nonzero is several times faster on bools
    words = np.flatnonzero(flat[:whole].view(np.uint64) != 0)
    hit = np.flatnonzero(flat[:whole].reshape(-1, 8)[words] != 0)
    at = words[hit >> 3] * 8 + (hit & 7)
    if whole < flat.size:
        at = np.concatenate((at, whole + np.flatnonzero(flat[whole:] != 0)))
    return at


def _unfilter_sparse(raw: np.ndarray, kinds: np.ndarray, height: int, width: int):
    """`_unfilter` for images whose rows are all None or Sub, from the nonzero bytes alone.

    raw: the inflated stream, (H * (W + 1),) uint8. A None row's pixel is its byte; a Sub row's
    pixels are its running byte sum, constant from each nonzero byte to the next (0 before the
    first). So the content is a list of constant pieces [start, end) per row, written into the
    content box with one np.repeat.
    """
    stride = width + 1
    at = _nonzero_positions(raw)
    row, col = np.divmod(at, stride)
    data = col != 0  # not a filter byte
    at, row, col = at[data], row[data], col[data] - 1
    shape = (height, width)
    if at.size == 0:
        return shape, None, np.zeros((0, 0), dtype=np.uint8)
    byte = raw[at]
    # running sums per row: the total so far minus the total before the row's first nonzero byte
    total = np.cumsum(byte, dtype=np.uint8)
    first = np.flatnonzero(np.concatenate(([True], row[1:] != row[:-1])))
    before = np.concatenate(([0], total[first[1:] - 1])).astype(np.uint8)
    total -= np.repeat(before, np.diff(np.concatenate((first, [at.size]))))
    plain = kinds[row] == _FILTER_NONE
    # a piece ends at the row's next nonzero byte (Sub) or after its own pixel (None)
    end = np.concatenate((np.where(row[1:] == row[:-1], col[1:], width), [width]))
    end = np.where(plain, col + 1, end)
    value = np.where(plain, byte, total)
    keep = value != 0
    if not keep.any():  # bytes whose sums wrap to 0 mod 256: possible, if odd
        return shape, None, np.zeros((0, 0), dtype=np.uint8)
    row, start, end, value = row[keep], col[keep], end[keep], value[keep]
    y0, y1, x0, x1 = int(row[0]), int(row[-1]) + 1, int(start.min()), int(end.max())
    w = x1 - x0
    base = (row - y0) * w - x0
    # pieces and the gaps after them, in order; where a gap's start is the next piece's start
    # (adjacent pieces, or a piece at the next row's left edge), the stable sort puts the piece second
    starts = np.concatenate((base + end, base + start))
    values = np.concatenate((np.zeros(row.size, dtype=np.uint8), value))
    order = np.argsort(starts, kind="stable")
    starts, values = starts[order], values[order]
    size = (y1 - y0) * w
    lengths = np.diff(np.concatenate((starts, [size])))
    crop = np.repeat(values, lengths).reshape(y1 - y0, w) if starts[0] == 0 else None
    if crop is None:  # the box's first row begins with background
        crop = np.concatenate((np.zeros(int(starts[0]), dtype=np.uint8), np.repeat(values, lengths))).reshape(y1 - y0, w)
    return shape, (y0, y1, x0, x1), crop


def _unfilter(kinds: np.ndarray, data: np.ndarray):
    """Undo the PNG row filters of 1-byte pixels (kinds: (H,) filter type per row; data: (H, W)
    filtered bytes) and return ((H, W), box, crop) as decode_gray8_box, or None for a filter type
    that does not exist or Average / Paeth rows too busy for `_sequential_row`.

    None rows are their bytes, Sub rows a running sum along the row (mod 256), Up rows a running
    sum down the column from the last row that is not Up, Average and Paeth rows `_sequential_row`.
    A row of zero bytes below zero rows is zero, so the work starts at the first nonzero row and
    ends at the last (plus the Up / Average / Paeth rows that continue it, which can repeat the row
    above); and it starts at the column of the first nonzero byte: every earlier byte of those
    rows is 0, and so is every pixel left of it.
    """
    if int(kinds.max()) > _FILTER_PAETH:
        return None
    height, width = data.shape
    shape = (height, width)
    busy = np.flatnonzero(data.any(axis=1))
    if busy.size == 0:
        return shape, None, np.zeros((0, 0), dtype=np.uint8)
    r0, r1 = int(busy[0]), int(busy[-1]) + 1
    while r1 < height and kinds[r1] >= _FILTER_UP:  # these can carry the row above down
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
    dependent = kind >= _FILTER_UP
    if dependent.any():
        # runs [a, b) of one filter type among the rows that build on the row above, in order, so
        # that row a - 1 is done (a None or Sub row, or the previous run); above the block: zeros
        change = np.flatnonzero(np.diff(kind.astype(np.int16), prepend=-1, append=-1))
        budget = [_SEQUENTIAL_BUDGET]
        for a, b in zip(change[:-1].tolist(), change[1:].tolist()):
            k = int(kind[a])
            if k == _FILTER_UP:
                running = np.cumsum(rows[a:b], axis=0, dtype=np.uint8)
                if a > 0:
                    running += block[a - 1]
                block[a:b] = running
            elif k > _FILTER_UP:
                for y in range(a, b):
                    above = block[y - 1] if y > 0 else np.zeros(rows.shape[1], dtype=np.uint8)
                    if not _sequential_row(k, rows[y], above, block[y], budget):
                        return None
    box = _nonzero_box(block)
    if box is None:  # bytes whose sums wrap to 0 mod 256: possible, if odd
        return shape, None, np.zeros((0, 0), dtype=np.uint8)
    y0, y1, x0, x1 = box
    return shape, (r0 + y0, r0 + y1, c0 + x0, c0 + x1), block[y0:y1, x0:x1]


def _sequential_row(kind: int, raw: np.ndarray, above: np.ndarray, out: np.ndarray, budget: list[int]) -> bool:
    """Undo one Average (3) or Paeth (4) row into `out` (uint8, the row's length), with `above` the
    row above (unfiltered). These filters predict each pixel from the one on its left, so they
    run pixel by pixel; but where the byte is 0 and the row above does not change, the Paeth
    prediction is the left pixel (the row stays constant) and the Average one halves its distance
    to the pixel above until it stops changing. So only those places are visited, in Python,
    while budget[0] (visits left for the image) lasts; False when it runs out (the caller then
    leaves the file to OpenCV).
    """
    n = raw.size
    events = np.flatnonzero((raw != 0) | np.concatenate(([True], above[1:] != above[:-1])))
    budget[0] -= events.size
    if budget[0] < 0:
        return False
    raw_l, above_l = raw.tolist(), above.tolist()
    stops = events.tolist() + [n]
    left = 0
    starts, values = [], []
    for i, x in enumerate(stops[:-1]):
        b = above_l[x]
        c = above_l[x - 1] if x > 0 else 0
        if kind == _FILTER_PAETH:
            p = left + b - c
            pa, pb, pc = abs(p - left), abs(p - b), abs(p - c)
            predicted = left if pa <= pb and pa <= pc else (b if pb <= pc else c)
            left = (raw_l[x] + predicted) & 0xFF
            starts.append(x)
            values.append(left)
        else:
            left = (raw_l[x] + ((left + b) >> 1)) & 0xFF
            starts.append(x)
            values.append(left)
            x += 1
            while x < stops[i + 1]:  # zero bytes, constant pixel above: converge to a fixed point
                following = (left + b) >> 1
                if following == left:
                    break
                budget[0] -= 1
                if budget[0] < 0:
                    return False
                left = following
                starts.append(x)
                values.append(left)
                x += 1
    starts.append(n)
    out[:] = np.repeat(np.array(values, dtype=np.uint8), np.diff(starts))
    return True


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
    at = _nonzero_positions(flat)
    if at.size == 0:
        return padded[:, :m]
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
