"""The images SAM 3 Agent shows its MLLM: the current masks drawn on the raw image, each with its
1-based number (segment_phrase's and examine_each_mask's results), and one mask alone plus a zoomed
crop around it (examine_each_mask's per-mask request).

Not the repository's renderer (sam3/agent/viz.py visualize: helpers/visualizer.py, a detectron2-style
Visualizer, and helpers/zoom_in.py): the same content (mask alpha 0.15 as there, a colour per mask,
the number at the mask) drawn with PIL. A model tuned on the repository's pictures may read these
slightly differently; docs/models.md says so.
"""
from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from rvt_bench.adapters.sam3_agent.loop import Detections
from rvt_bench.adapters.sam3_agent.prompts import ImageRef

ALPHA = 0.15  # visualize(mask_alpha=0.15)
PALETTE = [(230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48), (145, 30, 180),
           (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212), (0, 128, 128), (170, 110, 40)]
ZOOM_MARGIN = 0.5  # the crop: the mask's box grown by half its size on each side
ZOOM_MIN_SIDE = 256  # the crop is enlarged to at least this many pixels on its short side


def _overlay(frame: np.ndarray, masks: np.ndarray, numbers: list[int], colours: list[tuple]) -> Image.Image:
    out = frame.astype(np.float32).copy()
    for mask, colour in zip(masks, colours):
        out[mask] = (1 - ALPHA) * out[mask] + ALPHA * np.array(colour, np.float32)
        edge = mask & ~_eroded(mask)
        out[edge] = colour
    image = Image.fromarray(out.clip(0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for mask, number, colour in zip(masks, numbers, colours):
        ys, xs = np.nonzero(mask)
        if not len(xs):
            continue
        x, y = int(np.median(xs)), int(np.median(ys))
        label = str(number)
        box = draw.textbbox((x, y), label)
        draw.rectangle((box[0] - 2, box[1] - 2, box[2] + 2, box[3] + 2), fill=(0, 0, 0))
        draw.text((x, y), label, fill=colour)
    return image


def _eroded(mask: np.ndarray) -> np.ndarray:
    m = mask.copy()
    m[1:] &= mask[:-1]
    m[:-1] &= mask[1:]
    m[:, 1:] &= mask[:, :-1]
    m[:, :-1] &= mask[:, 1:]
    return m


def all_masks(frame: np.ndarray, detections: Detections, label: str) -> ImageRef:
    """Every mask of `detections` on `frame` ((H, W, 3) uint8 RGB), numbered 1..N."""
    n = len(detections)
    image = _overlay(frame, detections.masks, list(range(1, n + 1)), [PALETTE[i % len(PALETTE)] for i in range(n)])
    return ImageRef(label, np.asarray(image))


def one_mask(frame: np.ndarray, detections: Detections, i: int) -> tuple[ImageRef, ImageRef]:
    """Mask i (0-based) alone on `frame`, numbered i + 1, and a crop around it enlarged."""
    colour = PALETTE[i % len(PALETTE)]
    whole = np.asarray(_overlay(frame, detections.masks[i:i + 1], [i + 1], [colour]))
    h, w = frame.shape[:2]
    ys, xs = np.nonzero(detections.masks[i])
    if len(xs):
        x0, x1, y0, y1 = xs.min(), xs.max() + 1, ys.min(), ys.max() + 1
        mx, my = int((x1 - x0) * ZOOM_MARGIN) + 1, int((y1 - y0) * ZOOM_MARGIN) + 1
        x0, x1, y0, y1 = max(0, x0 - mx), min(w, x1 + mx), max(0, y0 - my), min(h, y1 + my)
    else:
        x0, x1, y0, y1 = 0, w, 0, h
    crop = Image.fromarray(whole[y0:y1, x0:x1])
    scale = max(1.0, ZOOM_MIN_SIDE / max(1, min(crop.size)))
    crop = crop.resize((max(1, round(crop.size[0] * scale)), max(1, round(crop.size[1] * scale))), Image.BILINEAR)
    return ImageRef(f"mask {i + 1}", whole), ImageRef(f"zoom {i + 1}", np.asarray(crop))
