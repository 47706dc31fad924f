"""A tiny random-weight Sa2VA checkpoint in the released on-disk format, for tests and CPU smoke runs.

Files (as ByteDance/Sa2VA-4B lays them out, at toy sizes): config.json (``Sa2VAChatConfig`` fields,
model_type "sa2va_chat", a Qwen2 ``llm_config``, an InternViT ``vision_config``, template
"qwen_chat"), tokenizer.json + tokenizer_config.json (a byte-level BPE without merges: the 256
byte symbols, Qwen's <|endoftext|> <|im_start|> <|im_end|>, InternVL's image tokens and Sa2VA's
[SEG] <p> </p> <vp> </vp>), model.safetensors in the authors' parameter names.

Sizes: InternViT 2 layers x 32 at 448/14 (256 tokens per tile after the pixel shuffle, as the real
one); Qwen2 2 layers x 64; SAM2's Hiera trunk 8 wide with 1, 2, 2, 1 blocks per stage
(``rvt_bench_sam2_trunk``, a key only these checkpoints carry: Sa2VA always builds Hiera-L; the global-attention
block is not a stage's first, which Sa2VA's Hiera cannot run), its
neck, prompt encoder, mask decoder, memory attention and memory encoder at their real sizes.
Every tensor is drawn from numpy's RandomState(seed) (SAM2's: RandomState(seed + 1)) in sorted key order (tests/lisa_tiny.py
``_fill``), so the same seed writes the same weights everywhere (tests/data/sa2va/sa2va_reference.json
was printed from ``build_checkpoint(d, 0, **REFERENCE_BOOSTS)``). Names and shapes are our
modules' (rvt_bench.adapters.sa2va.model), which use the released names; the reference runner
loads the file into the authors' ``Sa2VAChatModel`` with ``strict=True``, which proves the layout.

    python -m tests.sa2va_tiny DIR      # writes a checkpoint for `+model=sa2va model.checkpoint=DIR`
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.lisa_tiny import _fill

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>",
           "<img>", "</img>", "<IMG_CONTEXT>", "<quad>", "</quad>", "<ref>", "</ref>", "<box>", "</box>",
           "[SEG]", "<p>", "</p>", "<vp>", "</vp>"]
VISION = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
          "image_size": 448, "patch_size": 14, "qkv_bias": True, "qk_normalization": False, "norm_type": "layer_norm",
          "layer_norm_eps": 1e-06, "hidden_act": "gelu", "use_flash_attn": False, "drop_path_rate": 0.0,
          "architectures": ["InternVisionModel"], "model_type": "intern_vit_6b", "num_channels": 3,
          "initializer_factor": 0.1, "initializer_range": 1e-10, "dropout": 0.0, "attention_dropout": 0.0}
LLM = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128,
       "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_act": "silu",
       "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": False,
       "use_sliding_window": False, "sliding_window": 32768, "max_window_layers": 2, "attention_dropout": 0.0,
       "torch_dtype": "float32", "use_cache": True, "bos_token_id": 0, "eos_token_id": 2}
SAM2_TRUNK = {"embed_dim": 8, "num_heads": 1, "stages": [1, 2, 2, 1], "global_att_blocks": [4],
              "window_pos_embed_bkg_spatial_size": [7, 7], "window_spec": [8, 4, 16, 8]}
REFERENCE_BOOSTS = {"seg_boost": -7.0, "eos_boost": -6.25}
"""The checkpoint tests/data/sa2va/sa2va_reference.json was printed from: build_checkpoint(d, 0, **REFERENCE_BOOSTS)."""
MULTI_SEG_BOOSTS = {"seg_boost": -7.0, "eos_boost": -6.0}
"""tests/data/sa2va/sa2va_reference_multiseg.json: build_checkpoint(d, 0, **MULTI_SEG_BOOSTS), 4 new tokens,
the first fixture image: Sa2VA answers "[SEG][SEG]<|im_end|>", two masks."""
VIDEO_SEG_BOOSTS = {"seg_boost": -10.0, "eos_boost": -3.5}
"""tests/data/sa2va/sa2va_reference_video.json: build_checkpoint(d, 0, **VIDEO_SEG_BOOSTS): Sa2VA answers
"[SEG]<|im_end|>" on the fixture video's first five frames (seed 0's final hidden state before the
answer projects to -0.45 on the [SEG] row and -1.02 on <|im_end|>'s, other tokens at most 2.85: [SEG]
4.47 beats <|im_end|> 3.56; after [SEG], <|im_end|> 4.28 beats [SEG] 3.05 and the rest 3.04)."""


def write_tokenizer(directory: Path) -> dict[str, int]:
    """tokenizer.json + tokenizer_config.json; returns the special tokens' ids (256 onwards)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    tok.save(str(directory / "tokenizer.json"))
    ids = {t: tok.token_to_id(t) for t in SPECIAL}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
              "bos_token": None, "model_max_length": 32768, "clean_up_tokenization_spaces": False}
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return ids


def sa2va_config(vocab_size: int) -> dict:
    """config.json of the tiny checkpoint: the released fields at tiny sizes."""
    return {"architectures": ["Sa2VAChatModel"], "model_type": "sa2va_chat", "template": "qwen_chat", "select_layer": -1,
            "downsample_ratio": 0.5, "ps_version": "v2", "force_image_size": 448, "dynamic_image_size": True,
            "use_thumbnail": True, "min_dynamic_patch": 1, "max_dynamic_patch": 12, "pad2square": False,
            "use_backbone_lora": 0, "use_llm_lora": 0, "torch_dtype": "float32",
            "vision_config": VISION, "llm_config": {**LLM, "vocab_size": vocab_size},
            "rvt_bench_sam2_trunk": SAM2_TRUNK}


def build_checkpoint(directory: str | Path, seed: int = 0, seg_boost: float = 1.0, eos_boost: float = 1.0) -> Path:
    """Write a tiny Sa2VA checkpoint to `directory` (created) and return it.

    seg_boost, eos_boost: factors the [SEG] and <|im_end|> rows of lm_head are multiplied by, so that
    greedy decoding of random weights emits [SEG] and stops (negative: seed 0's final hidden states
    point away from both rows; REFERENCE_BOOSTS: one [SEG] on the first fixture image, five on the
    second, none on the six-frame fixture video, one on its first two frames)."""
    import torch
    from safetensors.torch import save_file

    from rvt_bench.adapters.sa2va.config import Sa2VAConfig
    from rvt_bench.adapters.sa2va.model import Sa2VAModel
    from rvt_bench.adapters.sa2va.sam import build_sam2
    from rvt_bench.adapters.sa2va.weights import released_key

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ids = write_tokenizer(directory)
    config = sa2va_config(256 + len(SPECIAL))
    (directory / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    parsed = Sa2VAConfig.from_dict(config)
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in Sa2VAModel(parsed).state_dict().items()}
    shapes.update({f"grounding_encoder.sam2_model.{k}": tuple(v.shape) for k, v in build_sam2(parsed.sam2_trunk).state_dict().items()})
    rng = np.random.RandomState(seed)
    shapes = {released_key(k): v for k, v in shapes.items()}
    tensors = {k: torch.from_numpy(_fill(rng, k, shapes[k])) for k in sorted(shapes)}
    tensors["language_model.lm_head.weight"][ids["[SEG]"]] *= seg_boost
    tensors["language_model.lm_head.weight"][ids["<|im_end|>"]] *= eos_boost
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    return directory


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests.sa2va_tiny",
                                 description="Write a tiny random-weight checkpoint in Sa2VA's on-disk format "
                                             "(+model=sa2va model.checkpoint=DIR runs on a CPU).")
    ap.add_argument("dir", help="the checkpoint's directory (created)")
    ap.add_argument("--reference", action="store_true", help="with REFERENCE_BOOSTS (the parity test's checkpoint)")
    args = ap.parse_args()
    print(f"tiny Sa2VA checkpoint: {build_checkpoint(args.dir, 0, **(REFERENCE_BOOSTS if args.reference else {}))}")
