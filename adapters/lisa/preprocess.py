"""LISA's two image inputs: CLIP's 224 crop for the LLM and SAM's 1024 padded square.

Sources (LISA 3cb2d4301f1af4691bd4f3938335ef06e76f155a): chat.py and utils/dataset.py
``ValDataset``: ``CLIPImageProcessor.preprocess`` of the RGB array; ``ResizeLongestSide(1024)
.apply_image`` (model/segment_anything/utils/transforms.py: torchvision's PIL resize, bilinear, to
the longest side 1024 with ``int(x * scale + 0.5)``), then ``preprocess``: (x - mean) / std with
SAM's pixel mean/std, zero-padded right and bottom to 1024 x 1024.
"""
from __future__ import annotations

import numpy as np

SAM_SIZE = 1024
PIXEL_MEAN = (123.675, 116.28, 103.53)
PIXEL_STD = (58.395, 57.12, 57.375)


def longest_side_shape(height: int, width: int, target: int = SAM_SIZE) -> tuple[int, int]:
    """``ResizeLongestSide.get_preprocess_shape``: (H, W) scaled so the longer side is `target`."""
    scale = target * 1.0 / max(height, width)
    return int(height * scale + 0.5), int(width * scale + 0.5)


def sam_input(image: np.ndarray):
    """(H, W, 3) uint8 RGB -> ((1, 3, 1024, 1024) float32 tensor, (h, w) resized size before padding)."""
    import torch
    import torch.nn.functional as F
    from PIL import Image

    h, w = longest_side_shape(*image.shape[:2])
    resized = np.array(Image.fromarray(image).resize((w, h), Image.BILINEAR))
    x = torch.from_numpy(resized).permute(2, 0, 1).contiguous().float()
    x = (x - torch.tensor(PIXEL_MEAN).view(-1, 1, 1)) / torch.tensor(PIXEL_STD).view(-1, 1, 1)
    x = F.pad(x, (0, SAM_SIZE - w, 0, SAM_SIZE - h))
    return x.unsqueeze(0), (h, w)


def clip_input(image: np.ndarray, processor):
    """(H, W, 3) uint8 RGB -> (1, 3, 224, 224) float32 tensor by `processor`: transformers'
    CLIPImageProcessorPil, which equals LISA's 4.31 CLIPImageProcessor exactly (PIL bicubic resize
    of the short side to 224, centre crop, rescale, normalise)."""
    return processor.preprocess(image, return_tensors="pt")["pixel_values"][:1]


def postprocess_masks(low_res, input_size: tuple[int, int], original_size: tuple[int, int]):
    """``Sam.postprocess_masks`` (model/segment_anything/modeling/sam.py as LISA calls it): float32
    bilinear upsampling (align_corners=False) of (N, 1, 256, 256) logits to 1024 x 1024, crop to
    `input_size`, bilinear resize to `original_size`. Returns (N, 1, H, W) float32 logits."""
    import torch.nn.functional as F

    masks = F.interpolate(low_res.float(), (SAM_SIZE, SAM_SIZE), mode="bilinear", align_corners=False)
    masks = masks[..., : input_size[0], : input_size[1]]
    return F.interpolate(masks, tuple(original_size), mode="bilinear", align_corners=False)
