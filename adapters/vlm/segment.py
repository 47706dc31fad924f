"""VLM boxes (and points) -> masks through SAM2, as in the "VLM + SAM" pipelines of Seg-Zero
(arXiv 2503.06520) and VisionReasoner (arXiv 2505.12081): the VLM locates, SAM2 delineates.

The twin's SAM2 backends (adapters/twin/backends/sam2_hf.py, sam2_pkg.py) are reused:
- an image: the image predictor, one prompt per detection (its box, plus its point as a positive
  click when every detection has one), the masks' union;
- a video: the detections on the key frame (the frame the first detection names) prompt the video
  predictor, which propagates them forward and backward through every frame of the sample; the
  result per frame is the union of the tracks. Points are not used for videos (the video prompts
  of both backends take boxes).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rvt_bench.adapters.vlm.coords import Detection
from rvt_bench.core import masks as mask_io
from rvt_bench.core.types import RLE


def image_masks(sam2: Any, frame: np.ndarray, dets: list[Detection]) -> list[RLE | None]:
    """[RLE or None] for one (H, W, 3) uint8 frame from detections in its pixels; [None] when
    there is no detection or SAM2 returns empty masks."""
    if not dets:
        return [None]
    points = [d.point for d in dets] if all(d.point is not None for d in dets) else None
    masks = sam2.segment_image(frame, [d.box for d in dets], points)
    union = np.asarray(masks, dtype=bool).any(axis=0)
    return [mask_io.encode(union) if union.any() else None]


def video_masks(sam2: Any, frames: list[np.ndarray], key_frame: int, dets: list[Detection]) -> list[RLE | None]:
    """Per frame of ``frames`` (all the sample's frames, full size), the union of the SAM2 tracks
    prompted by ``dets`` (boxes in frame pixels) on ``key_frame``; None where no track is visible."""
    if not dets:
        return [None] * len(frames)
    tracks = sam2.segment(frames, key_frame, boxes=[d.box for d in dets])
    out: list[RLE | None] = []
    for t in range(len(frames)):
        union = np.zeros(frames[0].shape[:2], dtype=bool)
        for track in tracks:
            union |= np.asarray(track.masks[t], dtype=bool)
        out.append(mask_io.encode(union) if union.any() else None)
    return out
