"""A tiny random-weight SAM 3 (Sam3VideoModel + Sam3VideoProcessor) built from a small config, for
offline runs and tests (conf/perception/segmenter/sam3_tiny.yaml, tests/sam3_tiny.py): 112 x 112
input (8 x 8 ViT patches of 14) instead of 1008; the widths the model ties to 256 (DETR, FPN,
tracker) stay 256 with one layer each; a CLIP tokenizer whose vocabulary is the byte-level alphabet.
Meaningless outputs."""
from __future__ import annotations

from typing import Any

SIZE = 112
PATCH = 14


def tokenizer() -> Any:
    """A CLIPTokenizer with the byte-level alphabet as vocabulary (each character one token, with
    and without CLIP's end-of-word suffix): every query tokenizes, with no unknown token."""
    from tokenizers import pre_tokenizers
    from transformers import CLIPTokenizer

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault(ch + "</w>", len(vocab))
    return CLIPTokenizer(vocab=vocab, merges=[])


def config(vocab_size: int) -> Any:
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
                                "max_position_embeddings": 32, "hidden_act": "gelu", "bos_token_id": 0, "eos_token_id": 1,
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
               "memory_fuser_num_layers": 1, "num_maskmem": 2}
    return Sam3VideoConfig(detector_config=detector, tracker_config=tracker, low_res_mask_size=grid * 4)


def processor(tok: Any) -> Any:
    """The Sam3VideoProcessor at SIZE px around `tok` (its image processor also serves Sam3Processor)."""
    from transformers import Sam2VideoVideoProcessor, Sam3ImageProcessor, Sam3VideoProcessor

    size = {"height": SIZE, "width": SIZE}
    half = [0.5, 0.5, 0.5]  # SAM 3's normalization on video frames too (transformers' convert_sam3_video_to_hf.py)
    return Sam3VideoProcessor(Sam3ImageProcessor(size=size), Sam2VideoVideoProcessor(size=size, image_mean=half, image_std=half),
                              tok, target_size=SIZE)


def model(seed: int = 0, presence_logit: float = 4.0) -> tuple[Any, Any]:
    """(Sam3VideoModel with seeded random weights, in eval mode; its Sam3VideoProcessor). So that
    random weights detect something, the class logits are spread (query_proj x 40: some queries
    above 0.5, some below) and the presence logit is `presence_logit` whatever the input (+4:
    detections above SAM 3's thresholds; -8: none)."""
    import torch
    from transformers import Sam3VideoModel

    tok = tokenizer()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = Sam3VideoModel(config(len(tok))).eval()
    detector = net.detector_model
    with torch.no_grad():
        detector.dot_product_scoring.query_proj.weight.mul_(40.0)
        head = detector.detr_decoder.presence_head.layer3
        head.weight.zero_()
        head.bias.fill_(float(presence_logit))
        # one Gaussian matrix for the tracker's prompt and image positional encodings, as in the
        # released checkpoint (transformers' converter copies Meta's one matrix into both)
        tracker = net.tracker_model
        tracker.prompt_encoder.shared_embedding.positional_embedding.copy_(tracker.shared_image_embedding.positional_embedding)
    return net, processor(tok)
