"""SAM 3 as SAM 3 Agent's segment_phrase tool (facebookresearch/sam3 sam3/agent/client_sam3.py at
99d02f2), on the sam3 adapter's model (rvt_bench.adapters.sam3.adapter.Sam3Adapter.detect: the
detections above its threshold, 0.5 as the repository's agent notebook builds Sam3Processor).

call_sam_service's steps on those detections, in its order:
1. remove_overlapping_masks (helpers/mask_overlap_removal.py, iom_thresh 0.3): with 2 or more
   masks, greedily by score (highest first) keep a mask unless its intersection over the smaller
   area with a kept mask exceeds 0.3; the kept keep their order;
2. sort by score, highest first (Python's sort: ties keep their order);
3. drop masks whose COCO RLE `counts` string has 4 characters or fewer (an empty mask's).
A SAM 3 failure is an AdapterError (the repository prints it and goes on with a stale or missing
outputs file, which then fails the loop).
"""
from __future__ import annotations

import numpy as np

from rvt_bench.adapters.sam3_agent.loop import Detections
from rvt_bench.core import masks as mask_io

IOM_THRESHOLD = 0.3  # remove_overlapping_masks(iom_thresh=0.3)
MIN_RLE_CHARS = 5  # client_sam3: `if len(rle) > 4`


def remove_overlapping(masks: np.ndarray, scores: list[float]) -> list[int]:
    """Positions of the masks remove_overlapping_masks keeps, ascending. masks: (N, H, W) bool."""
    n = len(scores)
    if n <= 1:
        return list(range(n))
    flat = masks.reshape(n, -1)
    area = flat.sum(axis=1)
    kept: list[int] = []
    for i in sorted(range(n), key=lambda k: float(scores[k]), reverse=True):
        if kept:
            inter = (flat[kept] & flat[i]).sum(axis=1)
            iom = inter.astype(np.float32) / (np.maximum(np.minimum(area[kept], area[i]), 1).astype(np.float32) + 1e-8)
            if np.any(iom > IOM_THRESHOLD):
                continue
        kept.append(i)
    return sorted(kept)


def postprocess(masks: np.ndarray, boxes: list, scores: list[float]) -> Detections:
    """client_sam3.call_sam_service's steps 1-3 (module docstring) on SAM 3's detections."""
    keep = remove_overlapping(masks, scores)
    keep = sorted(keep, key=lambda k: scores[k], reverse=True)
    keep = [k for k in keep if len(mask_io.encode(masks[k])["counts"]) >= MIN_RLE_CHARS]
    return Detections(masks[keep] if keep else masks[:0], [boxes[k] for k in keep], [float(scores[k]) for k in keep], keep)


def segment_phrase(sam3, frame: np.ndarray, text_prompt: str) -> Detections:
    """SAM 3 (a Sam3Adapter) on `frame` ((H, W, 3) uint8 RGB) with `text_prompt`, post-processed."""
    masks, boxes, scores, _ = sam3.detect(frame, text_prompt)
    return postprocess(np.asarray(masks, bool), boxes, scores)
