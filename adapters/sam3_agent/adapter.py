"""`sam3_agent`: SAM 3 Agent (facebookresearch/sam3 sam3/agent/ at 99d02f2) behind the Adapter
protocol: any MLLM behind the vlm adapter's backends (an OpenAI-compatible chat server: vLLM,
SGLang, ...; or transformers) runs the repository's loop (rvt_bench.adapters.sam3_agent.loop) with
SAM 3 (rvt_bench.adapters.sam3.adapter.Sam3Adapter) as its segment_phrase tool.

Image: the loop on the image; the selected masks united are the sample's mask. report_no_mask, or a
selection of no valid number (the repository returns the same empty outputs for both), is the "no
target" answer (Prediction.none_found, no score).

Video (not in the repository, whose agent takes one image): the loop on the key frame
(`key_frame`: "first" or "middle"), then SAM 3's video model with the loop's last text_prompt;
the tracked objects whose mask on the key frame overlaps a selected mask with IoU >= `video_match_iou`
are the answer, united per frame. When no track matches, the selected masks stand on the key frame
alone (trace "video": {"matched": []}).

Grounding: per frame, the box around the answer's mask (Sam3Adapter's). VQA and summarization are
refused in one line.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from rvt_bench.adapters.base import Adapter, Attribution, ScoredSample
from rvt_bench.adapters.sam3.adapter import Sam3Adapter
from rvt_bench.adapters.sam3_agent import funnel, loop, prompts, render, tool
from rvt_bench.adapters.vlm.backend import VLMBackend, VLMRequest, backend_class
from rvt_bench.core.records import Measure
from rvt_bench.core.types import AdapterError, Prediction, Sample

ADAPTER_VERSION = 1
TASKS = ("segmentation", "grounding")
KEY_FRAMES = ("first", "middle")
OPENAI_KEYS = ("base_url", "api_key", "image_format", "extra_body", "timeout_s", "max_retries", "backoff_s",
               "backoff_max_s")
HF_KEYS = ("revision", "device", "dtype", "trust_remote_code")
MAX_NEW_TOKENS = 4096  # client_llm.send_generate_request(max_tokens=4096)


class Sam3AgentAdapter(Adapter):
    """SAM 3 Agent (module docstring). Built by Hydra from conf/model/sam3_agent.yaml.

    backend: "openai" | "hf" (the vlm adapter's backends) or a built VLMBackend (tests).
    model: the served model name (openai) or hub id / directory (hf).
    sam3: Sam3Adapter's keyword arguments (checkpoint, threshold, mask_threshold, device, dtype) or
        a built Sam3Adapter.
    prompts_dir: the directory of the repository's system prompts (None: the installed sam3's;
        rvt_bench.adapters.sam3_agent.prompts).
    max_generations: rounds before the loop stops (the repository's 100). max_new_tokens: per reply
        (the repository's 4096). temperature, top_p, seed: the backend's decoding (the repository sends
        none: the server's defaults; here greedy unless set).
    key_frame, video_match_iou: videos (module docstring).
    Other keyword arguments go to the backend: OPENAI_KEYS for openai, HF_KEYS for hf.

    predict(sample) -> Prediction with trace {"rollout" (the conversation as text), "calls" (every
    reply and its tool call: round, reply, tool, parameters, result; a reply the loop refused has
    no result, its tool None where it named none), "rounds", "ended_with", "text_prompt",
    "selected" (1-based numbers), "system_prompt_sha256", "video" (videos)}; timings {"mllm", "sam3",
    "render"}. A loop the repository would stop raises AgentError (a parse failure) with the trace
    so far and its "failure" {"stage", "reason"} (funnel.py).
    """

    stages = funnel.STAGES

    def __init__(self, backend: str | VLMBackend = "openai", model: str | None = None, name: str = "sam3_agent",
                 sam3: Mapping[str, Any] | Sam3Adapter | None = None, prompts_dir: str | None = None,
                 max_generations: int = loop.MAX_GENERATIONS, max_new_tokens: int = MAX_NEW_TOKENS,
                 temperature: float = 0.0, top_p: float = 1.0, seed: int = 0, key_frame: str = "first",
                 video_match_iou: float = 0.5, **backend_kwargs: Any):
        if key_frame not in KEY_FRAMES:
            raise AdapterError(f"sam3_agent: model.key_frame must be one of {KEY_FRAMES}, got {key_frame!r}")
        if not 0.0 <= float(video_match_iou) <= 1.0:
            raise AdapterError(f"sam3_agent: model.video_match_iou must lie in [0, 1], got {video_match_iou}")
        if int(max_generations) < 0 or int(max_new_tokens) < 1:
            raise AdapterError(f"sam3_agent: need model.max_generations >= 0 and model.max_new_tokens >= 1, got "
                               f"{max_generations}, {max_new_tokens}")
        self.name, self.model_name, self.prompts_dir = name, model, prompts_dir
        self.max_generations, self.max_new_tokens = int(max_generations), int(max_new_tokens)
        self.key_frame, self.video_match_iou = key_frame, float(video_match_iou)
        self.sam3 = sam3 if isinstance(sam3, Sam3Adapter) else Sam3Adapter(**dict(sam3 or {}))
        if isinstance(backend, VLMBackend):
            self.backend = backend
        else:
            keys = OPENAI_KEYS if backend == "openai" else HF_KEYS
            unknown = set(backend_kwargs) - set(OPENAI_KEYS) - set(HF_KEYS)
            if unknown:
                raise AdapterError(f"sam3_agent: unknown keys model.{sorted(unknown)}")
            kwargs = {k: v for k, v in backend_kwargs.items() if k in keys and v is not None}
            self.backend = backend_class(str(backend))(model=model, temperature=temperature, top_p=top_p, seed=seed, **kwargs)
        self._system: dict[str, str] | None = None

    # --- setup --------------------------------------------------------------------------------

    def system(self) -> dict[str, str]:
        if self._system is None:
            self._system = prompts.load(self.prompts_dir)
        return self._system

    def fingerprint(self) -> dict:
        return {"adapter": "sam3_agent", "version": ADAPTER_VERSION, "name": self.name,
                "backend": self.backend.fingerprint(), "sam3": self.sam3.fingerprint(),
                "system_prompts_sha256": prompts.digests(self.system()), "max_generations": self.max_generations,
                "max_new_tokens": self.max_new_tokens, "key_frame": self.key_frame, "video_match_iou": self.video_match_iou}

    def preflight(self) -> None:
        self.system()
        self.backend.preflight()
        self.sam3.preflight()

    def close(self) -> None:
        self.backend.close()
        self.sam3.close()

    def passed(self, item: ScoredSample) -> dict[str, bool | None]:
        return funnel.passed(item)

    def measures(self, scored: Sequence[ScoredSample]) -> list[Measure]:
        return funnel.measures(scored)

    @classmethod
    def attribute(cls, run_dirs: Sequence[Path], examples: int = 3) -> Attribution:
        """Each failed sample's label across runs (rvt_bench.adapters.sam3_agent.attribute)."""
        from rvt_bench.adapters.sam3_agent import attribute

        result = attribute.attribute(list(run_dirs), examples)
        return Attribution(attribute.format_report(result), result)

    # --- prediction ---------------------------------------------------------------------------

    def generate(self, messages: list[dict]) -> str:
        """One reply of the MLLM to the loop's `messages` (system text, turns, the last user turn);
        the backend's failure is AgentError("reply", "backend") (the repository's None reply), an
        empty reply AgentError("reply", "empty") (the backends read a null message.content, the
        repository's None, as ""; the message says where the text may have gone)."""
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
        rest = messages[1:] if system is not None else messages

        def content(parts: Any):
            if isinstance(parts, str):
                return [("text", parts)]
            return [("text", p["text"]) if p["type"] == "text" else ("image", p["image"].pixels) for p in parts]

        turns = tuple((m["role"], content(m["content"])) for m in rest[:-1])
        reply = self.backend.generate([VLMRequest(system, content(rest[-1]["content"]), self.max_new_tokens, turns)])[0]
        if isinstance(reply, AdapterError):
            raise loop.AgentError("reply", "backend", str(reply))
        if reply.text == "":
            raise loop.AgentError("reply", "empty", "the MLLM's reply text (message.content) is empty; the loop reads its "
                                  "<tool> call there: a server's reasoning or tool-call parser may have moved it to "
                                  "reasoning_content or tool_calls (start the server without --reasoning-parser / "
                                  "--tool-call-parser), or the model wrote nothing")
        return reply.text

    def predict(self, sample: Sample) -> Prediction:
        if sample.task not in TASKS:
            raise AdapterError(f"sample {sample.id}: SAM 3 Agent answers segmentation and grounding, not {sample.task!r}")
        from rvt_bench.core.frames import read_frame

        frames = [np.ascontiguousarray(read_frame(f)) for f in sample.frames]
        if not frames:
            raise AdapterError(f"sample {sample.id}: no frames")
        key = 0 if sample.modality != "video" or self.key_frame == "first" else len(frames) // 2
        frame = frames[key]
        timings = {"render": 0.0}

        def timed_render(fn):
            def call(*args):
                t0 = time.perf_counter()
                try:
                    return fn(frame, *args)
                finally:
                    timings["render"] += time.perf_counter() - t0
            return call

        tools = loop.Tools(generate=self.generate, segment=lambda text: tool.segment_phrase(self.sam3, frame, text),
                           render_all=timed_render(render.all_masks), render_one=timed_render(render.one_mask))
        sha = prompts.digests(self.system())
        try:
            result = loop.run(prompts.ImageRef("raw", frame), sample.query.strip(), self.system(), tools, self.max_generations)
        except AdapterError as exc:
            calls = getattr(exc, "calls", [])
            timings.update({k: round(v, 4) for k, v in getattr(exc, "loop_timings", {}).items()})
            timings["render"] = round(timings["render"], 4)
            stage, reason = (exc.stage, exc.reason) if isinstance(exc, loop.AgentError) else ("sam3", "error")
            exc.trace = {"rollout": _rollout(calls), "calls": calls, "rounds": None, "failure": {"stage": stage, "reason": reason},
                         "system_prompt_sha256": sha, "timings": timings}
            exc.timings = timings
            raise
        timings.update({k: round(v, 4) for k, v in result.timings.items()})
        timings["render"] = round(timings["render"], 4)
        selected = result.calls[-1]["result"]["selected"]
        trace = {"rollout": _rollout(result.calls), "calls": result.calls, "rounds": result.generations,
                 "ended_with": result.tool, "text_prompt": result.text_prompt, "selected": selected,
                 "system_prompt_sha256": sha}
        if result.final is None or len(result.final) == 0:
            return Prediction.none_found(sample.id, None, task=sample.task, trace=trace, timings=timings)
        union = result.final.masks.any(axis=0)
        if sample.modality != "video":
            return self.sam3._answer(sample, [union], trace, timings)
        t0 = time.perf_counter()
        try:
            tracks = self.sam3.tracks(frames, result.text_prompt)
        except AdapterError as exc:
            exc.trace = dict(trace, failure={"stage": "sam3", "reason": "video"})
            raise
        timings["sam3_video"] = round(time.perf_counter() - t0, 4)
        masks, matched = match_tracks(tracks, result.final.masks, key, self.video_match_iou, union, len(frames))
        trace["video"] = {"key_frame": key, "tracks": len(tracks), "matched": matched}
        return self.sam3._answer(sample, masks, trace, timings)


def iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 0.0


def match_tracks(tracks: dict[int, np.ndarray], selected: np.ndarray, key: int, threshold: float,
                 union: np.ndarray, n_frames: int) -> tuple[list[np.ndarray], list[int]]:
    """Per frame the union of the tracks ({id: (T, H, W) bool}) whose key-frame mask has IoU >=
    `threshold` with one of the `selected` (N, H, W) masks, and those ids ascending; with no match,
    `union` on the key frame and empty masks elsewhere."""
    matched = sorted(obj for obj, track in tracks.items()
                     if track[key].any() and any(iou(track[key], m) >= threshold for m in selected))
    h, w = union.shape
    if not matched:
        masks = [np.zeros((h, w), bool) for _ in range(n_frames)]
        masks[key] = union
        return masks, []
    stack = np.stack([tracks[obj] for obj in matched]).any(axis=0)
    return [stack[t] for t in range(n_frames)], matched


def _rollout(calls: list[dict]) -> str:
    """The conversation as text for the report: each round's reply and its tool's result."""
    parts = []
    for c in calls:
        result = json.dumps(c.get("result", "(no result: the loop stopped here)"), default=str)
        parts.append(f"--- round {c['round']} ---\n{c['reply']}\n>>> {c['tool']}: {result}")
    return "\n\n".join(parts)
