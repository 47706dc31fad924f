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

from rvt_bench.harness.ranges import ranged, within

from rvt_bench.adapters.dtr1.grammar import Spans
from rvt_bench.adapters.dtr1.rollout import RolloutLimits
from rvt_bench.adapters.jit.adapter import SANDBOX_KEYS as JIT_SANDBOX_KEYS
from rvt_bench.adapters.jit.adapter import JiTAdapter, Smoothing, TokenBudgets
from rvt_bench.adapters.sandbox.runner import SandboxSettings
from rvt_bench.adapters.vlm.adapter import FrameSampling, Generation, Think, VLMAdapter
from rvt_bench.adapters.vlm.hf import HFVLM
from rvt_bench.adapters.vlm.openai_chat import OpenAIChatVLM


# Spans is frozen (a grammar's bounds must not change under it); a config node must take overrides.
SpansConfig = make_dataclass("SpansConfig", [(f.name, int, within(f.default, ge=1)) for f in fields(Spans)])


def _keyword_defaults(cls: type) -> dict[str, Any]:
    return {k: p.default for k, p in inspect.signature(cls).parameters.items() if p.default is not inspect.Parameter.empty}


# SandboxSettings' own checks (its __post_init__), stated as schema ranges so that they fail before the run;
# what a probe round needs at least is the sandbox preflight's to say
_SANDBOX_RANGES = {"timeout_s": {"gt": 0}, "memory_mb": {"gt": 0}, "max_output_chars": {"gt": 0},
                   "max_processes": {"gt": 0}, "disk_mb": {"gt": 0}, "pool_size": {"ge": 0}, "start_timeout_s": {"gt": 0}}


def _sandbox_schema(name: str, keys: tuple[str, ...], doc: str) -> type:
    # SandboxSettings is frozen (a pool is keyed by its settings); a config node must take overrides.
    schema = make_dataclass(name, [(f.name, type(f.default), within(f.default, **_SANDBOX_RANGES.get(f.name, {})))
                                   for f in fields(SandboxSettings) if f.name in keys])
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

    max_rounds: int = within(RolloutLimits.max_rounds, ge=1)
    max_new_tokens: int = within(RolloutLimits.max_new_tokens, ge=1)
    max_total_tokens: int = within(RolloutLimits.max_total_tokens, ge=1)
    twin_max_chars: int = within(RolloutLimits.twin_max_chars, ge=1)
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

    batch_size: int = within(8, ge=1)


_JIT = _keyword_defaults(JiTAdapter)
# the adapters' settings dataclasses stay theirs; the schemas are copies with ranges
SmoothingConfig = ranged(Smoothing, {"alpha": {"ge": 0, "le": 1}})
TokenBudgetsConfig = ranged(TokenBudgets, {f.name: {"ge": 1} for f in fields(TokenBudgets)})
FrameSamplingConfig = ranged(FrameSampling, {"num_frames": {"ge": 1}, "fps": {"gt": 0}, "min_pixels": {"ge": 1},
                                             "max_pixels": {"ge": 1}, "factor": {"ge": 1}})
GenerationConfig = ranged(Generation, {"max_new_tokens": {"ge": 1}, "temperature": {"ge": 0}, "top_p": {"gt": 0, "le": 1}})
ThinkConfig = ranged(Think, {"budget": {"ge": 1}})


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
    window: int = within(_JIT["window"], ge=1)
    min_motion: float = within(_JIT["min_motion"], ge=0)
    similarity: float = within(_JIT["similarity"], ge=0, le=1)
    graph_max_chars: int = within(_JIT["graph_max_chars"], ge=1)
    smoothing: SmoothingConfig = field(default_factory=SmoothingConfig)  # type: ignore[valid-type]
    max_new_tokens: TokenBudgetsConfig = field(default_factory=TokenBudgetsConfig)  # type: ignore[valid-type]
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
    frames: FrameSamplingConfig = field(default_factory=FrameSamplingConfig)  # type: ignore[valid-type]
    generation: GenerationConfig = field(default_factory=GenerationConfig)  # type: ignore[valid-type]
    think: ThinkConfig = field(default_factory=ThinkConfig)  # type: ignore[valid-type]
    grounding_fill: str = _VLM["grounding_fill"]
    sam2: Any = _VLM["sam2"]
    base_url: str = "http://localhost:8000/v1"
    api_key: Optional[str] = _OPENAI["api_key"]
    timeout_s: float = within(_OPENAI["timeout_s"], gt=0)
    max_retries: int = within(_OPENAI["max_retries"], ge=0)
    backoff_s: float = within(_OPENAI["backoff_s"], ge=0)
    backoff_max_s: float = within(_OPENAI["backoff_max_s"], ge=0)
    max_concurrency: int = within(_OPENAI["max_concurrency"], ge=1)
    image_format: str = _OPENAI["image_format"]
    # {} rather than the backend's None: the config's value since the first release (fingerprints)
    extra_body: Dict[str, Any] = field(default_factory=dict)
    revision: str = _HF["revision"]
    device: str = _HF["device"]
    dtype: str = _HF["dtype"]
    batch_size: int = within(_HF["batch_size"], ge=1)
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
