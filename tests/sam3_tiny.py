"""A tiny random-weight SAM 3 checkpoint in the released format (facebook/sam3: a Sam3VideoConfig
config.json, the Sam3VideoModel weights, Sam3Processor / Sam3VideoProcessor files and a CLIP
tokenizer), for the sam3 adapter's tests. Offline, a few seconds on a CPU.

The model is rvt_bench.adapters.sam3.tiny's (112 px input), its weights calibrated (_calibrate) so
that random weights give detections above SAM 3's 0.5 threshold with masks that cover part of a
frame, and a negative presence logit gives none (the no-target case).
"""
from __future__ import annotations

from pathlib import Path

from rvt_bench.adapters.sam3 import tiny

REPO = Path(__file__).resolve().parents[1]


def calibration_frames() -> list:
    """The demo's images and each clip's first frame (HxWx3 uint8): the frames build() calibrates on."""
    from rvt_bench.core.frames import read_frame

    images = sorted((REPO / "demo" / "reasonseg" / "val").glob("*.jpg"))
    clips = sorted(p for p in (REPO / "demo" / "revos" / "JPEGImages").rglob("*") if p.is_dir() and any(p.glob("*.jpg")))
    return [read_frame(p) for p in images] + [read_frame(sorted(c.glob("*.jpg"))[0]) for c in clips]


def _calibrate(detector, tok, frames: list) -> None:
    """Make random masks look like a trained model's: the pixel embedding zero-mean over the
    calibration `frames` (HxWx3 uint8), so that a query's mask covers part of such a frame, not all
    or none of it (the scores are tiny.model's)."""
    import torch
    from transformers import Sam3ImageProcessor

    decoder = detector.mask_decoder
    seen: list = []
    hook = decoder.instance_projection.register_forward_hook(lambda mod, args, out: seen.append(args[0]))
    pixels = Sam3ImageProcessor(size={"height": tiny.SIZE, "width": tiny.SIZE})(images=frames, return_tensors="pt")["pixel_values"]
    ids = tok(["a red dog"] * len(frames), padding="max_length", max_length=32, return_tensors="pt")
    with torch.no_grad():
        detector(pixel_values=pixels, input_ids=ids["input_ids"], attention_mask=ids["attention_mask"])
        hook.remove()
        mean = seen[0].mean(dim=(0, 2, 3))
        decoder.instance_projection.bias.copy_(-decoder.instance_projection.weight[:, :, 0, 0] @ mean)


def build(directory: str | Path, frames: list, seed: int = 0, logit_bias: float = 4.0) -> Path:
    """Save the tiny checkpoint to `directory` (created) and return it. `logit_bias`: the detector's
    presence logit (tiny.model): +4 gives detections above 0.5, -8 none. `frames` (HxWx3 uint8
    arrays): the images the masks are calibrated on (_calibrate)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model, proc = tiny.model(seed, presence_logit=logit_bias)
    _calibrate(model.detector_model, proc.tokenizer, frames)
    model.save_pretrained(str(directory))
    proc.save_pretrained(str(directory))
    return directory


if __name__ == "__main__":  # python -m tests.sam3_tiny DIR: the tiny checkpoint, calibrated on the demo's images
    import sys

    from rvt_bench.core.frames import read_frame

    demo = Path(__file__).resolve().parents[1] / "demo" / "reasonseg" / "val"
    print(build(sys.argv[1], [read_frame(p) for p in sorted(demo.glob("*.jpg"))]))
