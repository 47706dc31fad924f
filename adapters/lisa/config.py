"""A LISA checkpoint's config.json read into the parts our modules are built from.

LISA saves ``LlavaConfig`` (a LlamaConfig with ``model_type: "llava"`` plus the LLaVA/LISA
fields). transformers 5 maps "llava" to its own Llava classes, a different architecture, so the
JSON is read here and a plain ``LlamaConfig`` is built from its LLaMA fields.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rvt_bench.adapters.checkpoint import read_config_json
from rvt_bench.core.types import AdapterError

LLAMA_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "hidden_act", "max_position_embeddings", "rms_norm_eps", "initializer_range",
              "pretraining_tp", "tie_word_embeddings", "rope_scaling", "rope_theta", "bos_token_id",
              "eos_token_id", "pad_token_id")
REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "mm_hidden_size", "out_dim")

SAM_VIT_H = {"hidden_size": 1280, "num_hidden_layers": 32, "num_attention_heads": 16,
             "global_attn_indexes": [7, 15, 23, 31], "mlp_dim": 5120}
"""LISA's SAM image encoder: ``build_sam_vit_h`` (model/segment_anything/build_sam.py), which LISA
always builds; a checkpoint's config.json may override it with ``sam_vision_config`` (only our tiny
test checkpoints do)."""


@dataclass
class LisaConfig:
    """The fields of a LISA config.json this port uses.

    llama:        LlamaConfig keyword arguments.
    mm_hidden_size: CLIP feature width (1024 for ViT-L/14). vision_tower: CLIP id or directory.
    select_layer: CLIP hidden-state index (-2: penultimate); the CLS token is dropped ("patch").
    use_im_start_end: <im_start>/<im_end> around <image>. out_dim: text_hidden_fcs output (256).
    sam_vision:   SAM image-encoder sizes (SAM_VIT_H unless overridden).
    """

    llama: dict[str, Any]
    mm_hidden_size: int
    vision_tower: str
    select_layer: int = -2
    use_im_start_end: bool = True
    out_dim: int = 256
    sam_vision: dict[str, Any] = field(default_factory=lambda: dict(SAM_VIT_H))

    @classmethod
    def from_json(cls, path: str | Path) -> "LisaConfig":
        """Read config.json; raises AdapterError naming the file and the missing keys."""
        return cls.from_dict(read_config_json(path, "lisa", "LISA"), str(path))

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "config") -> "LisaConfig":
        missing = [k for k in REQUIRED if k not in raw]
        if missing:
            raise AdapterError(f"lisa: {source} lacks {missing} (expected a LISA LlavaConfig)")
        feature = raw.get("mm_vision_select_feature", "patch")
        if feature != "patch":
            raise AdapterError(f"lisa: {source} mm_vision_select_feature={feature!r}; LISA sets 'patch'")
        llama = {k: raw[k] for k in LLAMA_KEYS if k in raw and raw[k] is not None}
        tower = raw.get("vision_tower") or raw.get("mm_vision_tower") or "openai/clip-vit-large-patch14"
        return cls(llama=llama, mm_hidden_size=int(raw["mm_hidden_size"]), vision_tower=str(tower),
                   select_layer=int(raw.get("mm_vision_select_layer", -2)),
                   use_im_start_end=bool(raw.get("mm_use_im_start_end", True)), out_dim=int(raw["out_dim"]),
                   sam_vision={**SAM_VIT_H, **raw.get("sam_vision_config", {})})

    @classmethod
    def from_v0_dict(cls, raw: dict[str, Any], vocab_size: int, source: str = "config") -> "LisaConfig":
        """A v0 checkpoint's LlavaConfig (LISA @0e26916, rvt_bench.adapters.lisa.legacy): no out_dim
        (LISA's class fixes 256), CLIP from ``mm_vision_tower``, select layer -2 and <im_start>/
        <im_end> on (LISA.__init__ sets both whatever the file says), the vocabulary resized to the
        tokenizer's length `vocab_size` (``resize_token_embeddings(len(tokenizer))``)."""
        return cls.from_dict({**raw, "out_dim": 256, "mm_vision_select_layer": -2, "mm_use_im_start_end": True,
                              "vocab_size": vocab_size, "vision_tower": raw.get("mm_vision_tower")}, source)

    def llama_config(self):
        """A transformers LlamaConfig with the checkpoint's LLaMA values (never a LlavaConfig), with
        eager attention: LISA's transformers 4.31 LLaMA attention (softmax in float32, weights rounded
        to the model dtype before @ V). Under bfloat16, sdpa's fused kernel rounds otherwise, and on
        the tiny parity checkpoint that flips a tied first token (tests/test_lisa_equivalence.py)."""
        from transformers import LlamaConfig

        return LlamaConfig(**self.llama, attn_implementation="eager")

    def sam_config(self):
        """A transformers SamConfig: LISA's ViT-H image encoder (or the override), prompt encoder
        and mask decoder as build_sam.py's ``_build_sam`` sizes them (256-d prompts, 2-layer
        two-way transformer with MLP 2048 and 8 heads, 3 multimask outputs + 1, LayerNorm eps 1e-5)."""
        from transformers import SamConfig, SamMaskDecoderConfig, SamPromptEncoderConfig, SamVisionConfig

        v = self.sam_vision
        vision = SamVisionConfig(hidden_size=v["hidden_size"], num_hidden_layers=v["num_hidden_layers"],
                                 num_attention_heads=v["num_attention_heads"], global_attn_indexes=list(v["global_attn_indexes"]),
                                 mlp_dim=v.get("mlp_dim", 4 * v["hidden_size"]), output_channels=self.out_dim,
                                 image_size=1024, patch_size=16, window_size=14, qkv_bias=True, use_rel_pos=True,
                                 layer_norm_eps=1e-6)
        prompt = SamPromptEncoderConfig(hidden_size=self.out_dim, image_size=1024, patch_size=16, mask_input_channels=16)
        # layer_norm_eps: the two-way transformer's nn.LayerNorm(embedding_dim) keeps torch's 1e-5
        # (LISA transformer.py; transformers' SamMaskDecoderConfig defaults to 1e-6). Its upscaling
        # LayerNorm2d (1e-6) and final-attention LayerNorm (1e-5) take their eps elsewhere, as LISA's.
        decoder = SamMaskDecoderConfig(hidden_size=self.out_dim, mlp_dim=2048, num_hidden_layers=2, num_attention_heads=8,
                                       num_multimask_outputs=3, iou_head_depth=3, iou_head_hidden_dim=256, layer_norm_eps=1e-5)
        return SamConfig(vision_config=vision.to_dict(), prompt_encoder_config=prompt.to_dict(),
                         mask_decoder_config=decoder.to_dict())
