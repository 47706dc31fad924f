"""A tiny random-weight SAM 3 checkpoint in the released format (facebook/sam3: a Sam3VideoConfig
config.json, the Sam3VideoModel weights, Sam3Processor / Sam3VideoProcessor files and a CLIP
tokenizer), for the sam3 adapter's tests. Offline, a few seconds on a CPU.

The image is 112 x 112 (8 x 8 ViT patches of 14) instead of 1008; the widths the model ties to 256
(the DETR, FPN and tracker widths) stay 256 with one layer each. The detector's class scores are
biased upward (`presence_bias`, `logit_bias`) so that random weights give detections above SAM 3's
0.5 threshold, and a negative bias gives none (the no-target case).
"""
from __future__ import annotations

from pathlib import Path

SIZE = 112
PATCH = 14


def _tokenizer(directory: Path):
    """A CLIP tokenizer whose vocabulary is the byte-level alphabet (each character one token, with
    and without CLIP's end-of-word suffix): every query tokenizes, with no unknown tokens."""
    from tokenizers import pre_tokenizers
    from transformers import CLIPTokenizer

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for ch in alphabet:
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault(ch + "</w>", len(vocab))
    tok = CLIPTokenizer(vocab=vocab, merges=[])
    tok.save_pretrained(str(directory))
    return tok, len(vocab)


def config(vocab_size: int):
    """The tiny Sam3VideoConfig (detector Sam3Config + tracker Sam3TrackerVideoConfig)."""
    from transformers import Sam3VideoConfig

    grid = SIZE // PATCH
    sizes = [[grid * 4, grid * 4], [grid * 2, grid * 2], [grid, grid]]
    vit = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
           "image_size": SIZE, "patch_size": PATCH, "window_size": 4, "global_attn_indexes": [1],
           "pretrain_image_size": SIZE}
    vision = {"backbone_config": {"model_type": "sam3_vit_model", **vit}, "backbone_feature_sizes": sizes}
    detector = {"vision_config": vision,
                "text_config": {"vocab_size": vocab_size, "hidden_size": 32, "intermediate_size": 64,
                                "projection_dim": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                                "max_position_embeddings": 32, "bos_token_id": 0, "eos_token_id": 1,
                                "pad_token_id": 1},
                "geometry_encoder_config": {"num_layers": 1, "intermediate_size": 64},
                "detr_encoder_config": {"num_layers": 1, "intermediate_size": 64},
                "detr_decoder_config": {"num_layers": 1, "intermediate_size": 64, "num_queries": 8},
                "mask_decoder_config": {}}
    tracker = {"vision_config": vision,
               "prompt_encoder_config": {"image_size": SIZE, "patch_size": PATCH},
               "mask_decoder_config": {"mlp_dim": 64, "num_hidden_layers": 1, "iou_head_hidden_dim": 32},
               "image_size": SIZE, "memory_attention_num_layers": 1,
               "memory_attention_feed_forward_hidden_size": 64, "memory_attention_rope_feat_sizes": [grid, grid],
               "memory_fuser_num_layers": 1, "memory_fuser_intermediate_dim": 64, "num_maskmem": 2}
    return Sam3VideoConfig(detector_config=detector, tracker_config=tracker, low_res_mask_size=grid * 4)


def _calibrate(detector, tok, logit_bias: float, frames: list) -> None:
    """Make random weights answer like a trained detector: the pixel embedding zero-mean over the
    calibration `frames` (HxWx3 uint8; so a query's mask covers part of such a frame, not all or
    none of it), the class logits spread (query_proj x 40: some queries above 0.5, some below), the
    presence logit `logit_bias`."""
    import torch
    from transformers import Sam3ImageProcessor

    decoder = detector.mask_decoder
    seen: list = []
    hook = decoder.instance_projection.register_forward_hook(lambda mod, args, out: seen.append(args[0]))
    pixels = Sam3ImageProcessor(size={"height": SIZE, "width": SIZE})(images=frames, return_tensors="pt")["pixel_values"]
    ids = tok(["a red dog"] * len(frames), padding="max_length", max_length=32, return_tensors="pt")
    with torch.no_grad():
        detector(pixel_values=pixels, input_ids=ids["input_ids"], attention_mask=ids["attention_mask"])
        hook.remove()
        mean = seen[0].mean(dim=(0, 2, 3))
        decoder.instance_projection.bias.copy_(-decoder.instance_projection.weight[:, :, 0, 0] @ mean)
        detector.dot_product_scoring.query_proj.weight.mul_(40.0)
        head = detector.detr_decoder.presence_head.layer3
        head.weight.zero_()
        head.bias.fill_(logit_bias)


def build(directory: str | Path, frames: list, seed: int = 0, logit_bias: float = 4.0) -> Path:
    """Save the tiny checkpoint to `directory` (created) and return it. `logit_bias` is added to the
    detector's presence logit: +4 gives detections above 0.5, -8 none. `frames` (HxWx3 uint8
    arrays): the images the masks are calibrated on (_calibrate)."""
    import torch
    from transformers import Sam2VideoVideoProcessor, Sam3ImageProcessor, Sam3VideoModel, Sam3VideoProcessor

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tok, vocab_size = _tokenizer(directory)
    torch.manual_seed(seed)
    model = Sam3VideoModel(config(vocab_size)).eval()
    _calibrate(model.detector_model, tok, logit_bias, frames)
    model.save_pretrained(str(directory))
    size = {"height": SIZE, "width": SIZE}
    Sam3VideoProcessor(Sam3ImageProcessor(size=size), Sam2VideoVideoProcessor(size=size), tok,
                       target_size=SIZE).save_pretrained(str(directory))
    return directory


if __name__ == "__main__":  # python -m tests.sam3_tiny DIR: the tiny checkpoint, calibrated on the demo's images
    import sys

    from rvt_bench.core.frames import read_frame

    demo = Path(__file__).resolve().parents[1] / "demo" / "reasonseg" / "val"
    print(build(sys.argv[1], [read_frame(p) for p in sorted(demo.glob("*.jpg"))]))
