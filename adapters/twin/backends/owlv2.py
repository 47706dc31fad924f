"""OWLv2 (transformers ``Owlv2ForObjectDetection``): open-vocabulary boxes for text phrases.

Coordinate pitfall: the OWLv2 processor pads every image at the bottom/right to a square of side
S = max(H, W) before resizing it to the model's input (960 px), and the model's ``pred_boxes`` are
normalised (cx, cy, w, h) relative to that padded square (google-research scenic
``owl_vit/notebooks``; transformers ``Owlv2ImageProcessor.pad``). Scaling them by (H, W) - what
the OWL-ViT v1 recipe and older transformers releases did - squeezes boxes on non-square frames.
We pass ``target_sizes = (S, S)``, which is right whatever the installed version does with it
(recent versions take max(H, W) themselves), then clamp to the frame and drop boxes that lie in the
padding.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rvt_bench.adapters.twin.backends.common import ModelBackend, seeded
from rvt_bench.core.types import AdapterError

DEFAULT_MODEL = "google/owlv2-base-patch16-ensemble"
MAX_TEXT_TOKENS = 16
"""OWLv2's text tower has 16 positions; longer phrases are truncated by the tokenizer."""


class Owlv2Backend(ModelBackend):
    """Open-vocabulary detection.

    threshold:      keep detections with sigmoid score > threshold (transformers' rule).
    nms_iou:        class-agnostic non-maximum suppression IoU (boxes overlapping a better one by more
                    are dropped; the scenic OWLv2 demo uses 0.3).
    max_detections: most detections kept per image, best first.
    """

    name = "owlv2"

    def __init__(self, model_id: str = DEFAULT_MODEL, revision: str = "main", device: str = "auto",
                 dtype: str = "auto", threshold: float = 0.1, nms_iou: float = 0.3, max_detections: int = 10):
        super().__init__(model_id, revision, device, dtype, threshold=float(threshold), nms_iou=float(nms_iou),
                         max_detections=int(max_detections))

    def load(self) -> tuple[Any, Any]:
        from transformers import Owlv2ForObjectDetection, Owlv2Processor

        kw = self.hub_kwargs()
        return (Owlv2ForObjectDetection.from_pretrained(self.model_id, **kw),
                Owlv2Processor.from_pretrained(self.model_id, **kw))

    def detect(self, frames: list[np.ndarray], phrases: list[str]) -> list[list[dict]]:
        """Detections per (H, W, 3) uint8 RGB frame: a list, best score first, of
        {"box": [x1, y1, x2, y2] continuous pixels of that frame (clamped to [0, W] x [0, H]),
        "score": float in (threshold, 1], "label": the phrase}. Raises AdapterError when ``phrases`` is empty."""
        import torch

        if not phrases:
            raise AdapterError("OWLv2 needs at least one phrase")
        model, processor = self.components()
        inputs = processor(text=[list(phrases)] * len(frames), images=list(frames), return_tensors="pt",
                           truncation=True, max_length=MAX_TEXT_TOKENS).to(self.device)
        inputs["pixel_values"] = inputs["pixel_values"].to(model.dtype)
        with torch.inference_mode():
            outputs = model(**inputs)
        outputs.logits = outputs.logits.float()
        outputs.pred_boxes = outputs.pred_boxes.float()
        sizes = [(int(f.shape[0]), int(f.shape[1])) for f in frames]
        return to_detections(processor, outputs, sizes, phrases, **self.params)

    @classmethod
    def tiny(cls, seed: int = 0, **kwargs: Any) -> "Owlv2Backend":
        """A random-weight OWLv2 (1-layer, 16-wide towers, 64 px input, 16 px patches) with a local
        byte-level BPE tokenizer (CLIP's special tokens; ids start at 1 because OWLv2 masks a query
        whose first token id is 0)."""
        from transformers import Owlv2Config, Owlv2ForObjectDetection, Owlv2ImageProcessor, Owlv2Processor

        tokenizer = _tiny_clip_tokenizer()
        config = Owlv2Config(
            text_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                             vocab_size=len(tokenizer), max_position_embeddings=MAX_TEXT_TOKENS,
                             bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                             pad_token_id=tokenizer.pad_token_id),
            vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                               image_size=64, patch_size=16),
            projection_dim=16)
        with seeded(seed):
            model = Owlv2ForObjectDetection(config)
        processor = Owlv2Processor(image_processor=Owlv2ImageProcessor(size={"height": 64, "width": 64}),
                                   tokenizer=tokenizer)
        return cls.from_components(model, processor, model_id="tiny-random/owlv2", revision=f"seed{seed}",
                                   **kwargs)


def to_detections(processor: Any, outputs: Any, sizes: list[tuple[int, int]], phrases: list[str],
                  threshold: float, nms_iou: float, max_detections: int) -> list[list[dict]]:
    """Post-process raw OWLv2 outputs (``logits`` (B, Q, P), ``pred_boxes`` (B, Q, 4) normalised
    cx, cy, w, h of the padded square) into per-frame detections (see ``Owlv2Backend.detect``);
    ``sizes`` are the frames' (H, W)."""
    squares = [(max(h, w), max(h, w)) for h, w in sizes]
    results = processor.post_process_grounded_object_detection(outputs, threshold=threshold, target_sizes=squares)
    out = []
    for (height, width), result in zip(sizes, results):
        boxes = result["boxes"].detach().float().cpu().numpy().reshape(-1, 4)
        scores = result["scores"].detach().float().cpu().numpy().reshape(-1)
        labels = result["labels"].detach().cpu().numpy().reshape(-1)
        boxes = np.stack([boxes[:, 0].clip(0, width), boxes[:, 1].clip(0, height),
                          boxes[:, 2].clip(0, width), boxes[:, 3].clip(0, height)], axis=1)
        # a box entirely in the padding clamps to zero width or height
        valid = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
        kept = nms(boxes[valid], scores[valid], nms_iou)[:max_detections]
        idx = np.flatnonzero(valid)[kept]
        out.append([{"box": [float(v) for v in boxes[i]], "score": float(scores[i]),
                     "label": phrases[int(labels[i])]} for i in idx])
    return out


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU matrix (N, M) of xyxy boxes in continuous pixels (no +1), as rvt_bench.metrics.boxes."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> list[int]:
    """Indices kept by greedy class-agnostic NMS (torchvision.ops.nms: a box overlapping a better
    one by IoU > `iou` is dropped), best score first; equal scores keep their input order, which
    torchvision's sort does not promise, so boxes go in ranked by a stable sort."""
    import torch
    from torchvision.ops import nms as tv_nms

    if len(scores) == 0:
        return []
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    ranked = torch.as_tensor(np.asarray(boxes, dtype=np.float64)[order])
    rank_scores = torch.arange(len(order), 0, -1, dtype=torch.float64)  # strictly decreasing: no ties
    return [int(order[i]) for i in tv_nms(ranked, rank_scores, float(iou)).tolist()]


def _tiny_clip_tokenizer() -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["<pad>", "<|startoftext|>", "<|endoftext|>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["a photo of a dog", "a cat on a blanket", "a person"], trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<|startoftext|> $A <|endoftext|>", special_tokens=[("<|startoftext|>", 1), ("<|endoftext|>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|startoftext|>", eos_token="<|endoftext|>",
                                   pad_token="<pad>", model_max_length=MAX_TEXT_TOKENS)
