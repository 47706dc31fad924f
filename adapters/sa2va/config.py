"""A Sa2VA checkpoint's config.json (``Sa2VAChatConfig``, model_type "sa2va_chat") read into the
parts our modules are built from. Only Qwen2 language models are ported (Sa2VA-1B and -4B,
InternVL2.5 on Qwen2.5); InternLM2 (-8B, -26B) and Phi-3 checkpoints are refused with one line.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rvt_bench.adapters.checkpoint import read_config_json
from rvt_bench.core.types import AdapterError

SAM2_HIERA_L = {"embed_dim": 144, "num_heads": 2, "stages": [2, 6, 36, 4], "global_att_blocks": [23, 33, 43],
                "window_pos_embed_bkg_spatial_size": [7, 7], "window_spec": [8, 4, 16, 8]}
"""The SAM2 image encoder trunk Sa2VA always builds (sam2.py ``SAM2.build_image_encoder``: Hiera-L).
A config.json may override it with ``rvt_bench_sam2_trunk``; the released ones have no such key,
only our tiny test checkpoints do."""

VIT_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "image_size",
            "patch_size", "qkv_bias", "qk_normalization", "norm_type", "layer_norm_eps", "hidden_act")


@dataclass
class Sa2VAConfig:
    """The fields of a Sa2VA config.json this port uses.

    vision:  InternVisionConfig values (VIT_KEYS). llm: Qwen2Config keyword arguments.
    template: the chat template name ("qwen_chat"). select_layer: ViT hidden state (-1: last).
    downsample_ratio: pixel-shuffle ratio (0.5: 1024 patches -> 256 tokens). ps_version: "v2".
    force_image_size: tile size (448). sam2_trunk: Hiera sizes (SAM2_HIERA_L unless overridden).
    """

    vision: dict[str, Any]
    llm: dict[str, Any]
    template: str = "qwen_chat"
    select_layer: int = -1
    downsample_ratio: float = 0.5
    ps_version: str = "v2"
    force_image_size: int | None = None
    sam2_trunk: dict[str, Any] = field(default_factory=lambda: dict(SAM2_HIERA_L))

    @property
    def image_size(self) -> int:
        return int(self.force_image_size or self.vision["image_size"])

    @property
    def num_image_token(self) -> int:
        """Tokens per 448 tile: (448 / 14)^2 * 0.5^2 = 256."""
        return int((self.image_size // int(self.vision["patch_size"])) ** 2 * self.downsample_ratio ** 2)

    @classmethod
    def from_json(cls, path: str | Path) -> "Sa2VAConfig":
        """Read config.json; raises AdapterError naming the file and what is wrong."""
        return cls.from_dict(read_config_json(path, "sa2va", "Sa2VA"), str(path))

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "config") -> "Sa2VAConfig":
        if not isinstance(raw.get("vision_config"), dict) or not isinstance(raw.get("llm_config"), dict):
            raise AdapterError(f"sa2va: {source} lacks vision_config / llm_config (expected a Sa2VAChatConfig)")
        llm = dict(raw["llm_config"])
        arch = (llm.get("architectures") or ["?"])[0]
        if arch != "Qwen2ForCausalLM":
            raise AdapterError(f"sa2va: {source} has a {arch} language model; this port runs Qwen2 ones "
                               "(ByteDance/Sa2VA-1B, ByteDance/Sa2VA-4B), not InternLM2 / Phi-3 (Sa2VA-8B, -26B)")
        v = raw["vision_config"]
        vision = {"qkv_bias": False, "qk_normalization": True, "norm_type": "rms_norm", "layer_norm_eps": 1e-6,
                  "hidden_act": "gelu", "patch_size": 14, "image_size": 224,
                  **{k: v[k] for k in VIT_KEYS if k in v}}  # InternVisionConfig's own defaults, then the file's
        missing = [k for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads") if k not in vision]
        if missing:
            raise AdapterError(f"sa2va: {source} vision_config lacks {missing}")
        drop = {"architectures", "auto_map", "_name_or_path", "transformers_version", "model_type", "torch_dtype",
                "attn_implementation", "_attn_implementation", "use_bfloat16", "bos_token_id", "eos_token_id", "pad_token_id"}
        llm = {k: val for k, val in llm.items() if k not in drop}
        return cls(vision=vision, llm=llm, template=str(raw.get("template") or "qwen_chat").replace("-", "_"),
                   select_layer=int(raw.get("select_layer", -1)), downsample_ratio=float(raw.get("downsample_ratio", 0.5)),
                   ps_version=str(raw.get("ps_version", "v1")), force_image_size=raw.get("force_image_size"),
                   sam2_trunk={**SAM2_HIERA_L, **raw.get("rvt_bench_sam2_trunk", {})})

    def qwen2_config(self):
        """A transformers Qwen2Config with the checkpoint's language-model values (eager attention)."""
        from transformers import Qwen2Config

        return Qwen2Config(**self.llm, attn_implementation="eager")
