"""The Sa2VA network on transformers / sam2 modules, and the forward pass ``predict_forward`` runs.

    InternViT (vit.py) on 448 tiles -> last hidden state, CLS dropped (N, 1024, C_v)
      -> pixel shuffle 0.5 (v2) (N, 256, 4 C_v) -> mlp1 (LayerNorm, Linear, GELU, Linear)
      -> replaces every <IMG_CONTEXT> embedding of the prompt
    Qwen2ForCausalLM, greedy decoding (stops at eos or when the decoded answer ends with a stop
      word) -> last-layer (normed) hidden state *at* each generated [SEG] (the step that fed it in;
      a [SEG] that is the final generated token has none: ``get_seg_hidden_states`` on
      ``sequences[0][:-1]``) -> text_hidden_fcs (Linear, ReLU, Linear to 256)
    SAM2 (sam.py) prompted by that embedding on the frames the LLM saw (an image; a video's first
      five), tracking every later frame from its memory -> (F, H, W) logits per [SEG].

Parameter names are the released safetensors' own: vision_model.*, mlp1.*, language_model.*,
text_hidden_fcs.*, grounding_encoder.sam2_model.*.

Source: Sa2VA d01bf3fa8ee239325a007e7b64ee2fd22578b045 projects/llava_sam2/hf/models/
modeling_sa2va_chat.py (``Sa2VAChatModel.__init__``, ``pixel_shuffle``, ``extract_feature``,
``generate``, ``predict_forward``, ``get_seg_hidden_states``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from rvt_bench.adapters.sa2va.config import Sa2VAConfig
from rvt_bench.core.types import AdapterError


@dataclass
class Sa2VAOutput:
    """One sample's result: prompt ids, generated ids (eos / stop word kept), the number of usable
    [SEG] (n_seg), and mask logits (N, F, H, W) float32 at the frames' size, one (F, H, W) stack per
    usable [SEG] (N = n_seg), or for the first one only (N = min(n_seg, 1), ``all_masks=False``)."""

    token_ids: list[int]
    generated: list[int]
    logits: object
    n_seg: int = 0


def seg_hidden_positions(n_prompt: int, generated: list[int], seg_id: int) -> list[int]:
    """Positions, in the hidden states of prompt + generated[:-1], of the generated [SEG] tokens
    (each [SEG] but a final one): n_prompt + i for generated[i] == seg_id, i < len(generated) - 1."""
    return [n_prompt + i for i, t in enumerate(generated[:-1]) if t == seg_id]


class GroundingEncoder(nn.Module):
    """Holds ``sam2_model`` so the parameter names read grounding_encoder.sam2_model.*."""

    def __init__(self, sam2_model):
        super().__init__()
        self.sam2_model = sam2_model


class Sa2VAModel(nn.Module):
    """vision_model (InternViT), mlp1, language_model (Qwen2ForCausalLM), text_hidden_fcs,
    grounding_encoder.sam2_model (sam2 SAM2Base)."""

    def __init__(self, config: Sa2VAConfig, sam2_model=None):
        from transformers import Qwen2ForCausalLM

        from rvt_bench.adapters.sa2va.vit import InternVisionModel

        super().__init__()
        self.config = config
        vit = int(config.vision["hidden_size"]) * int(1 / config.downsample_ratio) ** 2
        hidden = int(config.llm["hidden_size"])
        self.vision_model = InternVisionModel(config.vision)
        self.language_model = Qwen2ForCausalLM(config.qwen2_config())
        self.mlp1 = nn.Sequential(nn.LayerNorm(vit), nn.Linear(vit, hidden), nn.GELU(), nn.Linear(hidden, hidden))
        self.text_hidden_fcs = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 256))
        self.grounding_encoder = GroundingEncoder(sam2_model) if sam2_model is not None else None

    @property
    def device(self):
        return self.mlp1[1].weight.device

    @property
    def dtype(self):
        return self.mlp1[1].weight.dtype

    @property
    def sam(self):
        return self.grounding_encoder.sam2_model

    # --- vision -> LLM --------------------------------------------------------------------------

    def pixel_shuffle(self, x, scale: float):
        n, w, h, c = x.size()
        x = x.view(n, w, int(h * scale), int(c / scale)).permute(0, 2, 1, 3).contiguous()
        x = x.view(n, int(h * scale), int(w * scale), int(c / (scale * scale)))
        if self.config.ps_version != "v1":
            x = x.permute(0, 2, 1, 3).contiguous()
        return x

    def image_features(self, pixel_values):
        """(N, 3, 448, 448) -> (N, 256, hidden): ``extract_feature``."""
        states = self.vision_model(pixel_values.to(self.device, self.dtype))
        x = states[self.config.select_layer][:, 1:, :]
        side = int(x.shape[1] ** 0.5)
        x = self.pixel_shuffle(x.reshape(x.shape[0], side, side, -1), self.config.downsample_ratio)
        return self.mlp1(x.reshape(x.shape[0], -1, x.shape[-1]))

    def embed(self, token_ids: list[int], features, img_context_id: int):
        """(1, T, hidden): the prompt's embeddings with each <IMG_CONTEXT> replaced, in order, by a feature row."""
        ids = torch.tensor(token_ids, device=self.device)
        embeds = self.language_model.get_input_embeddings()(ids)
        selected = ids == img_context_id
        rows = features.reshape(-1, embeds.shape[-1])
        if int(selected.sum()) != rows.shape[0]:
            raise AdapterError(f"sa2va: the prompt holds {int(selected.sum())} <IMG_CONTEXT> tokens for {rows.shape[0]} image features")
        embeds[selected] = rows.to(embeds.dtype)
        return embeds[None]

    # --- LLM ------------------------------------------------------------------------------------

    def greedy(self, inputs_embeds, max_new_tokens: int, eos_id: int | None, stop) -> list[int]:
        """Greedy decoding (``generate`` with do_sample=False) of at most `max_new_tokens` ids; stops
        after eos or when ``stop(generated)`` is true (both kept, as generate keeps them)."""
        out = self.language_model(inputs_embeds=inputs_embeds, use_cache=True, logits_to_keep=1)  # the last row only
        new: list[int] = []
        while len(new) < max_new_tokens:
            token = int(out.logits[0, -1].argmax())
            new.append(token)
            if token == eos_id or len(new) == max_new_tokens or stop(new):
                break
            out = self.language_model(input_ids=torch.tensor([[token]], device=self.device), cache=out.cache, use_cache=True)
        return new

    def seg_embeddings(self, prompt_embeds, generated: list[int], seg_id: int):
        """(N_seg, 256): text_hidden_fcs of the last hidden states at the generated [SEG]s."""
        n_prompt = prompt_embeds.shape[1]
        positions = seg_hidden_positions(n_prompt, generated, seg_id)
        if not positions:
            return torch.zeros((0, 256), device=self.device, dtype=self.dtype)
        gen = self.language_model.get_input_embeddings()(torch.tensor(generated[:-1], device=self.device))[None]
        hidden = self.language_model.model(inputs_embeds=torch.cat([prompt_embeds, gen], dim=1), use_cache=False).last_hidden_state
        return self.text_hidden_fcs(hidden[0, positions])

    # --- one sample -----------------------------------------------------------------------------

    def run(self, token_ids: list[int], llm_pixels, sam_frames: list, out_size: tuple[int, int], *, seg_id: int,
            img_context_id: int, eos_id: int | None, max_new_tokens: int, stop=lambda ids: False,
            all_masks: bool = True) -> Sa2VAOutput:
        """``predict_forward`` on one image (one frame) or video (every frame).

        llm_pixels: (N, 3, 448, 448) float32 tiles (a video: one per frame the LLM sees, its first
        N <= 5); sam_frames: F tensors (3, 1024, 1024) float32 (sam.sam_pixels); out_size: (H, W) of
        the frames. Each [SEG] prompts SAM2 on the frames the LLM saw (an image's one frame, a video's
        first N) and SAM2's memory tracks it over the later frames (sam.track). Masks come from every
        usable [SEG] (``predict_forward``), or from the first only (all_masks=False: what the
        authors' evaluation keeps)."""
        from rvt_bench.adapters.sa2va.sam import track

        with torch.inference_mode():
            embeds = self.embed(token_ids, self.image_features(llm_pixels), img_context_id)
            generated = self.greedy(embeds, max_new_tokens, eos_id, stop)
            prompts = self.seg_embeddings(embeds, generated, seg_id)
            n_seg = int(prompts.shape[0])
            if n_seg == 0:
                return Sa2VAOutput(token_ids, generated, torch.zeros((0, len(sam_frames), *out_size), dtype=torch.float32))
            if not all_masks:
                prompts = prompts[:1]
            sam = self.sam
            sam_dtype = next(sam.parameters()).dtype
            n_cond = min(llm_pixels.shape[0], len(sam_frames))  # a video's frames the LLM saw; an image's one
            # SAM2.language_embd_inference runs under torch.autocast("cuda", bfloat16): active on CUDA,
            # inert on the CPU in float32 (the adapter's CPU path); a bfloat16 model on the CPU (the
            # equivalence test) takes the same region under CPU autocast, as the reference runner's shim
            cpu_bf16 = self.device.type == "cpu" and sam_dtype == torch.bfloat16
            with torch.autocast(device_type="cpu" if cpu_bf16 else "cuda", dtype=torch.bfloat16,
                                enabled=self.device.type == "cuda" or cpu_bf16):
                logits = torch.stack([track(sam, sam_frames, p, n_cond, out_size, self.device, sam_dtype) for p in prompts])
        return Sa2VAOutput(token_ids, generated, logits.float().cpu(), n_seg)


def build(config: Sa2VAConfig, device: str, dtype) -> Sa2VAModel:
    """A Sa2VAModel with uninitialised parameters on `device` in `dtype` (vision and language parts
    built on the meta device; SAM2 built on the CPU, it is small); every parameter must then be
    loaded (weights.load_into)."""
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding

    from rvt_bench.adapters.sa2va.sam import build_sam2

    with torch.device("meta"):
        model = Sa2VAModel(config)
    model.to(dtype=dtype)
    model.to_empty(device=device)
    with torch.device(device):
        model.language_model.model.rotary_emb = Qwen2RotaryEmbedding(config=model.language_model.config)
    model.grounding_encoder = GroundingEncoder(build_sam2(config.sam2_trunk).to(device=device, dtype=dtype))
    return model.eval()
