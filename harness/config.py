"""Structured configs (Hydra ConfigStore dataclasses): the schemas of `run`, `leaderboard`, `judge`,
the models (`model` = conf/model/dtr1.yaml, jit.yaml, vlm.yaml), the sandbox and the DT-R1 training
budgets (`rollout` of conf/train/dtr1_grpo.yaml).

One source of truth per default, and the choice is the same for every node: the default lives in
the dataclass the code itself reads (RunConfig here, leaderboards.config.LeaderboardConfig,
metrics.judge.Judge's signature, adapters.dtr1.rollout.RolloutLimits and grammar.Spans,
adapters.sandbox.runner.SandboxSettings, the JiT and VLM adapters' signatures and their settings
dataclasses, the VLM backends' signatures); the YAML files extend these schemas and hold only what
differs (an override, with its reason) and what the code cannot have a default for (a `_target_`,
a model id, prompt texts, `model: ???`). Hydra composes the schema first, so
`python run_bench.py --cfg job` prints every default, and a key that is not in the schema (a typo
on the command line or in a YAML file) or a value of the wrong type fails at compose time with
Hydra's error naming the key and the schema ("Key 'fial_fast' not in 'RunConfig'").

The schemas are registered when this module is imported (with loaders.config's `dataset` schema):
run_bench.py, train_dtr1.py and tests/conftest.py import it; code that composes conf/ with
hydra.compose must import it first.
"""
from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, field, fields, make_dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf, open_dict

from adapters.dtr1.grammar import Spans
from adapters.dtr1.rollout import RolloutLimits
from adapters.jit.adapter import SANDBOX_KEYS as JIT_SANDBOX_KEYS
from adapters.jit.adapter import JiTAdapter, Smoothing, TokenBudgets
from adapters.sandbox.runner import SandboxSettings
from adapters.vlm.adapter import FrameSampling, Generation, Think, VLMAdapter
from adapters.vlm.hf import HFVLM
from adapters.vlm.openai_chat import OpenAIChatVLM
from core.types import RETRYABLE
from harness.bootstrap import DEFAULT_B, DEFAULT_SEED
from leaderboards.config import LeaderboardConfig
import loaders.config  # noqa: F401  registers the `dataset` schema (schema/dataset): one import registers every schema
from metrics.judge import Judge

CONF = Path(__file__).resolve().parent.parent / "conf"

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
    """The DT-R1 sandbox (`model.sandbox`, `rollout.sandbox`): adapters.sandbox.runner.SandboxSettings'
    fields, defaults and documentation. start_timeout_s is left out: interpreter start-up patience,
    not a limit, and a key that was never in the config (a new key would rename every run directory).""")
JiTSandboxConfig = _sandbox_schema(
    "JiTSandboxConfig", JIT_SANDBOX_KEYS,
    """JiT's reasoning-program sandbox (`model.sandbox` of conf/model/jit.yaml): the SandboxSettings
    fields adapters.jit.adapter.SANDBOX_KEYS names, with SandboxSettings' defaults.""")


@dataclass
class BootstrapConfig:
    """95% CIs of the headline metrics (harness/bootstrap.py). B: resamples (0 = no CIs)."""

    B: int = DEFAULT_B
    seed: int = DEFAULT_SEED


@dataclass
class RunConfig:
    """The `run` node: where a run goes and how the harness drives it (none of it changes a number).

    root:          run directories go to <root>/<dataset>/<model>/<name>.
    name:          None = the config's fingerprint (same config -> same directory -> resume).
    shard, num_shards: this process predicts samples[shard::num_shards].
    merge:         true = predict nothing, score the union of all shards' predictions.
    limit:         only the first N samples (debugging; not published).
    fail_fast:     the first failing sample stops the run with its traceback.
    score_workers: processes for scoring (videos at scale: 2+ pays off).
    verify_frames: decode every frame before predicting; a corrupt frame fails its sample (kind data).
    batch_size:    samples predicted together; None = the adapter's own (results do not depend on it).
    retry_failed:  failure kinds a resume predicts again (default core.types.RETRYABLE): failures
                   outside the model's output (a server that was down, a missing package, a frame
                   since repaired); parse failures (the model's own output) are final.
    max_attempts:  records per sample at most: a failure that keeps recurring stays a failure.
    bootstrap:     BootstrapConfig.
    report:        write report.html at the end of every full run (harness/report); a failure is one warning.
    """

    root: str = "runs"
    name: Optional[str] = None
    shard: int = 0
    num_shards: int = 1
    merge: bool = False
    limit: Optional[int] = None
    fail_fast: bool = False
    score_workers: int = 1
    verify_frames: bool = True
    batch_size: Optional[int] = None
    # Any, not List[str]: the runner also takes one kind as a string (run.retry_failed=adapter).
    retry_failed: Any = field(default_factory=lambda: list(RETRYABLE))
    max_attempts: int = 3
    bootstrap: BootstrapConfig = field(default_factory=BootstrapConfig)
    report: bool = True


@dataclass
class JudgeConfig:
    """The `judge` node without a judge (conf/judge/none.yaml). _target_: None = no judge.
    max_failure_rate: read by the runner, not the judge: publishing refuses a run whose
    unscored-verdict rate exceeds it (metrics.json still records it)."""

    _target_: Optional[str] = None
    max_failure_rate: float = 0.02


_JUDGE = {k: p.default for k, p in inspect.signature(Judge).parameters.items() if p.default is not inspect.Parameter.empty}


@dataclass
class OpenAIJudgeConfig(JudgeConfig):
    """metrics.judge.Judge's keyword arguments (conf/judge/openai.yaml); the defaults are Judge's own
    (see its docstring), base_url has none there and is OpenAI's here."""

    _target_: Optional[str] = "metrics.judge.Judge"
    model: str = MISSING
    base_url: str = "https://api.openai.com/v1"
    api_key: Optional[str] = _JUDGE["api_key"]
    template: str = _JUDGE["template"]
    template_version: int = _JUDGE["template_version"]
    timeout_s: float = _JUDGE["timeout_s"]
    max_retries: int = _JUDGE["max_retries"]
    backoff_s: float = _JUDGE["backoff_s"]
    backoff_max_s: float = _JUDGE["backoff_max_s"]
    max_concurrency: int = _JUDGE["max_concurrency"]
    cache_dir: Optional[str] = _JUDGE["cache_dir"]
    temperature: float = _JUDGE["temperature"]
    max_tokens: int = _JUDGE["max_tokens"]


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
    perception): adapters.dtr1.adapter.DTR1Adapter's arguments, the budgets of
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
    prompts): adapters.jit.adapter.JiTAdapter's arguments, documented there, with its keyword
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
    SAM2 and the prompts): adapters.vlm.adapter.VLMAdapter's arguments, documented there, with its
    keyword defaults, FrameSampling, Generation and Think; the openai backend's keys with
    adapters.vlm.openai_chat.OpenAIChatVLM's defaults (base_url: a local vLLM / SGLang server;
    api_key None = $OPENAI_API_KEY, else "EMPTY"; extra_body: extra request fields, e.g. vLLM's
    {top_k: 1}); the hf backend's with adapters.vlm.hf.HFVLM's. Where a server is reached and how
    patiently are not in the run's fingerprint (harness/manifest.py)."""

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


def limits_from(node: Any) -> RolloutLimits:
    """RolloutLimits from a DTR1Config / TrainRolloutConfig node (or a mapping with its keys)."""
    return RolloutLimits(int(node["max_rounds"]), int(node["max_new_tokens"]), int(node["max_total_tokens"]),
                         int(node["twin_max_chars"]), Spans(**{k: int(v) for k, v in dict(node["grammar"]).items()}),
                         str(node.get("twin_style", RolloutLimits.twin_style)))


# name -> (group or None, node). conf/ selects them by name in defaults lists: config.yaml
# `run_schema@run`, judge/*.yaml `judge_schema` / `openai_judge_schema`, model/dtr1.yaml
# `dtr1_schema` (jit.yaml, vlm.yaml alike), train/dtr1_grpo.yaml `/train_rollout_schema@rollout`.
SCHEMAS: dict[str, tuple[str | None, type]] = {
    "run_schema": (None, RunConfig),
    "leaderboard_schema": (None, LeaderboardConfig),
    "judge_schema": ("judge", JudgeConfig),
    "openai_judge_schema": ("judge", OpenAIJudgeConfig),
    "dtr1_schema": ("model", DTR1Config),
    "jit_schema": ("model", JiTConfig),
    "vlm_schema": ("model", VLMConfig),
    "train_rollout_schema": (None, TrainRolloutConfig),
}


def group_node(group: str, option: str, overrides: list[str] | None = None) -> DictConfig:
    """The `group` node of conf/config.yaml with `option` chosen (e.g. ("judge", "openai")): schema
    defaults + the option's YAML + `overrides` (["judge.model=m"]), as run_bench.py composes it.
    Raises hydra.errors.ConfigCompositionException for an unknown option or key."""
    from hydra import compose, initialize_config_dir

    # conf/config.yaml's defaults list has no model or dataset: those are added (+model=jit)
    add = "+" if group in ("model", "dataset") else ""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=[f"{add}{group}={option}", *(overrides or [])])[group]


# Read by conf/model/dtr1.yaml (`${oc.select:policy.rollout...}`: a policy sizes DT-R1's twin for
# itself), an argument of no policy.
POLICY_ROLLOUT = "rollout"


def adapter_node(model: DictConfig) -> DictConfig:
    """The `model` node as hydra.utils.instantiate takes it: resolved (the policy's `rollout` block
    has been read), without its policy's `rollout` block. The block stays in the config, and so in
    the run's fingerprint and config.yaml; `model` itself is not changed."""
    node = copy.deepcopy(model)  # keeps its parent, so interpolations resolve against the whole config
    OmegaConf.resolve(node)
    policy = node.get("policy")
    if isinstance(policy, DictConfig) and POLICY_ROLLOUT in policy:
        with open_dict(policy):
            del policy[POLICY_ROLLOUT]
    return node


def with_schemas(cfg: DictConfig) -> DictConfig:
    """`cfg` with its `run`, `leaderboard` and `judge` nodes checked against and completed from
    RunConfig, LeaderboardConfig and JudgeConfig (no judge where `judge` is absent): what
    run_bench.py composes already; a config built by hand (tests, scripts) gets the same defaults,
    so the harness reads attributes, never `.get(key, default)`. Raises omegaconf's
    ValidationError / ConfigKeyError for a key outside a schema or a value of the wrong type."""
    out = copy.deepcopy(cfg)
    with open_dict(out):
        out.run = OmegaConf.merge(OmegaConf.structured(RunConfig), cfg.get("run") or {})
        out.leaderboard = OmegaConf.merge(OmegaConf.structured(LeaderboardConfig), cfg.get("leaderboard") or {})
        if cfg.get("judge") is None:
            out.judge = OmegaConf.structured(JudgeConfig)
    return out


def register(store: ConfigStore | None = None) -> None:
    """Store every schema of SCHEMAS in Hydra's ConfigStore (idempotent)."""
    store = store or ConfigStore.instance()
    for name, (group, node) in SCHEMAS.items():
        store.store(name=name, group=group, node=node)


register()

__all__ = ["BootstrapConfig", "DTR1Config", "JiTConfig", "JiTPromptsConfig", "JiTSandboxConfig", "JudgeConfig",
           "LeaderboardConfig", "OpenAIJudgeConfig", "RunConfig", "SCHEMAS", "SandboxConfig", "SpansConfig",
           "TrainRolloutConfig", "VLMConfig", "VLMPromptsConfig", "adapter_node", "group_node", "limits_from",
           "register", "with_schemas"]
