"""Qwen2.5-VL (transformers ``Qwen2_5_VLForConditionalGeneration``): captions, summaries, labels,
and grounding boxes, generated greedily in left-padded batches.

Batching: a decoder-only model continues from the last position of each row, so rows are padded on
the LEFT (``tokenizer.padding_side = "left"``, as the Qwen2.5-VL model card's batch example does);
right padding would make every shorter prompt continue after pad tokens.

Boxes: Qwen2.5-VL writes absolute pixel coordinates of ITS input image, which the processor resized
to multiples of 28 px within [min_pixels, max_pixels] (``smart_resize``; Qwen2.5-VL technical report,
arXiv 2502.13923, sec. 2.1). The input size is read back from ``image_grid_thw`` (patches of 14 px)
and boxes are rescaled to the frame's pixels and clamped to it (``rescale_box``).
"""
from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from rvt_bench.adapters.twin.backends.common import ModelBackend, seeded
from rvt_bench.core.types import AdapterError

DEFAULT_MODEL = "Qwen/Qwen2.5-VL-3B-Instruct"
DEFAULT_PROMPTS = {
    "frame": "Describe this video frame in one sentence.",
    "instance": "Describe the object in this image crop in one short sentence.",
    "label": "Name the main object in this image crop with one or two words.",
    "summary": "These are frames of one video in temporal order. Summarize what happens in two sentences.",
    "ground": "Locate every {phrase} in the image and output their bbox coordinates in JSON.",
}
_NUM = r"\s*(-?\d+(?:\.\d+)?)\s*"
_BOX = re.compile(r"\[" + ",".join([_NUM] * 4) + r"\]")


class QwenVLBackend(ModelBackend):
    """Vision-language generation.

    max_new_tokens: per answer. batch_size: requests per generate call.
    min_pixels / max_pixels: the processor's image budget per image (Qwen's defaults are 3136 and
    12845056; a smaller max keeps 16-frame summaries affordable). prompts: overrides of
    ``DEFAULT_PROMPTS`` (keys frame, instance, label, summary, ground); another key is an
    AdapterError.
    """

    name = "qwen2.5-vl"

    def __init__(self, model_id: str = DEFAULT_MODEL, revision: str = "main", device: str = "auto",
                 dtype: str = "auto", max_new_tokens: int = 64, batch_size: int = 4, min_pixels: int = 3136,
                 max_pixels: int = 401408, prompts: dict | None = None):
        unknown = set(prompts or {}) - set(DEFAULT_PROMPTS)
        if unknown:
            raise AdapterError(f"unknown Qwen2.5-VL prompt keys {sorted(unknown)}; expected {sorted(DEFAULT_PROMPTS)}")
        super().__init__(model_id, revision, device, dtype, max_new_tokens=int(max_new_tokens),
                         min_pixels=int(min_pixels), max_pixels=int(max_pixels),
                         prompts={**DEFAULT_PROMPTS, **(prompts or {})})
        self.batch_size = int(batch_size)

    def load(self) -> tuple[Any, Any]:
        from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration

        kw = self.hub_kwargs()
        processor = AutoProcessor.from_pretrained(self.model_id, min_pixels=self.params["min_pixels"],
                                                  max_pixels=self.params["max_pixels"], **kw)
        return Qwen2_5_VLForConditionalGeneration.from_pretrained(self.model_id, **kw), processor

    def prompt(self, key: str, **fields: str) -> str:
        return self.params["prompts"][key].format(**fields)

    def generate(self, requests: list[tuple[list[np.ndarray], str]]) -> list[str]:
        """Answer each (images, text) request: images are (H, W, 3) uint8 RGB, shown before the text
        in one user turn. Greedy decoding; returns the stripped answers in request order."""
        return [text for text, _ in self.generate_with_sizes(requests)]

    def generate_with_sizes(self, requests: list[tuple[list[np.ndarray], str]]
                            ) -> list[tuple[str, list[tuple[int, int]]]]:
        """As ``generate``, plus each request's images' model input sizes (h, w) in pixels."""
        import torch

        model, processor = self.components()
        processor.tokenizer.padding_side = "left"
        patch = getattr(processor.image_processor, "patch_size", 14)  # image_grid_thw counts these
        out: list[tuple[str, list[tuple[int, int]]]] = []
        for start in range(0, len(requests), self.batch_size):
            batch = requests[start:start + self.batch_size]
            texts = [processor.apply_chat_template(_messages(len(images), text), add_generation_prompt=True,
                                                   tokenize=False) for images, text in batch]
            images = [list(imgs) for imgs, _ in batch]
            inputs = processor(text=texts, images=images, padding=True, return_tensors="pt").to(self.device)
            inputs["pixel_values"] = inputs["pixel_values"].to(model.dtype)
            with torch.inference_mode():
                generated = model.generate(**inputs, max_new_tokens=self.params["max_new_tokens"], do_sample=False)
            answers = processor.batch_decode(generated[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
            grids = inputs["image_grid_thw"].tolist()
            for answer, (imgs, _) in zip(answers, batch):
                sizes = [(int(h) * patch, int(w) * patch) for _, h, w in grids[:len(imgs)]]
                grids = grids[len(imgs):]
                out.append((answer.strip(), sizes))
        return out

    def ground(self, frame: np.ndarray, phrase: str) -> list[list[float]]:
        """Boxes [x1, y1, x2, y2] in the frame's pixels for ``phrase`` (Qwen's own grounding
        output, rescaled from its input size and clamped; see module docstring)."""
        (text, sizes), = self.generate_with_sizes([([frame], self.prompt("ground", phrase=phrase))])
        frame_hw = (int(frame.shape[0]), int(frame.shape[1]))
        return [rescale_box(b, sizes[0], frame_hw) for b in parse_boxes(text)]

    @classmethod
    def tiny(cls, seed: int = 0, **kwargs: Any) -> "QwenVLBackend":
        """A random-weight Qwen2.5-VL (1 text layer 32 wide, 1 vision block 16 wide) with a local
        byte-level BPE tokenizer holding Qwen's special tokens and a minimal Qwen-style chat template;
        images at 56..112 px per side."""
        from transformers import (Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor,
                                  Qwen2VLImageProcessor, Qwen2VLVideoProcessor)

        tokenizer = _tiny_qwen_tokenizer()
        ids = {t: tokenizer.convert_tokens_to_ids(t) for t in _QWEN_SPECIAL}
        config = Qwen2_5_VLConfig(
            text_config=dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                             rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                              "mrope_section": [2, 2, 4]},
                             bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                             pad_token_id=ids["<|endoftext|>"]),
            vision_config=dict(depth=1, hidden_size=16, num_heads=2, intermediate_size=32, out_hidden_size=32,
                               patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=56,
                               fullatt_block_indexes=[0]),
            image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
            vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
        with seeded(seed):
            model = Qwen2_5_VLForConditionalGeneration(config)
        image_processor = Qwen2VLImageProcessor(min_pixels=56 * 56, max_pixels=112 * 112, patch_size=14,
                                                merge_size=2, temporal_patch_size=2)
        processor = Qwen2_5_VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                        video_processor=Qwen2VLVideoProcessor(), chat_template=_TINY_TEMPLATE)
        kwargs.setdefault("max_new_tokens", 8)
        return cls.from_components(model, processor, model_id="tiny-random/qwen2.5-vl", revision=f"seed{seed}",
                                   **kwargs)


def parse_boxes(text: str) -> list[list[float]]:
    """Boxes [x1, y1, x2, y2] in the model's input pixels from a Qwen2.5-VL answer: the
    ``"bbox_2d"`` fields of its JSON answer when it parses (inside a ```json fence or not), else
    every bracketed 4-number list in the text. Coordinates are re-ordered so x1 <= x2, y1 <= y2."""
    boxes: list[list[float]] = []
    body = re.sub(r"^```[A-Za-z]*\s*|\s*```$", "", text.strip())
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, an integer past the digit limit, nesting past the stack
        parsed = None
    items = parsed if isinstance(parsed, list) else [parsed] if isinstance(parsed, dict) else []
    for item in items:
        box = item.get("bbox_2d") if isinstance(item, dict) else None
        if isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) for v in box):
            boxes.append([float(v) for v in box])
    if not boxes:
        boxes = [[float(v) for v in m.groups()] for m in _BOX.finditer(text)]
    return [[min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3])] for b in boxes]


def rescale_box(box: list[float], input_hw: tuple[int, int], frame_hw: tuple[int, int]) -> list[float]:
    """A box [x1, y1, x2, y2] in the model's input pixels (input_hw = (h, w) after smart_resize)
    mapped to the frame's pixels (frame_hw = (H, W)): x * W / w, y * H / h, clamped to [0, W] x [0, H]."""
    (h, w), (height, width) = input_hw, frame_hw
    sx, sy = width / w, height / h
    x1, y1, x2, y2 = box
    return [min(max(x1 * sx, 0.0), width), min(max(y1 * sy, 0.0), height),
            min(max(x2 * sx, 0.0), width), min(max(y2 * sy, 0.0), height)]


def _messages(n_images: int, text: str) -> list[dict]:
    content = [{"type": "image"} for _ in range(n_images)] + [{"type": "text", "text": text}]
    return [{"role": "user", "content": content}]


_QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                 "<|image_pad|>", "<|video_pad|>"]
_TINY_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _tiny_qwen_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=_QWEN_SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(DEFAULT_PROMPTS.values()) + ["a dog on a blanket", "a person walks"], trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                 padding_side="left")
    hf.add_special_tokens({"additional_special_tokens": _QWEN_SPECIAL[1:]})
    return hf
