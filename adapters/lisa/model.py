"""The LISA network on transformers modules, and the forward passes LISA's inference runs.

    CLIP ViT-L/14 (hidden state ``select_layer``, CLS dropped: 256 x 1024)
      -> mm_projector (one Linear) -> replaces the <image> id in the LLaMA input embeddings
    LlamaForCausalLM -> last-layer (normed) hidden state at the position *before* each [SEG]
      -> text_hidden_fcs (Linear, ReLU, Linear to 256) = one sparse prompt per [SEG]
    SamModel: image embedding of the 1024 padded frame; mask decoder with that sparse prompt, the
      no-mask dense embedding and multimask_output=False -> 256 x 256 logits -> original size.

Source: LISA 3cb2d4301f1af4691bd4f3938335ef06e76f155a model/LISA.py (``model_forward`` with
inference=True; ``evaluate``), model/llava/llava_arch.py (``prepare_inputs_labels_for_multimodal``),
model/llava/model/multimodal_encoder/clip_encoder.py, model/segment_anything/.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from rvt_bench.adapters.lisa.config import LisaConfig
from rvt_bench.adapters.lisa.preprocess import postprocess_masks
from rvt_bench.adapters.lisa.prompts import IMAGE_TOKEN_INDEX, IMAGE_TOKENS
from rvt_bench.core.types import AdapterError


def seg_hidden_positions(token_ids: list[int], seg_id: int, shift: int = IMAGE_TOKENS - 1) -> list[int]:
    """Indices, in the LLM's image-expanded hidden states, of the positions whose next token is
    [SEG] (``token_ids[1:] == seg_id``, shifted by IMAGE_TOKENS - 1 = 255 because LISA assumes the
    one image comes before every [SEG]).

    token_ids: the sequence with one IMAGE_TOKEN_INDEX (-200) placeholder, as tokenised (v1); or,
    with shift=0, the v0 sequence whose 256 <im_patch> ids already hold the image's places.
    """
    return [j + shift for j in range(len(token_ids) - 1) if token_ids[j + 1] == seg_id]


@dataclass
class LisaOutput:
    """One frame's result: token ids (prompt + generated, -200 kept), the generated ids alone
    (empty for the eval prompt), and mask logits (N_seg, H, W) float32 at the original size."""

    token_ids: list[int]
    generated: list[int]
    logits: object


def build(config: LisaConfig, clip, device: str, dtype, image_ids: tuple[int, int] | None = None):
    """A LisaModel with uninitialised parameters on `device` in `dtype` (built on the meta device,
    so nothing is allocated twice); every parameter must then be loaded (weights.load_into, or
    legacy.load_into for v0). image_ids: (<im_start>, <im_end>) ids for LISA's legacy v0 code path
    (LisaModel.image_ids), None for v1."""
    with torch.device("meta"):
        model = LisaModel(config, clip=None)
    model.image_ids = image_ids
    model.to(dtype=dtype)
    model.to_empty(device=device)
    model.reset_buffers(device)
    model.clip = clip.to(device=device, dtype=dtype)
    return model.eval()


class LisaModel(torch.nn.Module):
    """clip (CLIPVisionModel), mm_projector, llm (LlamaForCausalLM), text_hidden_fcs, sam (SamModel).

    image_ids: None runs LISA @3cb2d43 (one -200 placeholder per image, KV-cached decoding); the
    pair (<im_start>, <im_end>) runs LISA's legacy code @0e26916 (rvt_bench.adapters.lisa.legacy):
    the 256 <im_patch> ids after <im_start> are replaced by the features, the [SEG] positions need
    no shift, and each decoding step reruns the whole sequence (use_cache=False).
    """

    image_ids: tuple[int, int] | None = None

    def __init__(self, config: LisaConfig, clip=None):
        import torch.nn as nn
        from transformers import LlamaForCausalLM, SamModel

        super().__init__()
        self.config = config
        hidden = int(config.llama["hidden_size"])
        self.clip = clip
        self.mm_projector = nn.Linear(config.mm_hidden_size, hidden)
        self.llm = LlamaForCausalLM(config.llama_config())
        self.text_hidden_fcs = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, config.out_dim))
        self.sam = SamModel(config.sam_config())

    def reset_buffers(self, device) -> None:
        """Recompute the buffers that are not weights (LLaMA's rotary inverse frequencies) after
        a meta-device build."""
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

        with torch.device(device):
            self.llm.model.rotary_emb = LlamaRotaryEmbedding(config=self.llm.config)

    @property
    def device(self):
        return self.mm_projector.weight.device

    @property
    def dtype(self):
        return self.mm_projector.weight.dtype

    # --- LLM side ---------------------------------------------------------------------------------

    def image_features(self, clip_pixels):
        """(1, 3, 224, 224) -> (1, 256, hidden): CLIP hidden state ``select_layer`` without CLS, projected."""
        out = self.clip(pixel_values=clip_pixels.to(self.device, self.dtype), output_hidden_states=True)
        return self.mm_projector(out.hidden_states[self.config.select_layer][:, 1:])

    def embed(self, token_ids: list[int], features):
        """(1, len(token_ids) + 255, hidden) input embeddings: the one -200 id replaced by the 256 features.
        v0 (image_ids set): (1, len(token_ids), hidden), the 256 ids after the one <im_start>
        replaced (llava.py @0e26916 ``LlavaLlamaModel.forward``; <im_end> must follow them)."""
        if self.image_ids is not None:
            return self._embed_patches(token_ids, features)
        places = [i for i, t in enumerate(token_ids) if t == IMAGE_TOKEN_INDEX]
        if len(places) != 1:
            raise AdapterError(f"lisa: a prompt must hold exactly one <image>, this one holds {len(places)}")
        p = places[0]
        table = self.llm.get_input_embeddings()
        ids = torch.tensor([t for t in token_ids if t != IMAGE_TOKEN_INDEX], device=self.device)
        text = table(ids)
        return torch.cat([text[:p], features[0].to(text.dtype), text[p:]], dim=0).unsqueeze(0)

    def _embed_patches(self, token_ids: list[int], features):
        start_id, end_id = self.image_ids
        n = features.shape[1]
        starts = [i for i, t in enumerate(token_ids) if t == start_id]
        if len(starts) != 1:
            raise AdapterError(f"lisa: a v0 prompt must hold exactly one <im_start>, this one holds {len(starts)}")
        p = starts[0]
        if p + n + 1 >= len(token_ids) or token_ids[p + n + 1] != end_id:
            raise AdapterError(f"lisa: a v0 prompt's <im_end> must follow <im_start> and {n} <im_patch> ids")
        text = self.llm.get_input_embeddings()(torch.tensor(token_ids, device=self.device))
        return torch.cat([text[: p + 1], features[0].to(text.dtype), text[p + n + 1:]], dim=0).unsqueeze(0)

    def last_hidden(self, inputs_embeds):
        """(1, T, hidden) last-layer hidden states after the final norm (LlavaLlamaForCausalLM
        returns ``outputs[0]`` as hidden_states in eval mode)."""
        return self.llm.model(inputs_embeds=inputs_embeds, use_cache=False).last_hidden_state

    def greedy(self, inputs_embeds, max_new_tokens: int, eos_id: int) -> list[int]:
        """Greedy decoding (``generate(num_beams=1)``, no sampling) from `inputs_embeds`, at most
        `max_new_tokens` ids, stopping after eos (which is kept, as generate keeps it). v0: every
        step reruns the whole sequence (LISA @0e26916 sets use_cache=False)."""
        if self.image_ids is not None:
            return self._greedy_uncached(inputs_embeds, max_new_tokens, eos_id)
        out = self.llm(inputs_embeds=inputs_embeds, use_cache=True)
        new: list[int] = []
        while len(new) < max_new_tokens:
            token = int(out.logits[0, -1].argmax())
            new.append(token)
            if token == eos_id or len(new) == max_new_tokens:
                break
            out = self.llm(input_ids=torch.tensor([[token]], device=self.device), cache=out.cache,
                           use_cache=True)
        return new

    def _greedy_uncached(self, inputs_embeds, max_new_tokens: int, eos_id: int) -> list[int]:
        table = self.llm.get_input_embeddings()
        embeds = inputs_embeds
        new: list[int] = []
        while len(new) < max_new_tokens:
            token = int(self.llm(inputs_embeds=embeds, use_cache=False).logits[0, -1].argmax())
            new.append(token)
            if token == eos_id:
                break
            embeds = torch.cat([embeds, table(torch.tensor([[token]], device=self.device)).to(embeds.dtype)], dim=1)
        return new

    def seg_embeddings(self, hidden, token_ids: list[int], seg_id: int):
        """(N_seg, out_dim) sparse prompts: text_hidden_fcs of the hidden states before each [SEG]."""
        positions = seg_hidden_positions(token_ids, seg_id, 0 if self.image_ids is not None else IMAGE_TOKENS - 1)
        return self.text_hidden_fcs(hidden[0, positions])

    # --- SAM side ---------------------------------------------------------------------------------

    def image_embedding(self, sam_pixels):
        """(1, 3, 1024, 1024) -> (1, 256, 64, 64) SAM image embedding."""
        return self.sam.get_image_embeddings(sam_pixels.to(self.device, self.dtype))

    def decode_masks(self, prompts, image_embedding, input_size, original_size):
        """(N, 256) sparse prompts -> (N, H, W) float32 logits at `original_size` (one mask per
        prompt, multimask_output=False, dense prompt = the no-mask embedding)."""
        n = prompts.shape[0]
        if n == 0:
            return torch.zeros((0, *original_size), dtype=torch.float32)
        sam = self.sam
        grid = image_embedding.shape[-2:]
        dense = sam.prompt_encoder.no_mask_embed.weight.reshape(1, -1, 1, 1).expand(1, -1, *grid)
        out = sam.mask_decoder(
            image_embeddings=image_embedding,
            image_positional_embeddings=sam.get_image_wide_positional_embeddings().to(image_embedding.dtype),
            sparse_prompt_embeddings=prompts.to(image_embedding.dtype)[None, :, None, :],
            dense_prompt_embeddings=dense.to(image_embedding.dtype),
            multimask_output=False,
        )
        low_res = out[0].reshape(n, 1, *out[0].shape[-2:])
        return postprocess_masks(low_res, input_size, original_size)[:, 0]

    # --- one frame --------------------------------------------------------------------------------

    def run(self, token_ids: list[int], clip_pixels, sam_pixels, input_size, original_size, seg_id: int,
            max_new_tokens: int = 0, eos_id: int | None = None) -> LisaOutput:
        """LISA on one frame. max_new_tokens > 0: generate the answer greedily after the prompt
        (``evaluate``); 0: the prompt already holds its answer (``model_forward(inference=True)``).
        Masks come from every [SEG] of the whole sequence."""
        with torch.inference_mode():
            features = self.image_features(clip_pixels)
            embeds = self.embed(token_ids, features)
            generated: list[int] = []
            if max_new_tokens > 0:
                generated = self.greedy(embeds, max_new_tokens, eos_id)
            sequence = token_ids + generated
            if seg_id not in sequence[1:]:
                return LisaOutput(sequence, generated, torch.zeros((0, *original_size), dtype=torch.float32))
            # generate()'s last step saw every token but the final one
            context = self.embed(sequence[:-1], features) if generated else embeds
            hidden = self.last_hidden(context)
            prompts = self.seg_embeddings(hidden, sequence, seg_id)
            logits = self.decode_masks(prompts, self.image_embedding(sam_pixels), input_size, original_size)
        return LisaOutput(sequence, generated, logits.float().cpu())
