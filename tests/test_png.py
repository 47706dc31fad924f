"""bench/core/png.py: the fast grayscale PNG decoder gives OpenCV's pixels on every file it accepts, hands
every other file (and every damaged one) to OpenCV, and is actually taken for the mask PNGs that
OpenCV and Pillow write."""
import io
import struct
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image

from rvt_bench.core import png
from rvt_bench.core.types import DatasetFormatError


def _cv2_gray(buf: bytes):
    return cv2.imdecode(np.frombuffer(buf, dtype=np.uint8), cv2.IMREAD_GRAYSCALE)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png(img: np.ndarray, filters, extra=(), depth=8, colour=0) -> bytes:
    """A grayscale PNG written by hand, row k filtered with filters[k % len(filters)] (0-4)."""
    h, w = img.shape
    prev = np.zeros(w, dtype=np.int64)
    raw = bytearray()
    for y in range(h):
        row = img[y].astype(np.int64)
        left = np.concatenate(([0], row[:-1]))
        upleft = np.concatenate(([0], prev[:-1]))
        kind = filters[y % len(filters)]
        if kind == 0:
            out = row
        elif kind == 1:
            out = row - left
        elif kind == 2:
            out = row - prev
        elif kind == 3:
            out = row - (left + prev) // 2
        else:
            p = left + prev - upleft
            pa, pb, pc = abs(p - left), abs(p - prev), abs(p - upleft)
            pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prev, upleft))
            out = row - pred
        raw += bytes([kind]) + (out % 256).astype(np.uint8).tobytes()
        prev = row
    ihdr = struct.pack(">IIBBBBB", w, h, depth, colour, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + b"".join(_chunk(k, d) for k, d in extra)
            + _chunk(b"IDAT", zlib.compress(bytes(raw))) + _chunk(b"IEND", b""))


def _images(rng):
    """Masks as submissions hold them (0/255, 0/1, a few object ids) and arbitrary gray images."""
    for k in range(60):
        h, w = (int(v) for v in rng.integers(1, 40, 2))
        img = np.zeros((h, w), dtype=np.uint8)
        if k % 5 == 0:
            img = rng.integers(0, 256, (h, w), dtype=np.uint8)
        elif k % 5 == 1:
            img[(rng.random((h, w)) < 0.3)] = 255
        elif k % 5 == 2:
            y, x = int(rng.integers(0, h)), int(rng.integers(0, w))
            img[y:, x:] = int(rng.integers(1, 256))  # content that reaches the last row and column
        elif k % 5 == 3:
            img = rng.choice(np.array([0, 1, 2, 255], dtype=np.uint8), (h, w))
        yield img
    yield np.zeros((7, 9), dtype=np.uint8)
    yield np.full((5, 6), 255, dtype=np.uint8)
    yield np.zeros((1, 1), dtype=np.uint8)


def _is_box(img: np.ndarray) -> bool:
    ys, xs = np.nonzero(img)
    return ys.size > 0 and np.unique(img[ys, xs]).size == 1 and ys.size == (np.ptp(ys) + 1) * (np.ptp(xs) + 1)


def _writers(img: np.ndarray):
    yield "opencv", cv2.imencode(".png", img)[1].tobytes()
    for optimize in (False, True):
        bio = io.BytesIO()
        Image.fromarray(img).save(bio, "PNG", optimize=optimize)
        yield f"pillow optimize={optimize}", bio.getvalue()


def test_mask_pngs_of_opencv_and_pillow_decode_fast_to_opencvs_pixels():
    rng = np.random.default_rng(0)
    for img in _images(rng):
        for writer, buf in _writers(img):
            got = png.decode_gray8(buf)
            if writer == "opencv" or _is_box(img):
                # OpenCV writes Sub rows, Pillow None / Sub / Up rows for a box-shaped object (its
                # filter heuristic picks Paeth for a few rows of curved or noisy masks: those go to OpenCV)
                assert got is not None, writer
            if got is not None:
                assert got.dtype == np.uint8 and np.array_equal(got, _cv2_gray(buf)), writer
                assert np.array_equal(got, img)


@pytest.mark.parametrize("filters", [[0], [1], [2], [0, 2, 2], [1, 2], [2, 1, 0], [1, 2, 2, 2, 0]])
def test_every_none_sub_up_combination_equals_opencv(filters):
    rng = np.random.default_rng(len(filters))
    for img in _images(rng):
        buf = _png(img, filters)
        got = png.decode_gray8(buf)
        assert got is not None
        assert np.array_equal(got, img) and np.array_equal(got, _cv2_gray(buf))


def test_box_form_holds_every_nonzero_pixel():
    rng = np.random.default_rng(3)
    for img in _images(rng):
        shape, box, crop = png.decode_gray8_box(_png(img, [1, 2, 0]))
        assert shape == img.shape
        if not img.any():
            assert box is None and crop.size == 0
            continue
        ys, xs = np.nonzero(img)
        assert box == (ys.min(), ys.max() + 1, xs.min(), xs.max() + 1)
        assert np.array_equal(crop, img[box[0]:box[1], box[2]:box[3]])


@pytest.mark.parametrize("filters", [[3], [4], [1, 4], [2, 3], [0, 3, 4, 2, 1], [4, 4, 2, 3, 3]])
def test_average_and_paeth_rows_equal_opencv(filters):
    rng = np.random.default_rng(len(filters) + 100)
    for img in _images(rng):
        buf = _png(img, filters)
        got = png.decode_gray8(buf)
        assert got is not None
        assert np.array_equal(got, img) and np.array_equal(got, _cv2_gray(buf))


def test_average_rows_converge_to_the_pixel_above():
    """Average rows of zero bytes under a constant row halve their distance to it pixel by pixel."""
    img = np.zeros((3, 40), dtype=np.uint8)
    img[0], img[1, :5] = 255, 7
    img[2] = [((int(img[1, x]) + 255) // 2) if x == 0 else 0 for x in range(40)]
    for x in range(1, 40):  # what a zero-byte Average row below a row of 255 holds
        img[2, x] = (int(img[2, x - 1]) + 255) // 2
    buf = _png(img, [0, 0, 3])
    assert np.array_equal(png.decode_gray8(buf), _cv2_gray(buf))


def test_busy_average_and_paeth_images_go_to_opencv(tmp_path):
    """A photograph's Average / Paeth rows need every pixel visited: OpenCV decodes those."""
    img = np.random.default_rng(5).integers(0, 256, (200, 300), dtype=np.uint8)
    buf = _png(img, [4, 3])
    assert png.decode_gray8(buf) is None
    path = tmp_path / "m.png"
    path.write_bytes(buf)
    shape, box, crop = png.read_gray(path)
    assert shape == img.shape and box == (0, 200, 0, 300) and np.array_equal(crop, img)


def _palette_png(indices: np.ndarray, palette: np.ndarray, transparency=None, filters=(0,)) -> bytes:
    buf = _png(indices, list(filters))
    ihdr = _chunk(b"IHDR", struct.pack(">IIBBBBB", indices.shape[1], indices.shape[0], 8, 3, 0, 0, 0))
    extra = _chunk(b"PLTE", palette.astype(np.uint8).tobytes())
    if transparency is not None:
        extra += _chunk(b"tRNS", bytes(transparency))
    return buf[:8] + ihdr + extra + buf[8 + 25:]


def test_palette_pngs_give_opencvs_gray_values():
    """Index PNGs (VISA's XMem outputs, DAVIS-style palettes) read as OpenCV reads them in gray: each
    entry's colour converted by OpenCV, including a non-black entry 0, entries that turn gray 0, and tRNS."""
    rng = np.random.default_rng(13)
    davis = np.array([[0, 0, 0], [128, 0, 0], [0, 128, 0], [128, 128, 0], [0, 0, 1]] + [[k, k, k] for k in range(251)])
    tinted = davis.copy()
    tinted[0] = (0, 0, 90)
    for palette, transparency in [(davis, None), (davis, [0, 255, 128]), (tinted, None), (davis[:5], None)]:
        for img in _images(rng):
            indices = (img.astype(np.int64) % len(palette)).astype(np.uint8)
            for filters in ([0], [1, 2, 4]):
                buf = _palette_png(indices, palette, transparency, filters)
                ref = _cv2_gray(buf)
                got = png.decode_gray8(buf)
                assert got is not None and np.array_equal(got, ref)
                _, box, crop = png.decode_gray8_box(buf)
                ys, xs = np.nonzero(ref)
                assert box == ((ys.min(), ys.max() + 1, xs.min(), xs.max() + 1) if ys.size else None)
    bio = io.BytesIO()
    im = Image.fromarray(np.kron(np.array([[0, 1], [2, 0]], dtype=np.uint8), np.ones((20, 30), dtype=np.uint8)), "P")
    im.putpalette(davis[:, :].astype(np.uint8).ravel().tolist())
    im.save(bio, "PNG")
    got = png.decode_gray8(bio.getvalue())
    assert got is not None and np.array_equal(got, _cv2_gray(bio.getvalue()))
    assert sorted(np.unique(got).tolist())[0] == 0 and len(np.unique(got)) == 3


def test_palette_index_without_an_entry_goes_to_opencv():
    indices = np.zeros((4, 5), dtype=np.uint8)
    indices[1, 1] = 9
    buf = _palette_png(indices, np.array([[0, 0, 0], [200, 10, 10]]))
    assert png.decode_gray8(buf) is None


def test_other_formats_and_chunks_go_to_opencv(tmp_path):
    img = np.zeros((6, 8), dtype=np.uint8)
    img[2:4, 3:6] = 255
    colour = cv2.imencode(".png", np.dstack([img, img // 2, img // 3]))[1].tobytes()
    wide = cv2.imencode(".png", img.astype(np.uint16) * 257)[1].tobytes()
    palette = _palette_png(img // 255, np.array([[0, 0, 0], [9, 9, 9]]))[:-12]  # no IEND
    exif = _png(img, [1], extra=[(b"eXIf", b"MM\x00*\x00\x00\x00\x08\x00\x00")])
    gamma = _png(img, [1], extra=[(b"gAMA", struct.pack(">I", 45455))])
    for name, buf in [("colour", colour), ("16-bit", wide), ("palette without IEND", palette), ("eXIf", exif), ("gAMA", gamma)]:
        assert png.decode_gray8(buf) is None, name
        path = tmp_path / f"{name}.png"
        path.write_bytes(buf)
        ref = _cv2_gray(buf)
        if ref is None:
            with pytest.raises(DatasetFormatError, match="cannot read"):
                png.read_gray(path)
            continue
        shape, box, crop = png.read_gray(path)
        full = np.zeros(shape, dtype=np.uint8)
        if box is not None:
            full[box[0]:box[1], box[2]:box[3]] = crop
        assert np.array_equal(full, ref), name
    # informational chunks do not change the pixels: decoded fast
    text = _png(img, [1], extra=[(b"tEXt", b"Comment\x00mask"), (b"pHYs", struct.pack(">IIB", 1, 1, 0))])
    assert np.array_equal(png.decode_gray8(text), img)


def _damaged(buf: bytes, rng):
    yield "truncated", buf[:len(buf) // 2]
    yield "no IEND", buf[:-12]
    yield "bytes after IEND", buf + b"\x00"
    k = buf.index(b"IDAT") + 6
    yield "IDAT byte flipped (CRC wrong)", buf[:k] + bytes([buf[k] ^ 1]) + buf[k + 1:]
    for _ in range(40):
        i = int(rng.integers(8, len(buf)))
        yield f"bit flip at {i}", buf[:i] + bytes([buf[i] ^ (1 << int(rng.integers(0, 8)))]) + buf[i + 1:]


def test_damaged_files_decode_as_opencv_decodes_them_or_not_at_all():
    """On a damaged file the fast path either declines or agrees with OpenCV; it never returns pixels
    where OpenCV fails."""
    rng = np.random.default_rng(7)
    img = np.zeros((20, 30), dtype=np.uint8)
    img[5:15, 8:22] = 255
    declined = 0
    for name, buf in _damaged(cv2.imencode(".png", img)[1].tobytes(), rng):
        got = png.decode_gray8(buf)
        if got is None:
            declined += 1
            continue
        ref = _cv2_gray(buf)
        assert ref is not None and np.array_equal(got, ref), name
    assert declined >= 4  # at least the four named cases


def test_unreadable_files_raise_naming_the_path(tmp_path):
    with pytest.raises(DatasetFormatError, match="missing.png"):
        png.read_gray(tmp_path / "missing.png")
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 30)
    with pytest.raises(DatasetFormatError, match="bad.png"):
        png.read_gray(bad)


def test_running_sums_equal_cumsum():
    rng = np.random.default_rng(11)
    for _ in range(300):
        n, m = (int(v) for v in rng.integers(1, 20, 2))
        rows = (rng.integers(0, 256, (n, m)) * (rng.random((n, m)) < rng.random())).astype(np.uint8)
        assert np.array_equal(png._running_sums(rows), np.cumsum(rows, axis=1, dtype=np.uint8))


def test_standard_zlib_gives_the_same_pixels(monkeypatch):
    img = np.zeros((30, 40), dtype=np.uint8)
    img[3:20, 5:33] = 255
    buf = cv2.imencode(".png", img)[1].tobytes()
    fast = png.decode_gray8(buf)
    monkeypatch.setattr(png, "_inflate", zlib)
    assert np.array_equal(png.decode_gray8(buf), fast) and np.array_equal(fast, img)


def test_idat_streams_that_do_not_end_with_the_image_go_to_opencv(tmp_path):
    """Extra bytes after the zlib stream, or more rows than the header says, are for OpenCV to judge."""
    img = np.zeros((6, 8), dtype=np.uint8)
    img[1:4, 2:7] = 255
    ihdr = _chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 6, 8, 0, 0, 0, 0))
    rows = b"".join(b"\x00" + img[y].tobytes() for y in range(6))
    for name, stream in [("bytes after the stream", zlib.compress(rows) + b"\x00\x01"),
                         ("a row too many", zlib.compress(rows + b"\x00" + bytes(8))),
                         ("a row short", zlib.compress(rows[:-9]))]:
        buf = b"\x89PNG\r\n\x1a\n" + ihdr + _chunk(b"IDAT", stream) + _chunk(b"IEND", b"")
        assert png.decode_gray8(buf) is None, name
        path = tmp_path / "m.png"
        path.write_bytes(buf)
        ref = _cv2_gray(buf)
        if ref is None:
            with pytest.raises(DatasetFormatError):
                png.read_gray(path)
        else:
            shape, box, crop = png.read_gray(path)
            assert shape == ref.shape and np.array_equal(crop, ref[box[0]:box[1], box[2]:box[3]]), name
