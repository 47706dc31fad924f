"""Any vision-language model behind the Adapter protocol (``+model=vlm``): for all four tasks.

- segmentation: the VLM writes boxes (and points, where its family does) -> SAM2 masks
  (rvt_bench.adapters.vlm.segment);
- grounding: the VLM's boxes, mapped from its coordinate family to frame pixels (rvt_bench.adapters.vlm.coords);
- vqa, summarization: the reply text, scored by the caption metrics and the judge.
Frames are sampled and resized here (rvt_bench.adapters.vlm.frames), prompts come from conf/model/vlm.yaml
(rvt_bench.adapters.vlm.prompts), reasoning replies are split at </think> (rvt_bench.adapters.vlm.reply). The backend
(``openai``: an OpenAI-compatible chat server; ``hf``: transformers) only answers chat requests.

The adapter knows the benchmark only through ``sample.task`` and ``sample.modality``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from rvt_bench.adapters.base import Adapter, ScoredSample, settings_block
from rvt_bench.adapters.vlm import calibrate, families, funnel
from rvt_bench.adapters.vlm import prompts as prompt_mod
from rvt_bench.adapters.vlm.backend import VLMBackend, VLMRequest, backend_class
from rvt_bench.adapters.vlm.coords import COORDINATE_FAMILIES, Detection, check_family, parse_detections, to_frame
from rvt_bench.adapters.vlm.frames import resize, sample_indices, smart_resize
from rvt_bench.adapters.vlm.reply import Reply, ReplyError, says_no_target, split_reply
from rvt_bench.core.frames import read_frame
from rvt_bench.core.records import Measure
from rvt_bench.core.types import AdapterError, Prediction, Sample

ADAPTER_VERSION = 1
OPENAI_KEYS = ("base_url", "api_key", "image_format", "extra_body", "timeout_s", "max_retries", "backoff_s",
               "backoff_max_s", "max_concurrency")
HF_KEYS = ("revision", "device", "dtype", "batch_size", "trust_remote_code")
FILL = ("nearest", "none")


@dataclass
class FrameSampling:
    """What the model sees (adapters/vlm/frames.py).

    num_frames: most frames per video, evenly spaced (None = all).
    fps: frames per second shown, for samples whose meta states their fps (num_frames still caps).
    min_pixels / max_pixels: smart_resize area bounds per frame, in pixels; 401408 = 512 merged
        28 px patches (Qwen2.5-VL's own default allows 12845056).
    factor: sides become multiples of this (Qwen2/2.5-VL: 14 px patches merged 2x2).
    A server's processor must keep these sizes (its own bounds at least as wide): the preflight
    checks it where the family's boxes are pixels of that size (rvt_bench.adapters.vlm.calibrate).
    """

    num_frames: Optional[int] = 16
    fps: Optional[float] = None
    min_pixels: int = 3136
    max_pixels: int = 401408
    factor: int = 28


@dataclass
class Generation:
    """Decoding of the answer: max_new_tokens (answer tokens), temperature (0 = greedy), top_p, seed."""

    max_new_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0


@dataclass
class Think:
    """Reasoning models (Video-R1, VisionReasoner): <think>...</think> then the answer. enabled: the
    thought may take `budget` tokens on top of Generation.max_new_tokens; a reply cut inside
    <think> is a parse failure."""

    enabled: bool = False
    budget: int = 1024


@dataclass
class _Job:
    """A sample on its way: the frames shown, the request, the trace and timings so far."""

    sample: Sample
    indices: list[int]
    frame_hw: tuple[int, int]
    input_hw: list[tuple[int, int]]
    request: VLMRequest
    trace: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)


class VLMAdapter(Adapter):
    """A VLM (+ SAM2 for masks). Built by Hydra from conf/model/vlm.yaml.

    backend: "openai" | "hf" (rvt_bench.adapters.vlm.backend.BACKENDS), or a built VLMBackend (tests).
    model: the served model name (openai) or hub id / directory (hf).
    coords: coordinate family of the model's boxes (rvt_bench.adapters.vlm.coords.COORDINATE_FAMILIES).
    family: the model family a preset states (rvt_bench.adapters.vlm.families: qwen2_5_vl, qwen3_vl,
        internvl3; "custom"; None: checked against the family `model` names): `coords` and
        `frames.factor` must be its own, else AdapterError.
    frames: FrameSampling keys. generation: Generation keys. think: Think keys (the answer is read
        after </think>, rvt_bench.adapters.vlm.reply).
    input_size_check: check at preflight that the server's processor keeps the frames' size, for
        families whose boxes are pixels of that size (rvt_bench.adapters.vlm.calibrate); false skips it.
    grounding_fill: boxes of frames not shown to the model: "nearest" (the nearest shown frame's,
        the earlier on ties) or "none" (no box).
    sam2: a SAM2 backend (rvt_bench.adapters.twin.backends.sam2_hf / sam2_pkg) for segmentation, or None
        (segmentation samples then fail with AdapterError).
    prompts: the prompts block (rvt_bench.adapters.vlm.prompts), with a `version` (required).
    Other keyword arguments go to the backend: OPENAI_KEYS for openai, HF_KEYS for hf (defaults:
    the backend class's signature).
    These keyword defaults, the dataclasses above and the backends' signatures are the defaults of
    `+model=vlm` too (adapters/vlm/config.py::VLMConfig reads them).

    Its report (rvt_bench.adapters.vlm.funnel): reply received -> answer parsed -> masks from SAM2
    (segmentation) -> result correct, reply tokens and the seconds of each stage.
    """

    stages = funnel.STAGES

    def __init__(self, backend: str | VLMBackend = "openai", model: str | None = None, name: str = "vlm",
                 coords: str = "qwen2_5_vl", frames: Mapping[str, Any] | None = None,
                 generation: Mapping[str, Any] | None = None, think: Mapping[str, Any] | None = None,
                 grounding_fill: str = "nearest", sam2: Any = None, prompts: Mapping[str, Any] | None = None,
                 family: str | None = None, input_size_check: bool = True, **backend_kwargs: Any):
        self.name = name
        self.model_name = model
        self.coords = check_family(coords)
        self.frames = settings_block("frames", FrameSampling, frames)
        self.family = families.check(family, self.coords, self.frames, model)
        self.input_size_check = bool(input_size_check)
        self.input_size: dict | None = None  # what the preflight check saw (rvt_bench.adapters.vlm.calibrate)
        self.generation = settings_block("generation", Generation, generation)
        self.think = settings_block("think", Think, think)
        if grounding_fill not in FILL:
            raise AdapterError(f"model.grounding_fill must be one of {FILL}, got {grounding_fill!r}")
        self.grounding_fill = grounding_fill
        self.sam2 = sam2
        self.prompts = prompt_mod.check(prompts or {})
        if isinstance(backend, VLMBackend):
            self.backend = backend
        else:
            cls = backend_class(str(backend))
            keys = OPENAI_KEYS if backend == "openai" else HF_KEYS
            unknown = set(backend_kwargs) - set(OPENAI_KEYS) - set(HF_KEYS)
            if unknown:
                raise AdapterError(f"model: unknown keys {sorted(unknown)}")
            kwargs = {k: v for k, v in backend_kwargs.items() if k in keys and v is not None}
            decoding = {k: self.generation[k] for k in ("temperature", "top_p", "seed")}
            self.backend = cls(model=model, **kwargs, **decoding)

    @property
    def preferred_batch_size(self) -> int:  # type: ignore[override]
        return max(1, int(getattr(self.backend, "batch_size", 1) or 1))

    def fingerprint(self) -> dict:
        return {
            "adapter": "vlm", "version": ADAPTER_VERSION, "name": self.name,
            "backend": self.backend.fingerprint(), "coords": self.coords, "frames": dict(self.frames),
            "generation": dict(self.generation), "think": dict(self.think), "grounding_fill": self.grounding_fill,
            "sam2": None if self.sam2 is None else self.sam2.fingerprint(),
            "prompt": {"version": self.prompts["version"], "sha256": prompt_mod.digest(self.prompts)},
            **({"family": self.family} if self.family is not None else {}),  # absent before families: old run names kept
        }

    def preflight(self) -> None:
        self.backend.preflight()
        family = self.checked_family()
        if family is not None and self.input_size_check and not self.backend.knows_input_size:
            what = f"the server of model.model={self.model_name!r} ({getattr(self.backend, 'base_url', '?')})"
            self.input_size = calibrate.check_input_size(self.backend, family, self.frames, what)

    def checked_family(self) -> str | None:
        """The family whose server-side resize the preflight checks: the stated family, else the one
        model.model names (never for model.family=custom), when its coordinates are absolute pixels
        of the processed input (rvt_bench.adapters.vlm.calibrate.TOKENS_PER_IMAGE) and model.coords
        is its convention."""
        family = self.family if self.family is not None else families.family_of(self.model_name)
        if family in calibrate.TOKENS_PER_IMAGE and families.FAMILIES[family].coords == self.coords:
            return family
        return None

    def close(self) -> None:
        self.backend.close()

    def passed(self, item: ScoredSample) -> dict[str, bool | None]:
        return funnel.passed(item)

    def measures(self, scored: Sequence[ScoredSample]) -> list[Measure]:
        return funnel.measures(scored)

    def predict(self, sample: Sample) -> Prediction:
        """Answer one sample. Prediction.trace = {"backend", "frames" (indices shown), "input_size"
        [h, w], "coords" (the convention boxes were read in), "family", "prompt", "reply", "finish_reason", "n_tokens", "thought", "answer", and for boxes
        "detections" (frame pixels) and "key_frame"}; timings = seconds {"frames", "vlm", "sam2"}.
        Raises ReplyError (kind "parse", with `reason`) for a reply without a usable answer and
        AdapterError when the backend or SAM2 fails; both carry the partial trace as `.trace`."""
        result = self.predict_batch([sample])[0]
        if isinstance(result, AdapterError):
            raise result
        return result

    def predict_batch(self, samples: list[Sample]) -> list[Prediction | AdapterError]:
        """Prepare every sample, send all requests to the backend at once, then finish each."""
        out: list[Prediction | AdapterError | None] = [None] * len(samples)
        jobs: dict[int, _Job] = {}
        for i, sample in enumerate(samples):
            try:
                jobs[i] = self._prepare(sample)
            except AdapterError as exc:
                out[i] = exc
        order = sorted(jobs)
        t0 = time.perf_counter()
        replies = self.backend.generate([jobs[i].request for i in order]) if order else []
        if len(replies) != len(order):
            raise AdapterError(f"vlm backend {self.backend.name} returned {len(replies)} replies for {len(order)} requests")
        share = (time.perf_counter() - t0) / max(1, len(order))
        for i, reply in zip(order, replies):
            job = jobs[i]
            job.timings["vlm"] = round(share, 4)
            try:
                if isinstance(reply, AdapterError):
                    raise reply
                out[i] = self._finish(job, reply)
            except AdapterError as exc:
                job.trace["timings"] = dict(job.timings)
                exc.trace, exc.timings = job.trace, dict(job.timings)
                out[i] = exc
        return out  # type: ignore[return-value]

    # --- stages ---------------------------------------------------------------------------------

    def _prepare(self, sample: Sample) -> _Job:
        t0 = time.perf_counter()
        f = self.frames
        indices = sample_indices(sample.num_frames, f["num_frames"], f["fps"], sample.meta.get("fps"))
        frames = [read_frame(sample.frames[t]) for t in indices]
        frame_hw = (int(frames[0].shape[0]), int(frames[0].shape[1]))
        shown = [resize(fr, smart_resize(fr.shape[0], fr.shape[1], int(f["factor"]), int(f["min_pixels"]),
                                         int(f["max_pixels"]))) for fr in frames]
        content = prompt_mod.user_content(self.prompts, sample.task, sample.modality, sample.query,
                                          COORDINATE_FAMILIES[self.coords], shown, indices)
        budget = int(self.generation["max_new_tokens"]) + (int(self.think["budget"]) if self.think["enabled"] else 0)
        request = VLMRequest(self.prompts.get("system") or None, content, budget)
        # the convention the boxes are read in, with the input size it refers to (rvt_bench.adapters.vlm.families)
        trace = {"backend": self.backend.name, "frames": indices, "input_size": list(shown[0].shape[:2]),
                 "coords": self.coords, "family": self.family, "prompt": content[-1][1]}
        job = _Job(sample, indices, frame_hw, [tuple(s.shape[:2]) for s in shown], request, trace)
        job.timings["frames"] = round(time.perf_counter() - t0, 4)
        return job

    def _finish(self, job: _Job, reply: Reply) -> Prediction:
        sample, trace = job.sample, job.trace
        trace.update(reply=reply.text, finish_reason=reply.finish_reason, n_tokens=reply.n_tokens)
        if reply.input_sizes:
            job.input_hw = [tuple(s) for s in reply.input_sizes]
            trace["input_size"] = list(job.input_hw[0])
        parts = split_reply(reply.text, reply.finish_reason)
        trace.update(thought=parts.thought, answer=parts.answer)
        pred = Prediction(sample_id=sample.id, task=sample.task, trace=trace, timings=job.timings)
        if sample.task in ("vqa", "summarization"):
            pred.text = parts.answer
            return pred
        dets = [] if says_no_target(parts.answer) else self._detections(job, parse_detections(parts.answer))
        trace["detections"] = [{"frame": d.frame, "box": _r(d.box), "point": None if d.point is None else _r(d.point)}
                               for d in dets]
        if not dets:  # "[]" (as the prompts ask) or "none": the model's answer is that nothing matches
            pred.no_target = True
            return pred
        if sample.task == "grounding":
            pred.boxes = self._boxes(job, dets)
            return pred
        pred.masks = self._masks(job, dets)
        return pred

    def _detections(self, job: _Job, dets: list[Detection]) -> list[Detection]:
        """Detections with a sample frame index each (None -> the first shown frame), mapped to
        frame pixels; ReplyError("unknown_frame") for a frame that was not shown."""
        out = []
        for det in dets:
            t = job.indices[0] if det.frame is None else det.frame
            if t not in job.indices:
                raise ReplyError("unknown_frame", f"the reply names frame {det.frame}; frames shown: {job.indices}")
            det.frame = t
            out.append(to_frame(det, self.coords, job.input_hw[job.indices.index(t)], job.frame_hw))
        return out

    def _boxes(self, job: _Job, dets: list[Detection]) -> list[list[list[float]]]:
        shown = {t: [d.box for d in dets if d.frame == t] for t in job.indices}
        out: list[list[list[float]]] = []
        for t in range(job.sample.num_frames):
            if t in shown:
                out.append(shown[t])
            elif self.grounding_fill == "nearest":
                out.append([list(b) for b in shown[min(job.indices, key=lambda s: (abs(s - t), s))]])
            else:
                out.append([])
        return out

    def _masks(self, job: _Job, dets: list[Detection]):
        from rvt_bench.adapters.vlm import segment

        sample = job.sample
        if self.sam2 is None:
            raise AdapterError(f"sample {sample.id}: segmentation needs SAM2 (set model.sam2)")
        t0 = time.perf_counter()
        if sample.modality == "image":
            masks = segment.image_masks(self.sam2, read_frame(sample.frames[0]), dets)
        else:
            key = dets[0].frame if dets else job.indices[0]
            job.trace["key_frame"] = key
            frames = [read_frame(p) for p in sample.frames]
            masks = segment.video_masks(self.sam2, frames, key, [d for d in dets if d.frame == key])
        job.timings["sam2"] = round(time.perf_counter() - t0, 4)
        return masks


def _r(values: list[float]) -> list[float]:
    return [round(float(v), 2) for v in values]
