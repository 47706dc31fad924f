"""Frame io: the one place where image files become arrays.

Every frame in rvt-bench is read here as RGB uint8 with its EXIF orientation applied, the way
LISA reads ReasonSeg images (``cv2.imread`` applies EXIF orientation by default) but without
OpenCV's BGR order. Annotations (LabelMe polygons, RLE masks) are in these oriented coordinates.
"""
from __future__ import annotations

import os
import threading
import warnings
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import numpy as np
from PIL import Image, ImageFile, ImageOps, UnidentifiedImageError

from rvt_bench.core import files
from rvt_bench.core.types import DatasetFormatError

# EXIF Orientation values 5-8 are transposed (rotated by 90 or 270 degrees): width and height swap.
_EXIF_ORIENTATION = 0x0112
_TRANSPOSING_ORIENTATIONS = {5, 6, 7, 8}
# verify_frame switches PIL's process-wide LOAD_TRUNCATED_IMAGES off for the duration of one decode;
# the lock keeps concurrent verify_frame calls from restoring each other's saved value out of order.
_TRUNCATION_LOCK = threading.Lock()
# What PIL raises for a file that is not a usable image: corrupt, truncated, a symlink loop (OSError),
# or larger than Image.MAX_IMAGE_PIXELS allows (a decompression bomb: DecompressionBombError).
_UNREADABLE = (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError)
_WIDE_MODES = ("I;16", "I;16B", "I;16L", "I")


def _to_uint8(arr: np.ndarray) -> np.ndarray:
    """16-bit (or 32-bit) grey values to uint8 by their top 8 bits (cv2.imread's IMREAD_COLOR rule
    for 16-bit files: value >> 8)."""
    return (np.clip(arr.astype(np.int64), 0, 65535) >> 8).astype(np.uint8)


def read_frame(path: str | Path) -> np.ndarray:
    """Read one image file as an (H, W, 3) uint8 RGB array, EXIF orientation applied.

    Grayscale, palette, 16-bit and RGBA images are converted to RGB (alpha dropped, not composited).
    Raises DatasetFormatError naming the path when the file is missing, unreadable or corrupt, not
    a regular file, or larger than dataset.limits allows (checked on the header, before decoding).
    """
    try:
        with _opened(path) as im:
            im = ImageOps.exif_transpose(im)
            if im.mode in _WIDE_MODES:  # 16/32-bit grey: keep the top 8 bits, as cv2.imread does
                return np.repeat(_to_uint8(np.asarray(im))[..., None], 3, axis=2)
            return np.asarray(im.convert("RGB"), dtype=np.uint8).copy()
    except FileNotFoundError as exc:
        raise DatasetFormatError(f"frame {path} does not exist") from exc
    except _UNREADABLE as exc:
        raise DatasetFormatError(f"frame {path} is not a readable image: {exc}") from exc


def frame_size(path: str | Path) -> tuple[int, int]:
    """(H, W) in pixels of an image file after EXIF orientation, read from the header only.

    Remembered per file (path, inode, size, modification time; the last 65,536 files), since every
    expression of a video asks for the same frames' sizes: a changed or replaced file is read again.
    Raises DatasetFormatError naming the path when the file is missing or not an image.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError as exc:
        raise DatasetFormatError(f"frame {path} does not exist") from exc
    except OSError:  # e.g. a symlink loop: let PIL report it
        return _header_size(str(path), None)
    return _header_size(str(path), (st.st_ino, st.st_size, st.st_mtime_ns))


@contextmanager
def _opened(path: str | Path) -> Iterator[Image.Image]:
    """PIL's image of a regular file (files.open_regular: a FIFO or a device is refused, nothing
    hangs), its header checked against dataset.limits (file size, width x height) before any decode.
    Raises what the callers turn into DatasetFormatError (see _UNREADABLE), FileLimitError."""
    fd, size = files.open_regular(path, "frame")
    with os.fdopen(fd, "rb") as fh:
        limit = files.limits()
        if size > limit.max_file_mb * (1 << 20):
            raise files.FileLimitError(f"frame {path} is {size / (1 << 20):.1f} MB, over the {limit.max_file_mb:g} MB "
                                       f"limit (dataset.limits.max_file_mb)")
        with warnings.catch_warnings():  # PIL warns from 89M pixels on; dataset.limits decides below
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = Image.open(fh)
        with im:
            width, height = im.size
            if width * height > limit.max_image_pixels:
                raise files.FileLimitError(
                    f"frame {path} is {width} x {height} = {width * height:,} pixels, which exceeds the limit of "
                    f"{limit.max_image_pixels:,} (dataset.limits.max_image_pixels); not decoded")
            yield im


@lru_cache(maxsize=65536)
def _header_size(path: str, _version: tuple[int, int, int] | None) -> tuple[int, int]:
    """frame_size's header read; _version (inode, size, mtime) only keys the memo. Exceptions are not memoised."""
    try:
        with _opened(path) as im:
            width, height = im.size
            orientation = im.getexif().get(_EXIF_ORIENTATION, 1)
    except FileNotFoundError as exc:
        raise DatasetFormatError(f"frame {path} does not exist") from exc
    except _UNREADABLE as exc:
        raise DatasetFormatError(f"frame {path} is not a readable image: {exc}") from exc
    if orientation in _TRANSPOSING_ORIENTATIONS:
        return width, height
    return height, width


def verify_frame(path: str | Path) -> None:
    """Fully decode one image file (every pixel, not only the header) and return None if it is intact.

    Meant to be called per sample before a model sees it: ``frame_size`` reads only the header, so
    an image truncated mid-stream (an interrupted download) would otherwise pass loading and fail,
    or worse be silently padded with grey, inside the model. PIL's ``ImageFile.LOAD_TRUNCATED_IMAGES``
    is forced to False during the decode (and restored after), so a truncated JPEG or PNG raises.
    Raises DatasetFormatError naming the path when the file is missing, empty, not an image,
    truncated or otherwise corrupt.
    """
    with _TRUNCATION_LOCK:
        saved = ImageFile.LOAD_TRUNCATED_IMAGES
        ImageFile.LOAD_TRUNCATED_IMAGES = False
        try:
            with _opened(path) as im:
                im.load()
        except FileNotFoundError as exc:
            raise DatasetFormatError(f"frame {path} does not exist") from exc
        except _UNREADABLE as exc:
            raise DatasetFormatError(f"frame {path} is truncated, empty or corrupt (full decode failed): {exc}") from exc
        finally:
            ImageFile.LOAD_TRUNCATED_IMAGES = saved
