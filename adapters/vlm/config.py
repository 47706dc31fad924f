"""The structured config of the VLM adapter's `model` node (conf/model/vlm.yaml; a Hydra
ConfigStore dataclass registered under the name conf/schemas.yaml gives it): VLMConfig and its
prompts (VLMPromptsConfig). Every default is the code's own: VLMAdapter's keyword defaults,
FrameSampling, Generation, Think (rvt_bench.adapters.vlm.adapter) and the backends' signatures
(OpenAIChatVLM, HFVLM); the YAML names the model, SAM2 and the prompt texts.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from omegaconf import MISSING

from rvt_bench.adapters.vlm.adapter import FrameSampling, Generation, Think, VLMAdapter
from rvt_bench.adapters.vlm.hf import HFVLM
from rvt_bench.adapters.vlm.openai_chat import OpenAIChatVLM
from rvt_bench.core.ranges import (BATCH, COUNT, FPS, PIXELS, RETRIES, SECONDS, SEED, SIDE, TEMPERATURE, TOKENS, VERSION,
                                   WORKERS, ranged, within)

# the adapter's settings dataclasses stay its own; the schemas are copies with ranges
FrameSamplingConfig = ranged(FrameSampling, {"num_frames": {"ge": 1, "le": COUNT}, "fps": {"gt": 0, "le": FPS},
                                             "min_pixels": {"ge": 1, "le": PIXELS}, "max_pixels": {"ge": 1, "le": PIXELS},
                                             "factor": {"ge": 1, "le": SIDE}})
GenerationConfig = ranged(Generation, {"max_new_tokens": {"ge": 1, "le": TOKENS}, "temperature": {"ge": 0, "le": TEMPERATURE},
                                       "top_p": {"gt": 0, "le": 1}, "seed": {"ge": 0, "le": SEED}})
ThinkConfig = ranged(Think, {"budget": {"ge": 1, "le": TOKENS}})


def _keyword_defaults(cls: type) -> dict[str, Any]:
    return {k: p.default for k, p in inspect.signature(cls).parameters.items() if p.default is not inspect.Parameter.empty}


_VLM, _OPENAI, _HF = _keyword_defaults(VLMAdapter), _keyword_defaults(OpenAIChatVLM), _keyword_defaults(HFVLM)


@dataclass
class VLMPromptsConfig:
    """The VLM's prompts (adapters/vlm/prompts.py, which documents the fields): no defaults but
    `system` (None = no system turn), the texts live in conf/model/vlm.yaml."""

    version: int = within(MISSING, ge=1, le=VERSION)
    system: Optional[str] = None
    media: Dict[str, str] = MISSING
    frame_label: str = MISSING
    frame_rule: Dict[str, str] = MISSING
    segmentation: str = MISSING
    grounding: str = MISSING
    vqa: str = MISSING
    summarization: str = MISSING


@dataclass
class VLMConfig:
    """The `model` node of the VLM adapter (conf/model/vlm.yaml, which names _target_, the model,
    SAM2 and the prompts): rvt_bench.adapters.vlm.adapter.VLMAdapter's arguments, documented there, with its
    keyword defaults, FrameSampling, Generation and Think; the openai backend's keys with
    rvt_bench.adapters.vlm.openai_chat.OpenAIChatVLM's defaults (base_url: a local vLLM / SGLang server;
    api_key None = $OPENAI_API_KEY, else "EMPTY"; extra_body: extra request fields, e.g. vLLM's
    {top_k: 1}); the hf backend's with rvt_bench.adapters.vlm.hf.HFVLM's. Where a server is reached and how
    patiently are not in the run's fingerprint (bench/harness/manifest.py)."""

    _target_: str = MISSING
    name: str = MISSING
    backend: str = _VLM["backend"]
    model: str = MISSING
    coords: str = _VLM["coords"]
    family: Optional[str] = _VLM["family"]
    input_size_check: bool = _VLM["input_size_check"]
    frames: FrameSamplingConfig = field(default_factory=FrameSamplingConfig)  # type: ignore[valid-type]
    generation: GenerationConfig = field(default_factory=GenerationConfig)  # type: ignore[valid-type]
    think: ThinkConfig = field(default_factory=ThinkConfig)  # type: ignore[valid-type]
    grounding_fill: str = _VLM["grounding_fill"]
    sam2: Any = _VLM["sam2"]
    base_url: str = "http://localhost:8000/v1"
    api_key: Optional[str] = _OPENAI["api_key"]
    timeout_s: float = within(_OPENAI["timeout_s"], gt=0, le=SECONDS)
    max_retries: int = within(_OPENAI["max_retries"], ge=0, le=RETRIES)
    backoff_s: float = within(_OPENAI["backoff_s"], ge=0, le=SECONDS)
    backoff_max_s: float = within(_OPENAI["backoff_max_s"], ge=0, le=SECONDS)
    max_concurrency: int = within(_OPENAI["max_concurrency"], ge=1, le=WORKERS)
    image_format: str = _OPENAI["image_format"]
    # {} rather than the backend's None: the config's value since the first release (fingerprints)
    extra_body: Dict[str, Any] = field(default_factory=dict)
    revision: str = _HF["revision"]
    device: str = _HF["device"]
    dtype: str = _HF["dtype"]
    batch_size: int = within(_HF["batch_size"], ge=1, le=BATCH)
    trust_remote_code: bool = _HF["trust_remote_code"]
    prompts: VLMPromptsConfig = field(default_factory=VLMPromptsConfig)
