"""Seg-Zero (arXiv 2503.06520) and VisionReasoner (arXiv 2505.12081): a Qwen2.5-VL reasoning model
fine-tuned with GRPO writes `<think>...</think><answer>...</answer>` with boxes and points; SAM2
turns them into the mask. One pipeline for both, as their authors run it (dvlab-research/Seg-Zero @
42a3345, evaluation_scripts/evaluation.py and evaluation_visionreasoner.py;
dvlab-research/VisionReasoner @ a455092, vision_reasoner/models/vision_reasoner_model.py):

1. the image resized to 840 x 840 (PIL bilinear; a multiple of 28, so Qwen2.5-VL's own
   smart_resize keeps it), the question lower-cased with the format's characters stripped from its
   ends, put into the format's template (conf/model/seg_zero.yaml, visionreasoner.yaml);
2. greedy decoding (`do_sample=False`; max_new_tokens 1024 in Seg-Zero's scripts, which printed
   both papers' ReasonSeg numbers; 2048 in VisionReasoner's own vision_reasoner_model.py, an option)
   of the model in bfloat16 as both load it (hf backend: `model.dtype`); prompts, processor inputs,
   generated ids and the scaling back are held to their code by tests/test_segzero_generation.py;
3. the answer read and scaled back to the frame (rvt_bench.adapters.segzero.answers);
4. SAM2's image predictor on the full-size image, one prompt per object (its box and its positive
   clicks), multimask output, the highest-scoring mask kept; the objects' masks united; under
   ``torch.autocast(device, dtype=bfloat16)`` as both Seg-Zero scripts run it (`sam2_autocast`;
   null: no autocast, as vision_reasoner_model.py). CPU autocast supports bfloat16.

Images only: neither project's evaluation code has a video path (no ReVOS / MeViS evaluation), so a
video sample fails with one line saying so. Tasks: segmentation (the mask) and grounding (the
answer's boxes). The backends are the VLM adapter's (`backend=openai`: a server such as vLLM
serving the checkpoint; `hf`: transformers), and so is the funnel (rvt_bench.adapters.vlm.funnel).
"""
from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import numpy as np

from rvt_bench.adapters.base import Adapter, ScoredSample
from rvt_bench.adapters.segzero import answers
from rvt_bench.adapters.vlm import funnel
from rvt_bench.adapters.vlm import calibrate
from rvt_bench.adapters.vlm.backend import VLMBackend, VLMRequest, backend_class
from rvt_bench.adapters.vlm.reply import Reply
from rvt_bench.core import masks as mask_io
from rvt_bench.core.frames import read_frame
from rvt_bench.core.records import Measure
from rvt_bench.core.types import AdapterError, Prediction, Sample

ADAPTER_VERSION = 2  # 2: replies read exactly as the authors' functions (string numbers, booleans, extra values)
BACKEND_KEYS = {"openai": ("base_url", "api_key", "image_format", "extra_body", "timeout_s", "max_retries", "backoff_s",
                           "backoff_max_s", "max_concurrency"),
                "hf": ("revision", "device", "dtype", "batch_size", "trust_remote_code")}


class SegZeroAdapter(Adapter):
    """Seg-Zero / VisionReasoner (module docstring). Built by Hydra from conf/model/seg_zero.yaml or
    visionreasoner.yaml.

    answer_format: "seg_zero" | "visionreasoner" | "visionreasoner_model" (rvt_bench.adapters.segzero.answers).
    sam2_autocast: "bfloat16" (default: SAM2 under torch.autocast on its device, as the authors'
        scripts) or None (no autocast, as VisionReasoner's model file); raises AdapterError otherwise.
    template: the prompt, with {Question} and {Answer} (the format's example answer, `example`).
    strip: characters stripped from both ends of the lower-cased query.
    resize: side of the square input in pixels (840). max_new_tokens: the reply's budget.
    sam2: a SAM2 backend with `segment_image_best` (rvt_bench.adapters.twin.backends.sam2_pkg /
        sam2_hf), or None (segmentation samples then fail).
    backend: "openai" | "hf" | a built VLMBackend (tests); other keyword arguments go to it.
    input_size_check: at preflight, check that the server's processor keeps the resize x resize
        input (rvt_bench.adapters.vlm.calibrate; the hf backend reads it back); false skips it.
    """

    stages = funnel.STAGES

    def __init__(self, model: str, answer_format: str, template: str, example: str, name: str = "seg_zero",
                 strip: str = ".", resize: int = 840, max_new_tokens: int = 1024, sam2: Any = None,
                 sam2_autocast: str | None = "bfloat16", backend: str | VLMBackend = "openai",
                 input_size_check: bool = True, **backend_kwargs: Any):
        if answer_format not in answers.FORMATS:
            raise AdapterError(f"model.answer_format={answer_format}: expected one of {answers.FORMATS}")
        if "{Question}" not in template:
            raise AdapterError("model.template must hold {Question}")
        self.name, self.model, self.answer_format = name, model, answer_format
        self.template, self.example, self.strip = template, example, strip
        self.resize, self.max_new_tokens, self.sam2 = int(resize), int(max_new_tokens), sam2
        if sam2_autocast not in (None, "bfloat16"):
            raise AdapterError(f"model.sam2_autocast={sam2_autocast}: expected bfloat16 (the authors' scripts) or null")
        self.sam2_autocast = sam2_autocast
        self.input_size_check = bool(input_size_check)
        if isinstance(backend, VLMBackend):
            self.backend = backend
        else:
            cls = backend_class(str(backend))
            unknown = set(backend_kwargs) - {k for keys in BACKEND_KEYS.values() for k in keys}
            if unknown:
                raise AdapterError(f"model: unknown keys {sorted(unknown)}")
            kwargs = {k: v for k, v in backend_kwargs.items() if k in BACKEND_KEYS[str(backend)] and v is not None}
            self.backend = cls(model=model, temperature=0.0, top_p=1.0, seed=0, **kwargs)

    def fingerprint(self) -> dict:
        return {"adapter": "segzero", "version": ADAPTER_VERSION, "backend": self.backend.fingerprint(),
                "answer_format": self.answer_format, "template": self.template, "example": self.example,
                "strip": self.strip, "resize": self.resize, "max_new_tokens": self.max_new_tokens,
                "sam2": None if self.sam2 is None else self.sam2.fingerprint(), "sam2_autocast": self.sam2_autocast}

    @property
    def preferred_batch_size(self) -> int:  # type: ignore[override]
        return max(1, int(getattr(self.backend, "batch_size", 1) or 1))

    def preflight(self) -> None:
        self.backend.preflight()
        if self.input_size_check and not self.backend.knows_input_size:
            # the boxes are pixels of the resize x resize input: the server's Qwen2.5-VL processor must
            # keep it (rvt_bench.adapters.vlm.calibrate; Qwen2.5-VL-7B-Instruct's min_pixels 3136)
            frames = {"factor": 28, "min_pixels": 3136, "max_pixels": self.resize * self.resize}
            calibrate.check_input_size(self.backend, "qwen2_5_vl", frames,
                                       f"the server of model.model={self.model!r} ({getattr(self.backend, 'base_url', '?')})")

    def close(self) -> None:
        self.backend.close()

    def passed(self, item: ScoredSample) -> dict[str, bool | None]:
        return funnel.passed(item)

    def measures(self, scored: Sequence[ScoredSample]) -> list[Measure]:
        return funnel.measures(scored)

    def prompt(self, sample: Sample) -> str:
        """The text the model gets for `sample` (samples.jsonl shows it): the template with the
        query lower-cased and `strip` characters removed at its ends."""
        return self.template.replace("{Question}", sample.query.lower().strip(self.strip)).replace("{Answer}", self.example)

    def predict(self, sample: Sample) -> Prediction:
        """Prediction.masks (segmentation: one RLE, the objects' union) or .boxes (grounding: the
        answer's boxes, frame pixels); trace {"backend", "input_size" [840, 840], "prompt", "reply",
        "finish_reason", "n_tokens", "thought", "boxes", "points"}; timings {"frames", "vlm", "sam2"}.
        Raises ReplyError (kind "parse") for an answer the authors' code cannot read, AdapterError
        for a video, a task it does not answer or a backend failure; both carry the trace."""
        result = self.predict_batch([sample])[0]
        if isinstance(result, AdapterError):
            raise result
        return result

    def predict_batch(self, samples: list[Sample]) -> list[Prediction | AdapterError]:
        out: list[Prediction | AdapterError | None] = [None] * len(samples)
        jobs: dict[int, tuple[Sample, np.ndarray, VLMRequest, dict, dict]] = {}
        for i, sample in enumerate(samples):
            try:
                jobs[i] = self._prepare(sample)
            except AdapterError as exc:
                out[i] = exc
        order = sorted(jobs)
        t0 = time.perf_counter()
        replies = self.backend.generate([jobs[i][2] for i in order]) if order else []
        if len(replies) != len(order):
            raise AdapterError(f"{self.name}: backend {self.backend.name} returned {len(replies)} replies for {len(order)} requests")
        share = round((time.perf_counter() - t0) / max(1, len(order)), 4)
        for i, reply in zip(order, replies):
            sample, frame, _, trace, timings = jobs[i]
            timings["vlm"] = share
            try:
                if isinstance(reply, AdapterError):
                    raise reply
                out[i] = self._finish(sample, frame, reply, trace, timings)
            except AdapterError as exc:
                exc.trace, exc.timings = trace, dict(timings)
                out[i] = exc
        return out  # type: ignore[return-value]

    def _prepare(self, sample: Sample) -> tuple[Sample, np.ndarray, VLMRequest, dict, dict]:
        if sample.modality != "image":
            raise AdapterError(f"sample {sample.id}: {self.name} evaluates images only; its authors' evaluation code "
                               f"has no video path (no ReVOS / MeViS protocol to follow)")
        if sample.task not in ("segmentation", "grounding"):
            raise AdapterError(f"sample {sample.id}: {self.name} answers segmentation and grounding, not {sample.task}")
        from PIL import Image

        t0 = time.perf_counter()
        frame = read_frame(sample.frames[0])
        shown = np.asarray(Image.fromarray(frame).resize((self.resize, self.resize), Image.BILINEAR), dtype=np.uint8)
        text = self.prompt(sample)
        trace = {"backend": self.backend.name, "input_size": [self.resize, self.resize], "prompt": text}
        timings = {"frames": round(time.perf_counter() - t0, 4)}
        return sample, frame, VLMRequest(None, [("image", shown), ("text", text)], self.max_new_tokens), trace, timings

    def _finish(self, sample: Sample, frame: np.ndarray, reply: Reply, trace: dict, timings: dict) -> Prediction:
        trace.update(reply=reply.text, finish_reason=reply.finish_reason, n_tokens=reply.n_tokens)
        height, width = frame.shape[:2]
        answer = answers.parse(reply.text, self.answer_format, width / self.resize, height / self.resize)
        trace.update(thought=answer.think, boxes=answer.boxes, points=answer.points)
        pred = Prediction(sample_id=sample.id, task=sample.task, trace=trace, timings=timings)
        if sample.task == "grounding":
            pred.boxes = [[[float(v) for v in b] for b in answer.boxes]]
            return pred
        if self.sam2 is None:
            raise AdapterError(f"sample {sample.id}: segmentation needs SAM2 (set model.sam2)")
        t0 = time.perf_counter()
        union = np.zeros((height, width), dtype=bool)
        if answer.boxes and len(answer.points) == len(answer.boxes):  # boxes without points: no mask (model file)
            with self._autocast():
                found = self.sam2.segment_image_best(frame, answer.boxes, answer.points)
            union |= np.asarray(found, dtype=bool).any(axis=0)
        timings["sam2"] = round(time.perf_counter() - t0, 4)
        pred.masks = [mask_io.encode(union) if union.any() else None]
        return pred

    def _autocast(self) -> Any:
        """torch.autocast(<SAM2's device type>, dtype=torch.bfloat16) as the authors' scripts wrap
        set_image and predict; a null context without sam2_autocast."""
        from contextlib import nullcontext

        if self.sam2_autocast is None:
            return nullcontext()
        import torch

        device = str(getattr(self.sam2, "device", "cpu") or "cpu")
        return torch.autocast(device.split(":", 1)[0], dtype=torch.bfloat16)
