"""Which frames a VLM sees, at what size, and how they travel to a server.

Sampling (``sample_indices``): with ``fps`` and a sample that states its own fps
(``sample.meta["fps"]``), one frame every ``source_fps / fps`` frames from frame 0; else (or
additionally, as a cap) ``num_frames`` indices evenly spaced from the first to the last frame; with
neither, every frame. An image is one frame.

Resizing (``smart_resize``): Qwen2-VL / Qwen2.5-VL's rule (transformers
``models/qwen2_vl/image_processing_qwen2_vl.py::smart_resize``; Qwen2.5-VL report, arXiv 2502.13923,
sec. 2.1): both sides rounded to multiples of ``factor`` px, the area brought into
[min_pixels, max_pixels] keeping the aspect ratio. The adapter resizes every frame itself before any
backend sees it, so a server whose own processor allows at least ``max_pixels`` keeps the image as
sent and the model's input size is known here: the size box coordinates of the Qwen2.5-VL family
refer to.
"""
from __future__ import annotations

import base64
import io
import math

import numpy as np

from rvt_bench.core.types import AdapterError


def sample_indices(num_frames: int, count: int | None = None, fps: float | None = None,
                   source_fps: float | None = None) -> list[int]:
    """0-based indices of the frames shown to the model (see module docstring), increasing.

    num_frames: frames in the sample (>= 1). count: most frames shown (None = no cap). fps: frames
    per second to show, used when ``source_fps`` (the sample's fps) is known. Raises AdapterError on
    count < 1, fps <= 0 or num_frames < 1.
    """
    if num_frames < 1:
        raise AdapterError(f"frame sampling: the sample has {num_frames} frames")
    if count is not None and int(count) < 1:
        raise AdapterError(f"frame sampling: num_frames must be >= 1 or null, got {count}")
    if fps is not None and float(fps) <= 0:
        raise AdapterError(f"frame sampling: fps must be > 0 or null, got {fps}")
    indices = list(range(num_frames))
    if fps is not None and source_fps:
        step = float(source_fps) / float(fps)
        indices = sorted({min(num_frames - 1, int(round(i * step))) for i in range(max(1, math.ceil(num_frames / step)))})
    if count is not None and len(indices) > int(count):
        k = int(count)
        picks = [0] if k == 1 else [round(i * (len(indices) - 1) / (k - 1)) for i in range(k)]
        indices = [indices[p] for p in sorted(set(picks))]
    return indices


def smart_resize(height: int, width: int, factor: int = 28, min_pixels: int = 56 * 56,
                 max_pixels: int = 28 * 28 * 1280) -> tuple[int, int]:
    """(h, w) of Qwen2-VL's resize of an (height, width) image (see module docstring): multiples of
    ``factor`` px with min_pixels <= h * w <= max_pixels. Raises AdapterError when the aspect ratio
    exceeds 200 (Qwen's own limit)."""
    if max(height, width) / min(height, width) > 200:
        raise AdapterError(f"frame {height}x{width}: aspect ratio above 200 cannot be resized for the VLM")
    h = round(height / factor) * factor
    w = round(width / factor) * factor
    if h * w > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def resize(frame: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``frame`` (H, W, 3) uint8 RGB resized to size (h, w) with bicubic interpolation (what the
    Qwen2-VL image processor uses); the same array when it already has that size."""
    from PIL import Image

    if tuple(frame.shape[:2]) == tuple(size):
        return frame
    return np.asarray(Image.fromarray(frame).resize((size[1], size[0]), Image.BICUBIC), dtype=np.uint8)


def data_url(frame: np.ndarray, image_format: str = "png") -> str:
    """``frame`` (H, W, 3) uint8 RGB as a base64 data URL ("png": lossless; "jpeg": quality 95),
    the way OpenAI-compatible chat servers take images."""
    from PIL import Image

    fmt = image_format.lower()
    if fmt not in ("png", "jpeg"):
        raise AdapterError(f"vlm image_format must be png or jpeg, got {image_format!r}")
    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format=fmt.upper(), **({"quality": 95} if fmt == "jpeg" else {}))
    return f"data:image/{fmt};base64," + base64.b64encode(buf.getvalue()).decode("ascii")
