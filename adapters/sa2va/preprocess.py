"""Sa2VA's two image inputs: InternVL 448 tiles for the LLM and SAM2's 1024 square.

Source: Sa2VA d01bf3fa8ee239325a007e7b64ee2fd22578b045 projects/llava_sam2/hf/models/
modeling_sa2va_chat.py: ``dynamic_preprocess`` / ``find_closest_aspect_ratio`` (min 1, max 12
tiles of 448, plus a 448 thumbnail when there is more than one tile), ``preparing_for_generation``'s
``transformer`` (PIL resize to 448 x 448, bicubic; ToTensor; ImageNet mean/std) and ``DirectResize``
(PIL ``resize((1024, 1024))``, Pillow's default bicubic, no aspect kept). Videos: each frame is one
448 tile (no tiling) and only the first ``VIDEO_LLM_FRAMES`` go to the LLM.
"""
from __future__ import annotations

import numpy as np

IMAGE_SIZE = 448
MIN_TILES, MAX_TILES = 1, 12
VIDEO_LLM_FRAMES = 5
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def find_closest_aspect_ratio(aspect_ratio, target_ratios, width, height, image_size):
    best_diff, best = float("inf"), (1, 1)
    area = width * height
    for ratio in target_ratios:
        diff = abs(aspect_ratio - ratio[0] / ratio[1])
        if diff < best_diff:
            best_diff, best = diff, ratio
        elif diff == best_diff and area > 0.5 * image_size * image_size * ratio[0] * ratio[1]:
            best = ratio
    return best


def dynamic_preprocess(image, min_num: int = MIN_TILES, max_num: int = MAX_TILES, image_size: int = IMAGE_SIZE,
                       use_thumbnail: bool = True) -> list:
    """PIL image -> list of PIL tiles (image_size square), row-major, then the thumbnail."""
    w, h = image.size
    ratios = sorted({(i, j) for n in range(min_num, max_num + 1) for i in range(1, n + 1) for j in range(1, n + 1)
                     if min_num <= i * j <= max_num}, key=lambda x: x[0] * x[1])
    cols, rows = find_closest_aspect_ratio(w / h, ratios, w, h, image_size)
    resized = image.resize((image_size * cols, image_size * rows))
    tiles = [resized.crop(((i % cols) * image_size, (i // cols) * image_size,
                           (i % cols + 1) * image_size, (i // cols + 1) * image_size)) for i in range(cols * rows)]
    if use_thumbnail and len(tiles) != 1:
        tiles.append(image.resize((image_size, image_size)))
    return tiles


def tile_tensor(tile):
    """PIL tile -> (3, 448, 448) float32: bicubic resize to 448 (a no-op for tiles), /255, normalised."""
    import torch
    from PIL import Image

    tile = tile.convert("RGB").resize((IMAGE_SIZE, IMAGE_SIZE), Image.BICUBIC)
    x = torch.from_numpy(np.asarray(tile, dtype=np.uint8).copy()).permute(2, 0, 1).float().div(255)
    mean = torch.tensor(MEAN).view(3, 1, 1)
    std = torch.tensor(STD).view(3, 1, 1)
    return x.sub(mean).div(std)


def llm_pixels(frames: list[np.ndarray], video: bool):
    """(H, W, 3) uint8 RGB frames -> (N, 3, 448, 448) float32: an image's tiles, or one tile for each
    of a video's first VIDEO_LLM_FRAMES frames."""
    import torch
    from PIL import Image

    if video:
        tiles = [Image.fromarray(f) for f in frames[:VIDEO_LLM_FRAMES]]
    else:
        tiles = dynamic_preprocess(Image.fromarray(frames[0]))
    return torch.stack([tile_tensor(t) for t in tiles])


def sam_frame(frame: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 -> (1024, 1024, 3) uint8 (``DirectResize(1024).apply_image``)."""
    from PIL import Image

    return np.array(Image.fromarray(frame).resize((1024, 1024)))
