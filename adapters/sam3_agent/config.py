"""The structured config of the sam3_agent adapter's `model` node (conf/model/sam3_agent.yaml; a Hydra
ConfigStore dataclass registered under the name conf/schemas.yaml gives it), so a misspelt `model.` key
or a value of the wrong type stops the run at compose time in one line, as for the other models.
Every default is the code's own: Sam3AgentAdapter's keyword defaults (rvt_bench.adapters.sam3_agent.adapter,
which documents the fields), the backends' (OpenAIChatVLM for OPENAI_KEYS, HFVLM for HF_KEYS) and
Sam3Adapter's for the `sam3` tool block."""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from omegaconf import MISSING

from rvt_bench.adapters.sam3.adapter import Sam3Adapter
from rvt_bench.adapters.sam3_agent.adapter import Sam3AgentAdapter
from rvt_bench.adapters.vlm.hf import HFVLM
from rvt_bench.adapters.vlm.openai_chat import OpenAIChatVLM
from rvt_bench.core.ranges import RETRIES, ROUNDS, SECONDS, SEED, TEMPERATURE, TOKENS, within


def _keyword_defaults(cls: type) -> dict[str, Any]:
    return {k: p.default for k, p in inspect.signature(cls).parameters.items() if p.default is not inspect.Parameter.empty}


_AGENT, _SAM3 = _keyword_defaults(Sam3AgentAdapter), _keyword_defaults(Sam3Adapter)
_OPENAI, _HF = _keyword_defaults(OpenAIChatVLM), _keyword_defaults(HFVLM)


@dataclass
class Sam3ToolConfig:
    """`model.sam3`: the segment_phrase tool's Sam3Adapter arguments (the tool passes the agent's
    phrase itself, so Sam3Adapter's `prompt` and `name` are not settings here)."""

    checkpoint: str = _SAM3["checkpoint"]
    threshold: float = within(_SAM3["threshold"], ge=0, le=1)
    mask_threshold: float = within(_SAM3["mask_threshold"], ge=0, le=1)
    device: str = _SAM3["device"]
    dtype: str = _SAM3["dtype"]


@dataclass
class Sam3AgentConfig:
    """The `model` node of `+model=sam3_agent`: Sam3AgentAdapter's arguments with its defaults and
    ranges; the openai backend's keys (base_url: the YAML's local server; api_key None = $OPENAI_API_KEY,
    else "EMPTY"; extra_body None = none) and the hf backend's, each with its backend's default. Where a
    server is reached and how patiently are not in the run's fingerprint (bench/harness/manifest.py)."""

    _target_: str = MISSING
    name: str = _AGENT["name"]
    backend: str = _AGENT["backend"]
    model: str = MISSING
    prompts_dir: Optional[str] = _AGENT["prompts_dir"]
    max_generations: int = within(_AGENT["max_generations"], ge=0, le=ROUNDS)
    max_new_tokens: int = within(_AGENT["max_new_tokens"], ge=1, le=TOKENS)
    temperature: float = within(_AGENT["temperature"], ge=0, le=TEMPERATURE)
    top_p: float = within(_AGENT["top_p"], gt=0, le=1)
    seed: int = within(_AGENT["seed"], ge=0, le=SEED)
    key_frame: str = _AGENT["key_frame"]
    video_match_iou: float = within(_AGENT["video_match_iou"], ge=0, le=1)
    sam3: Sam3ToolConfig = field(default_factory=Sam3ToolConfig)
    base_url: str = "http://localhost:8000/v1"
    api_key: Optional[str] = _OPENAI["api_key"]
    image_format: str = _OPENAI["image_format"]
    extra_body: Optional[Dict[str, Any]] = _OPENAI["extra_body"]
    timeout_s: float = within(_OPENAI["timeout_s"], gt=0, le=SECONDS)
    max_retries: int = within(_OPENAI["max_retries"], ge=0, le=RETRIES)
    backoff_s: float = within(_OPENAI["backoff_s"], ge=0, le=SECONDS)
    backoff_max_s: float = within(_OPENAI["backoff_max_s"], ge=0, le=SECONDS)
    revision: str = _HF["revision"]
    device: str = _HF["device"]
    dtype: str = _HF["dtype"]
    trust_remote_code: bool = _HF["trust_remote_code"]
