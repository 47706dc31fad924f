"""A VLM run locally by transformers: ``AutoModelForImageTextToText`` with the checkpoint's own
processor and chat template (Qwen2-VL, Qwen2.5-VL, Video-R1, InternVL-HF, LLaVA-OneVision, ...).

Requests are decoded in left-padded batches (a decoder-only model continues from each row's last
position; rvt_bench.adapters.twin.backends.qwen_vl explains why right padding is wrong). A video arrives as its
sampled frames, each an image after a text label, exactly as the openai backend sends it. The model's
input size of each image is read back from the processor's ``image_grid_thw`` where it has one (Qwen
family: grid cells of ``patch_size`` px), so Qwen2.5-VL's absolute coordinates are mapped from the
size the model really saw.
"""
from __future__ import annotations

from typing import Any

from rvt_bench.adapters.policy.base import decoding_fingerprint
from rvt_bench.adapters.twin.backends.common import ModelBackend, resolve_dtype
from rvt_bench.adapters.vlm.backend import VLMBackend, VLMRequest
from rvt_bench.adapters.vlm.reply import Reply
from rvt_bench.core.types import AdapterError, first_line


class HFVLM(ModelBackend, VLMBackend):
    """transformers image-text-to-text generation.

    model: hub id or local directory. revision: hub revision (a local directory's is a digest of its
    files). device: "auto" | "cpu" | "cuda[:i]". dtype: "auto" | "float32" | "bfloat16" | "float16".
    batch_size: requests per generate call. temperature, top_p, seed: 0 = greedy.
    trust_remote_code: for checkpoints that need it.
    """

    name = "hf"
    knows_input_size = True  # image_grid_thw read back per image
    loads_in_dtype = True  # from_pretrained(dtype=...): its float32 rotary buffers stay float32

    def __init__(self, model: str, revision: str = "main", device: str = "auto", dtype: str = "auto",
                 batch_size: int = 4, temperature: float = 0.0, top_p: float = 1.0, seed: int = 0,
                 trust_remote_code: bool = False):
        if not model or model == "???":
            raise AdapterError("vlm hf backend: `model.model` is required (a hub id or a local directory)")
        super().__init__(str(model), revision, device, dtype)
        self.batch_size = int(batch_size)
        self.temperature, self.top_p, self.seed = float(temperature), float(top_p), int(seed)
        self.trust_remote_code = bool(trust_remote_code)
        self.name = f"hf:{model}"

    def fingerprint(self) -> dict:
        return dict(super().fingerprint(), backend="hf", dtype=self.dtype_spec,
                    decoding=decoding_fingerprint(self.temperature, self.top_p, self.seed))

    def load(self) -> tuple[Any, Any]:
        from transformers import AutoModelForImageTextToText, AutoProcessor

        kw = dict(self.hub_kwargs(), trust_remote_code=self.trust_remote_code)
        processor = AutoProcessor.from_pretrained(self.model_id, **kw)
        # loaded in its dtype, as the authors' scripts load it (torch_dtype=torch.bfloat16): casting
        # a float32 load afterwards would round the rotary inv_freq buffers to bf16 as well
        model = AutoModelForImageTextToText.from_pretrained(self.model_id, dtype=resolve_dtype(self.dtype_spec, self.device),
                                                            **kw)
        return model, processor

    def preflight(self) -> None:
        try:
            self.components()
        except (AdapterError, ImportError) as exc:
            raise AdapterError(f"vlm: cannot load model.model={self.model_id!r}: {first_line(exc)}") from exc

    def generate(self, requests: list[VLMRequest]) -> list[Reply | AdapterError]:
        out: list[Reply | AdapterError] = []
        for start in range(0, len(requests), self.batch_size):
            out.extend(self._batch(requests[start:start + self.batch_size]))
        return out

    def _batch(self, batch: list[VLMRequest]) -> list[Reply]:
        import torch

        model, processor = self.components()
        tokenizer = getattr(processor, "tokenizer", processor)
        tokenizer.padding_side = "left"
        texts, images = [], []
        for r in batch:
            texts.append(processor.apply_chat_template(_messages(r), add_generation_prompt=True, tokenize=False))
            images.append([value for _, content in (*r.turns, ("user", r.content)) for kind, value in content if kind == "image"])
        inputs = processor(text=texts, images=images if any(images) else None, padding=True,
                           return_tensors="pt").to(self.device)
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(model.dtype)
        max_new = max(int(r.max_new_tokens) for r in batch)
        sampling = {"do_sample": False} if self.temperature == 0 else {
            "do_sample": True, "temperature": self.temperature, "top_p": self.top_p}
        if self.temperature != 0:
            torch.manual_seed(self.seed)
        with torch.inference_mode():
            generated = model.generate(**inputs, max_new_tokens=max_new, **sampling)
        new = generated[:, inputs["input_ids"].shape[1]:].tolist()
        eos = _eos_ids(model, tokenizer)
        grids = inputs["image_grid_thw"].tolist() if "image_grid_thw" in inputs else None
        patch = int(getattr(getattr(processor, "image_processor", None), "patch_size", 14) or 14)
        replies = []
        for r, row, imgs in zip(batch, new, images):
            ended = next((i for i, tok in enumerate(row) if tok in eos), None)
            ids = row[: r.max_new_tokens] if ended is None else row[:ended]
            finish = "stop" if ended is not None and ended < r.max_new_tokens else "length"
            sizes = None
            if grids is not None:
                sizes = [(int(h) * patch, int(w) * patch) for _, h, w in grids[:len(imgs)]]
                grids = grids[len(imgs):]
            text = tokenizer.decode(ids, skip_special_tokens=True)
            replies.append(Reply(text=text, finish_reason=finish, n_tokens=len(ids) + (finish == "stop"),
                                 input_sizes=sizes))
        return replies


def _messages(request: VLMRequest) -> list[dict]:
    def parts(content):
        return [{"type": "text", "text": value} if kind == "text" else {"type": "image"} for kind, value in content]

    out = [{"role": "system", "content": [{"type": "text", "text": request.system}]}] if request.system else []
    out += [{"role": role, "content": parts(content)} for role, content in request.turns]
    return out + [{"role": "user", "content": parts(request.content)}]


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    ids = getattr(model.generation_config, "eos_token_id", None)
    ids = ids if isinstance(ids, list) else [ids]
    return {int(i) for i in ids + [tokenizer.eos_token_id] if i is not None}
