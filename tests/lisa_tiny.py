"""A tiny random-weight LISA checkpoint in the released on-disk format, for tests and CPU smoke runs.

Files (as xinlai/LISA-7B-v1 lays them out, at toy sizes): config.json (LlavaConfig fields,
model_type "llava"), tokenizer.model (a 400-piece LLaMA-style sentencepiece BPE with byte
fallback, tests/data/lisa/tiny_llama_sp.model), added_tokens.json (<im_patch>, <im_start>,
<im_end>, [SEG]), special_tokens_map.json, tokenizer_config.json (LlamaTokenizer, transformers
4.31 style), pytorch_model-0000i-of-00002.bin shards + pytorch_model.bin.index.json in LISA's
parameter names, and clip/ (a tiny CLIP vision tower with openai's preprocessor_config.json),
named by config.vision_tower = "clip".

Sizes: LLaMA 2 layers x 64; CLIP 2 layers x 32 at 224/14 (256 patch tokens, as ViT-L/14);
SAM image encoder 2 blocks x 32 (``sam_vision_config``; LISA's real one is ViT-H), SAM prompt
encoder and mask decoder at their real sizes (LISA's build_sam.py fixes them).
Every tensor is drawn from numpy's RandomState(seed) in sorted key order, so the same seed
writes the same weights on every machine (the LISA reference outputs in tests/data/lisa/ were
printed from seed 0). The parameter names come from LISA's own key list
(tests/data/lisa/lisa-7b-v1.keys.json), cut to the tiny depths; shapes from our modules.

    python -m tests.lisa_tiny DIR      # writes a checkpoint for `+model=lisa model.checkpoint=DIR`
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data" / "lisa"
SP_MODEL = DATA / "tiny_llama_sp.model"
SP_PIECES = 400
ADDED_7B = ["<im_patch>", "<im_start>", "<im_end>", "[SEG]"]   # LLaVA-7B-v1-1 tokens, then LISA's [SEG]
ADDED_13B = ["[SEG]", "<im_start>", "<im_end>"]                # LLaMA-2 chat base: LISA adds [SEG] first
LLAMA = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 4, "max_position_embeddings": 2048, "rms_norm_eps": 1e-06}
SAM_VISION = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "global_attn_indexes": [1], "mlp_dim": 128}
CLIP = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
        "image_size": 224, "patch_size": 14, "projection_dim": 32}
REFERENCE_BOOSTS = {"seg_boost": 4.0, "eos_boost": 5.5}
"""Boosts under which greedy decoding of seed 0 emits [SEG] and stops (adapter and report tests)."""
PARITY_CHECKPOINT = {"seg_boost": 4.0, "eos_boost": 5.5, "sam_norms": True, "mask_gain": 4.0}
"""The checkpoint tests/data/lisa/lisa_reference.json was printed from: build_checkpoint(d, 0, **PARITY_CHECKPOINT)."""
V0_SEED = 24
V0_PARITY_CHECKPOINT = {"seg_boost": 3.2, "eos_boost": 5.5, "sam_norms": True, "mask_gain": 4.0}
"""The v0 checkpoint tests/data/lisa/lisa_v0_reference.json was printed from:
build_v0_checkpoint(d, V0_SEED, **V0_PARITY_CHECKPOINT). Seed 24 was chosen (seeds 0-30 scanned with our
port) as the first whose masks are neither empty nor full on both fixture images in both paths (seed 0's
bench mask is 99.9% foreground) and whose generated answers hold a [SEG] (one each, at every
seg_boost from 2.6 to 3.6: far from a tie, so bfloat16 decodes the same tokens)."""
SAM_LAYERNORM2D = ("image_encoder.neck.1.weight", "image_encoder.neck.3.weight", "mask_decoder.output_upscaling.1.weight")
CLIP_PREPROCESSOR = {  # openai/clip-vit-large-patch14 preprocessor_config.json
    "crop_size": 224, "do_center_crop": True, "do_normalize": True, "do_resize": True,
    "feature_extractor_type": "CLIPFeatureExtractor", "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711], "resample": 3, "size": 224}


def _token(content: str) -> dict:
    return {"__type": "AddedToken", "content": content, "lstrip": False, "normalized": True, "rstrip": False, "single_word": False}


def write_tokenizer(directory: Path, added: list[str]) -> dict[str, int]:
    """The LLaMA tokenizer files LISA's checkpoints carry; returns the added tokens' ids."""
    shutil.copyfile(SP_MODEL, directory / "tokenizer.model")
    ids = {tok: SP_PIECES + i for i, tok in enumerate(added)}
    (directory / "added_tokens.json").write_text(json.dumps(ids, indent=2))
    plain = {k: {kk: vv for kk, vv in _token(v).items() if kk != "__type"} for k, v in
             {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}.items()}
    (directory / "special_tokens_map.json").write_text(json.dumps({**plain, "pad_token": "<unk>"}, indent=2))
    config = {"add_bos_token": True, "add_eos_token": False, "bos_token": _token("<s>"), "clean_up_tokenization_spaces": False,
              "eos_token": _token("</s>"), "model_max_length": 512, "pad_token": None, "padding_side": "right",
              "sp_model_kwargs": {}, "tokenizer_class": "LlamaTokenizer", "unk_token": _token("<unk>")}
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return ids


def lisa_config(vocab_size: int, vision_tower: str = "clip", clip: dict | None = None) -> dict:
    """config.json of the tiny checkpoint: the released 7B config's fields at tiny sizes."""
    base = json.loads((DATA / "lisa-7b-v1.config.json").read_text())
    return {**base, **LLAMA, "vocab_size": vocab_size, "mm_hidden_size": (clip or CLIP)["hidden_size"],
            "vision_tower": vision_tower, "mm_vision_tower": vision_tower, "torch_dtype": "float32",
            "sam_vision_config": SAM_VISION}


def _fill(rng: np.random.RandomState, key: str, shape: tuple[int, ...]) -> np.ndarray:
    """Random values with fan-in scaling (norm weights near 1), float32."""
    n = rng.standard_normal(shape).astype(np.float32)
    if len(shape) == 1:
        return 1.0 + 0.1 * n if re.search(r"norm[^.]*\.weight$|layernorm\.weight$|layer_norm\d?\.weight$", key) else 0.1 * n
    fan_in = int(np.prod(shape[1:]))
    return n / np.float32(np.sqrt(fan_in))


def _lisa_keys(n_layers: int, n_blocks: int) -> list[str]:
    """LISA's own parameter names (tests/data/lisa/lisa-7b-v1.keys.json) for the tiny depths."""
    keys = json.loads((DATA / "lisa-7b-v1.keys.json").read_text())["keys"]

    def keep(k: str) -> bool:
        m = re.match(r"model\.layers\.(\d+)\.", k) or re.match(r"model\.visual_model\.image_encoder\.blocks\.(\d+)\.", k)
        return m is None or int(m.group(1)) < (n_layers if k.startswith("model.layers.") else n_blocks)
    return sorted(k for k in keys if keep(k))


def write_clip(directory: Path, seed: int, clip: dict | None = None) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import CLIPVisionConfig, CLIPVisionModel

    directory.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["CLIPVisionModel"], "model_type": "clip_vision_model", "hidden_act": "quick_gelu",
              "layer_norm_eps": 1e-05, "attention_dropout": 0.0, "initializer_factor": 1.0, "initializer_range": 0.02,
              "num_channels": 3, "torch_dtype": "float32", **(clip or CLIP)}
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    (directory / "preprocessor_config.json").write_text(json.dumps(CLIP_PREPROCESSOR, indent=2))
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in CLIPVisionModel(CLIPVisionConfig(**(clip or CLIP))).state_dict().items()
                  if not k.endswith("position_ids")}
    rng = np.random.RandomState(seed + 1)
    # "vision_model." names: the on-disk format of openai's CLIP checkpoints and of transformers 4.31
    save_file({f"vision_model.{k}": torch.from_numpy(_fill(rng, k, shapes[k])) for k in sorted(shapes)},
              str(directory / "model.safetensors"), metadata={"format": "pt"})


def build_checkpoint(directory: str | Path, seed: int = 0, added: list[str] | None = None, seg_boost: float = 1.0,
                     eos_boost: float = 1.0, sam_norms: bool = False, mask_gain: float = 1.0, clip: dict | None = None) -> Path:
    """Write a tiny LISA checkpoint to `directory` (created) and return it.

    added: the tokenizer's added tokens in id order (ADDED_7B: [SEG] = 403, as 32003 in LISA-7B-v1;
    ADDED_13B: [SEG] = 400, as 32000 in LISA-13B-llama2-v1). seg_boost, eos_boost: factors the [SEG] and
    </s> rows of lm_head are multiplied by, so that greedy decoding of random weights emits [SEG]
    and stops (REFERENCE_BOOSTS: on the fixture images one answer holds two [SEG], one none).
    sam_norms: draw SAM's LayerNorm2d weights (SAM_LAYERNORM2D: the neck's two, the mask decoder's
    upscaling one; _fill's name rule misses them) as 1 + 0.1 n like every other norm weight, so the
    upscaled mask features vary across pixels (without it the mask logits are about constant, std ~5e-4).
    mask_gain: factor on the mask hypernetwork's output layer (mask token 0, the one LISA decodes), so
    the logits span about +-2..5 (PARITY_CHECKPOINT: 26-42% of the fixture pixels positive).
    clip: the CLIP vision tower's sizes (default CLIP).
    """
    import torch

    from rvt_bench.adapters.lisa.config import LisaConfig
    from rvt_bench.adapters.lisa.model import LisaModel
    from rvt_bench.adapters.lisa.weights import our_key

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ids = write_tokenizer(directory, added or ADDED_7B)
    config = lisa_config(SP_PIECES + len(ids), clip=clip)
    (directory / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    (directory / "generation_config.json").write_text(json.dumps(
        {"_from_model_config": True, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "transformers_version": "4.31.0"}, indent=2))
    write_clip(directory / "clip", seed, clip)

    with torch.device("meta"):
        ours = {k: tuple(v.shape) for k, v in LisaModel(LisaConfig.from_dict(config)).state_dict().items()}
    head_dim = LLAMA["hidden_size"] // LLAMA["num_attention_heads"]
    rng = np.random.RandomState(seed)
    tensors = {}
    for key in _lisa_keys(LLAMA["num_hidden_layers"], SAM_VISION["num_hidden_layers"]):
        if key.endswith("rotary_emb.inv_freq"):  # as transformers 4.31's LlamaRotaryEmbedding stores it
            tensors[key] = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
            continue
        values = _fill(rng, key, ours[our_key(key)])
        if sam_norms and key.endswith(SAM_LAYERNORM2D):  # 0.1 * n -> 1 + 0.1 * n, as _fill draws norm weights
            values = np.float32(1.0) + values
        tensors[key] = torch.from_numpy(values)
    for layer in ("weight", "bias"):
        tensors[f"model.visual_model.mask_decoder.output_hypernetworks_mlps.0.layers.2.{layer}"] *= mask_gain
    tensors["lm_head.weight"][ids["[SEG]"]] *= seg_boost
    tensors["lm_head.weight"][2] *= eos_boost  # </s>
    names = sorted(tensors)
    shards = [names[: len(names) // 2], names[len(names) // 2:]]
    weight_map = {}
    for i, shard in enumerate(shards, 1):
        filename = f"pytorch_model-{i:05d}-of-{len(shards):05d}.bin"
        torch.save({k: tensors[k] for k in shard}, directory / filename)
        weight_map.update({k: filename for k in shard})
    total = int(sum(t.numel() * t.element_size() for t in tensors.values()))
    (directory / "pytorch_model.bin.index.json").write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    return directory


CLIP_V0 = {**CLIP, "hidden_size": 1024, "intermediate_size": 128, "num_attention_heads": 8}
"""The v0 checkpoint's CLIP: 1024 wide as ViT-L/14, because LISA @0e26916's llava.py projects a
hard-coded zeros(256, 1024) "dummy" feature through mm_projector on every forward."""
ADDED_V0 = ["[SEG]", "<im_patch>", "<im_start>", "<im_end>"]
"""LISA @0e26916's run-time order (chat.py adds [SEG], then LISA.__init__ the three image tokens)."""
V0_DROPPED_CONFIG = ("out_dim", "vision_tower", "seg_token_idx", "train_mask_decoder", "tune_mm_mlp_adapter",
                     "mm_vision_select_feature", "mm_projector_type", "image_aspect_ratio", "image_grid_pinpoints",
                     "mm_use_im_patch_token", "freeze_mm_mlp_adapter")


def build_v0_checkpoint(directory: str | Path, seed: int = 0, **kwargs) -> Path:
    """Write a tiny checkpoint in the layout of LISA's v0 models (xinlai/LISA-13B-llama2-v0), which
    LISA's legacy code (0e26916) loads: and return it.

    The tensors are build_checkpoint(directory, seed, ADDED_V0, clip=CLIP_V0, **kwargs)'s, laid out as chat.py @0e26916
    reads them: a LLaVA language model (config.json model_type "llava" with use_mm_proj, mm_vision_tower
    "clip", vocab_size = the tokenizer's 400 pieces; no added_tokens.json: LISA adds its tokens at run
    time, in ADDED_V0's order, so the ids are build_checkpoint's; pytorch_model-0000i-of-00002.bin with
    ``model.*``, ``model.mm_projector.*`` and ``lm_head.*``, the embedding rows of the 400 pieces only),
    ``pytorch_model-visual_model.bin`` (``visual_model.*``) and ``pytorch_model-text_hidden_fcs.bin``
    (``text_hidden_fcs.0.*`` and the full 404-row ``lm.model.embed_tokens.weight`` / ``lm.lm_head.weight``,
    which replace the resized tables under strict=False). That the released text_hidden_fcs file holds
    those two tables is inferred from its size (1.46 GB: two 32004 x 5120 float32 tables and the fcs),
    not read; the port loads the layout either way (rvt_bench.adapters.lisa.legacy.load_into).
    """
    import torch

    directory = build_checkpoint(directory, seed, added=ADDED_V0, clip=CLIP_V0, **kwargs)
    index = json.loads((directory / "pytorch_model.bin.index.json").read_text())
    tensors = {}
    for filename in sorted(set(index["weight_map"].values())):
        tensors.update(torch.load(directory / filename, weights_only=True))
        (directory / filename).unlink()
    visual = {"visual_model." + k[len("model.visual_model."):]: v for k, v in tensors.items() if k.startswith("model.visual_model.")}
    extra = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.text_hidden_fcs.")}
    extra.update({"lm." + k: tensors[k].clone() for k in ("model.embed_tokens.weight", "lm_head.weight")})
    lm = {k: v for k, v in tensors.items() if not k.startswith(("model.visual_model.", "model.text_hidden_fcs."))}
    for k in ("model.embed_tokens.weight", "lm_head.weight"):
        lm[k] = lm[k][:SP_PIECES].clone()
    torch.save(visual, directory / "pytorch_model-visual_model.bin")
    torch.save(extra, directory / "pytorch_model-text_hidden_fcs.bin")
    names = sorted(lm)
    shards = [names[: len(names) // 2], names[len(names) // 2:]]
    weight_map = {}
    for i, shard in enumerate(shards, 1):
        filename = f"pytorch_model-{i:05d}-of-{len(shards):05d}.bin"
        torch.save({k: lm[k] for k in shard}, directory / filename)
        weight_map.update({k: filename for k in shard})
    total = int(sum(t.numel() * t.element_size() for t in lm.values()))
    (directory / "pytorch_model.bin.index.json").write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    (directory / "added_tokens.json").unlink()
    config = json.loads((directory / "config.json").read_text())
    config = {k: v for k, v in config.items() if k not in V0_DROPPED_CONFIG}
    config.update(vocab_size=SP_PIECES, use_mm_proj=True, mm_vision_tower="clip", mm_vision_select_layer=-2,
                  mm_use_im_start_end=True, architectures=["LlavaLlamaForCausalLM"], model_type="llava")
    (directory / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    return directory


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests.lisa_tiny",
                                 description="Write a tiny random-weight checkpoint in LISA's on-disk format "
                                             "(+model=lisa model.checkpoint=DIR runs on a CPU).")
    ap.add_argument("dir", help="the checkpoint's directory (created)")
    print(f"tiny LISA checkpoint: {build_checkpoint(ap.parse_args().dir)}")
