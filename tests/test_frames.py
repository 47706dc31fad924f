"""rvt_bench.core.frames: RGB uint8, EXIF orientation applied (as cv2.imread does for LISA), clear errors."""
from __future__ import annotations

import cv2
import numpy as np
import pytest
from PIL import Image, ImageFile

from rvt_bench.core.frames import frame_size, read_frame, verify_frame
from rvt_bench.core.types import DatasetFormatError

EXIF_ORIENTATION = 0x0112


def _quadrants(height: int = 20, width: int = 40) -> np.ndarray:
    """Left half red, right half blue: easy to follow through rotations, survives JPEG."""
    arr = np.zeros((height, width, 3), dtype=np.uint8)
    arr[:, : width // 2] = (255, 0, 0)
    arr[:, width // 2 :] = (0, 0, 255)
    return arr


def _save_jpeg(path, arr: np.ndarray, orientation: int | None = None) -> None:
    exif = Image.Exif()
    if orientation is not None:
        exif[EXIF_ORIENTATION] = orientation
    Image.fromarray(arr).save(path, format="JPEG", quality=95, exif=exif.tobytes())


def test_png_is_read_exactly_as_rgb(tmp_path):
    arr = np.random.default_rng(0).integers(0, 256, (7, 5, 3), dtype=np.uint8)
    Image.fromarray(arr).save(tmp_path / "a.png")
    out = read_frame(tmp_path / "a.png")
    assert out.dtype == np.uint8 and out.shape == (7, 5, 3)
    np.testing.assert_array_equal(out, arr)


def test_grayscale_becomes_three_equal_channels(tmp_path):
    gray = np.arange(12, dtype=np.uint8).reshape(3, 4) * 20
    Image.fromarray(gray).save(tmp_path / "g.png")
    out = read_frame(tmp_path / "g.png")
    assert out.shape == (3, 4, 3)
    for c in range(3):
        np.testing.assert_array_equal(out[..., c], gray)


def test_rgba_drops_alpha(tmp_path):
    rgba = np.zeros((2, 3, 4), dtype=np.uint8)
    rgba[..., :3] = (10, 20, 30)
    rgba[..., 3] = 0  # fully transparent: colour is kept, not composited on a background
    Image.fromarray(rgba, mode="RGBA").save(tmp_path / "t.png")
    out = read_frame(tmp_path / "t.png")
    assert out.shape == (2, 3, 3)
    assert (out == np.array([10, 20, 30], dtype=np.uint8)).all()


@pytest.mark.parametrize(
    "orientation, rotate_k",
    [(1, 0), (3, 2), (6, -1), (8, 1)],  # EXIF: 6 = display rotated 90 deg clockwise, 8 = counter-clockwise
)
def test_exif_orientation_is_applied(tmp_path, orientation, rotate_k):
    stored = _quadrants()
    path = tmp_path / f"o{orientation}.jpg"
    _save_jpeg(path, stored, orientation)
    expected = np.rot90(stored, k=rotate_k)
    out = read_frame(path)
    assert out.shape == expected.shape
    assert np.abs(out.astype(int) - expected.astype(int)).mean() < 8  # JPEG noise only
    assert frame_size(path) == expected.shape[:2]


@pytest.mark.parametrize("orientation", [1, 3, 6, 8])
def test_matches_cv2_imread_which_lisa_uses(tmp_path, orientation):
    path = tmp_path / "x.jpg"
    _save_jpeg(path, _quadrants(), orientation)
    reference = cv2.imread(str(path), cv2.IMREAD_COLOR)[..., ::-1]  # cv2 applies EXIF orientation by default
    out = read_frame(path)
    assert out.shape == reference.shape
    assert np.abs(out.astype(int) - reference.astype(int)).max() <= 2  # decoder rounding only


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(DatasetFormatError, match="nope.jpg"):
        read_frame(tmp_path / "nope.jpg")
    with pytest.raises(DatasetFormatError, match="nope.jpg"):
        frame_size(tmp_path / "nope.jpg")


def test_corrupt_file_names_the_path(tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"this is not a JPEG")
    with pytest.raises(DatasetFormatError, match="bad.jpg"):
        read_frame(bad)
    with pytest.raises(DatasetFormatError, match="bad.jpg"):
        frame_size(bad)


def test_truncated_jpeg_is_a_dataset_error(tmp_path):
    path = tmp_path / "cut.jpg"
    _save_jpeg(path, _quadrants(64, 64))
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(DatasetFormatError, match="cut.jpg"):
        read_frame(path)


def _noisy_jpeg(path) -> bytes:
    # noise does not compress: the scan data dominates the file, so a cut lands inside it
    arr = np.random.default_rng(1).integers(0, 256, (64, 96, 3), dtype=np.uint8)
    Image.fromarray(arr).save(path, format="JPEG", quality=90)
    return path.read_bytes()


def test_verify_frame_accepts_a_good_jpeg(tmp_path):
    _noisy_jpeg(tmp_path / "good.jpg")
    assert verify_frame(tmp_path / "good.jpg") is None


@pytest.mark.parametrize("content", ["empty", "truncated", "text"])
def test_verify_frame_rejects_broken_files_naming_the_path(tmp_path, content):
    path = tmp_path / f"{content}.jpg"
    data = _noisy_jpeg(path)
    if content == "empty":
        path.write_bytes(b"")
    elif content == "truncated":
        path.write_bytes(data[: len(data) // 3])
        assert frame_size(path) == (64, 96)  # the header survives: only a full decode notices
    else:
        path.write_text("this is a text file, not a JPEG\n")
    with pytest.raises(DatasetFormatError, match="truncated, empty or corrupt") as err:
        verify_frame(path)
    assert str(path) in str(err.value)


def test_verify_frame_detects_truncation_even_when_pil_is_told_to_tolerate_it(tmp_path):
    data = _noisy_jpeg(tmp_path / "t.jpg")
    (tmp_path / "t.jpg").write_bytes(data[: len(data) // 3])
    saved = ImageFile.LOAD_TRUNCATED_IMAGES
    ImageFile.LOAD_TRUNCATED_IMAGES = True  # as some libraries set it process-wide
    try:
        with pytest.raises(DatasetFormatError, match="t.jpg"):
            verify_frame(tmp_path / "t.jpg")
        assert ImageFile.LOAD_TRUNCATED_IMAGES is True  # restored for whoever set it
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = saved


def test_verify_frame_missing_file(tmp_path):
    with pytest.raises(DatasetFormatError, match="does not exist"):
        verify_frame(tmp_path / "nope.jpg")


def test_frame_size_reads_a_rewritten_file_again(tmp_path):
    """frame_size remembers sizes per file version: a file replaced by an image of another size is re-read."""
    path = tmp_path / "f.png"
    Image.new("RGB", (40, 30)).save(path)
    assert frame_size(path) == (30, 40)
    Image.new("RGB", (41, 20)).save(path)
    assert frame_size(path) == (20, 41)
    other = tmp_path / "g.png"
    Image.new("RGB", (7, 9)).save(other)
    other.replace(path)  # another inode under the same name
    assert frame_size(path) == (9, 7)
    path.unlink()
    with pytest.raises(DatasetFormatError, match="f.png"):
        frame_size(path)
