"""Structured configs of the model nodes (Hydra ConfigStore dataclasses, registered by
bench/harness/config.py with the run-level ones): `model` = conf/model/dtr1.yaml (DTR1Config), jit.yaml
(JiTConfig), vlm.yaml (VLMConfig); the sandbox (SandboxConfig, JiTSandboxConfig); the DT-R1
training budgets (`rollout` of conf/train/dtr1_grpo.yaml, TrainRolloutConfig).

Every default here is read from the code that uses it (bench/harness/config.py's docstring says why):
rvt_bench.adapters.dtr1.rollout.RolloutLimits and grammar.Spans, rvt_bench.adapters.sandbox.runner.SandboxSettings,
the JiT and VLM adapters' keyword defaults and settings dataclasses (Smoothing, TokenBudgets;
FrameSampling, Generation, Think), the VLM backends' signatures. Prompt texts, model ids and
`_target_`s have no code default: the YAML files hold them, the schemas name their keys.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any, Dict, List, Optional

from omegaconf import MISSING, OmegaConf

from rvt_bench.adapters.dtr1.grammar import Spans
from rvt_bench.adapters.dtr1.rollout import RolloutLimits
from rvt_bench.adapters.jit.adapter import SANDBOX_KEYS as JIT_SANDBOX_KEYS
from rvt_bench.adapters.jit.adapter import JiTAdapter, Smoothing, TokenBudgets
from rvt_bench.adapters.sandbox.runner import SandboxSettings
from rvt_bench.adapters.vlm.adapter import FrameSampling, Generation, Think, VLMAdapter
from rvt_bench.adapters.vlm.hf import HFVLM
from rvt_bench.adapters.vlm.openai_chat import OpenAIChatVLM


# Spans is frozen (a grammar's bounds must not change under it); a config node must take overrides.
SpansConfig = make_dataclass("SpansConfig", [(f.name, int, f.default) for f in fields(Spans)])


def _keyword_defaults(cls: type) -> dict[str, Any]:
    return {k: p.default for k, p in inspect.signature(cls).parameters.items() if p.default is not inspect.Parameter.empty}


def _sandbox_schema(name: str, keys: tuple[str, ...], doc: str) -> type:
    # SandboxSettings is frozen (a pool is keyed by its settings); a config node must take overrides.
    schema = make_dataclass(name, [(f.name, type(f.default), f.default) for f in fields(SandboxSettings) if f.name in keys])
    schema.__doc__ = doc
    return schema


SandboxConfig = _sandbox_schema(
    "SandboxConfig", tuple(f.name for f in fields(SandboxSettings) if f.name != "start_timeout_s"),
    """The DT-R1 sandbox (`model.sandbox`, `rollout.sandbox`): rvt_bench.adapters.sandbox.runner.SandboxSettings'
    fields, defaults and documentation. start_timeout_s is left out: interpreter start-up patience,
    not a limit, and a key that was never in the config (a new key would rename every run directory).""")
JiTSandboxConfig = _sandbox_schema(
    "JiTSandboxConfig", JIT_SANDBOX_KEYS,
    """JiT's reasoning-program sandbox (`model.sandbox` of conf/model/jit.yaml): the SandboxSettings
    fields rvt_bench.adapters.jit.adapter.SANDBOX_KEYS names, with SandboxSettings' defaults.""")


@dataclass
class RolloutBudgetsConfig:
    """The DT-R1 rollout budgets, shared by evaluation (DTR1Config) and training
    (TrainRolloutConfig) so both roll out alike; defaults from RolloutLimits and Spans."""

    max_rounds: int = RolloutLimits.max_rounds
    max_new_tokens: int = RolloutLimits.max_new_tokens
    max_total_tokens: int = RolloutLimits.max_total_tokens
    twin_max_chars: int = RolloutLimits.twin_max_chars
    twin_style: str = RolloutLimits.twin_style
    grammar: SpansConfig = field(default_factory=SpansConfig)  # type: ignore[valid-type]
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)  # type: ignore[valid-type]


@dataclass
class DTR1Config(RolloutBudgetsConfig):
    """The `model` node of DT-R1 (conf/model/dtr1.yaml, which names _target_, policy and
    perception): rvt_bench.adapters.dtr1.adapter.DTR1Adapter's arguments, the budgets of
    RolloutBudgetsConfig, the sandbox of SandboxConfig."""

    _target_: str = MISSING
    name: str = MISSING
    policy: Any = MISSING
    perception: Any = MISSING


@dataclass
class TrainRolloutConfig(RolloutBudgetsConfig):
    """The `rollout` node of GRPO training (conf/train/dtr1_grpo.yaml): the budgets of evaluation.
    batch_size: rollouts decoded together / requests in flight to a vLLM server."""

    batch_size: int = 8


_JIT = _keyword_defaults(JiTAdapter)


@dataclass
class JiTPromptsConfig:
    """JiT's prompts (adapters/jit/prompts.py, which documents the fields): no defaults, the texts
    live in conf/model/jit.yaml; the schema names the keys so that a typo fails at compose time."""

    version: int = MISSING
    specialists: Dict[str, str] = MISSING
    planner_system: str = MISSING
    planner_user: str = MISSING
    answer_ids: str = MISSING
    answer_text: str = MISSING
    program: str = MISSING
    query_user: str = MISSING


@dataclass
class JiTConfig:
    """The `model` node of JiT (conf/model/jit.yaml, which names _target_, policy, perception and the
    prompts): rvt_bench.adapters.jit.adapter.JiTAdapter's arguments, documented there, with its keyword
    defaults, Smoothing, TokenBudgets and JiTSandboxConfig."""

    _target_: str = MISSING
    name: str = MISSING
    policy: Any = MISSING
    perception: Any = MISSING
    specialists: List[str] = field(default_factory=lambda: list(_JIT["specialists"]))
    window: int = _JIT["window"]
    min_motion: float = _JIT["min_motion"]
    similarity: float = _JIT["similarity"]
    graph_max_chars: int = _JIT["graph_max_chars"]
    smoothing: Smoothing = field(default_factory=Smoothing)
    max_new_tokens: TokenBudgets = field(default_factory=TokenBudgets)
    sandbox: JiTSandboxConfig = field(default_factory=JiTSandboxConfig)  # type: ignore[valid-type]
    prompts: JiTPromptsConfig = field(default_factory=JiTPromptsConfig)


_VLM, _OPENAI, _HF = _keyword_defaults(VLMAdapter), _keyword_defaults(OpenAIChatVLM), _keyword_defaults(HFVLM)


@dataclass
class VLMPromptsConfig:
    """The VLM's prompts (adapters/vlm/prompts.py, which documents the fields): no defaults but
    `system` (None = no system turn), the texts live in conf/model/vlm.yaml."""

    version: int = MISSING
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
    frames: FrameSampling = field(default_factory=FrameSampling)
    generation: Generation = field(default_factory=Generation)
    think: Think = field(default_factory=Think)
    grounding_fill: str = _VLM["grounding_fill"]
    sam2: Any = _VLM["sam2"]
    base_url: str = "http://localhost:8000/v1"
    api_key: Optional[str] = _OPENAI["api_key"]
    timeout_s: float = _OPENAI["timeout_s"]
    max_retries: int = _OPENAI["max_retries"]
    backoff_s: float = _OPENAI["backoff_s"]
    backoff_max_s: float = _OPENAI["backoff_max_s"]
    max_concurrency: int = _OPENAI["max_concurrency"]
    image_format: str = _OPENAI["image_format"]
    # {} rather than the backend's None: the config's value since the first release (fingerprints)
    extra_body: Dict[str, Any] = field(default_factory=dict)
    revision: str = _HF["revision"]
    device: str = _HF["device"]
    dtype: str = _HF["dtype"]
    batch_size: int = _HF["batch_size"]
    trust_remote_code: bool = _HF["trust_remote_code"]
    prompts: VLMPromptsConfig = field(default_factory=VLMPromptsConfig)


def rollout_default(key: str) -> Any:
    """RolloutLimits' default of `key`: `${rollout_default:twin_max_chars}` in conf/model/dtr1.yaml,
    the fallback of a value a policy config may set (`${oc.select:policy.rollout.<key>,...}`), so
    that fallback is not a second copy of the default. Registered as an OmegaConf resolver when
    this module is imported; AttributeError for a key RolloutLimits does not have."""
    return getattr(RolloutLimits, key)


OmegaConf.register_new_resolver("rollout_default", rollout_default, replace=True)


def limits_from(node: Any) -> RolloutLimits:
    """RolloutLimits from a DTR1Config / TrainRolloutConfig node (or a mapping with its keys; KeyError
    naming a missing one)."""
    return RolloutLimits(int(node["max_rounds"]), int(node["max_new_tokens"]), int(node["max_total_tokens"]),
                         int(node["twin_max_chars"]), Spans(**{k: int(v) for k, v in dict(node["grammar"]).items()}),
                         str(node["twin_style"]))


__all__ = ["DTR1Config", "JiTConfig", "JiTPromptsConfig", "JiTSandboxConfig", "RolloutBudgetsConfig", "SandboxConfig",
           "SpansConfig", "TrainRolloutConfig", "VLMConfig", "VLMPromptsConfig", "limits_from", "rollout_default"]
