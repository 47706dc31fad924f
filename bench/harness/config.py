"""Structured configs (Hydra ConfigStore dataclasses): the schemas of `run`, `leaderboard`, `judge`
here, of the models (`model` = conf/model/dtr1.yaml, jit.yaml, vlm.yaml), the sandbox and the DT-R1
training budgets (`rollout` of conf/train/dtr1_grpo.yaml) in bench/harness/model_config.py; one registry
(SCHEMAS) for all of them.

One source of truth per default, and the choice is the same for every node: the default lives in
the dataclass the code itself reads (RunConfig here, rvt_bench.leaderboards.config.LeaderboardConfig,
rvt_bench.metrics.judge.Judge's signature, rvt_bench.adapters.dtr1.rollout.RolloutLimits and grammar.Spans,
rvt_bench.adapters.sandbox.runner.SandboxSettings, the JiT and VLM adapters' signatures and their settings
dataclasses, the VLM backends' signatures); the YAML files extend these schemas and hold only what
differs (an override, with its reason) and what the code cannot have a default for (a `_target_`,
a model id, prompt texts, `model: ???`). Hydra composes the schema first, so
`python run_bench.py --cfg job` prints every default, and a key that is not in the schema (a typo
on the command line or in a YAML file) or a value of the wrong type fails at compose time with
Hydra's error naming the key and the schema ("Key 'fial_fast' not in 'RunConfig'").

The schemas are registered when this module is imported (with rvt_bench.loaders.config's `dataset` schema):
run_bench.py, train_dtr1.py and tests/conftest.py import it; code that composes conf/ with
hydra.compose must import it first.
"""
from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf, open_dict

from rvt_bench.core.paths import CONF_DIR, shipped
from rvt_bench.core.types import RETRYABLE
from rvt_bench.harness.bootstrap import DEFAULT_B, DEFAULT_SEED
# the model nodes' schemas live there; importing them from here still works
from rvt_bench.harness.model_config import (DTR1Config, JiTConfig, JiTPromptsConfig, JiTSandboxConfig, SandboxConfig, SpansConfig,
                                            TrainRolloutConfig, VLMConfig, VLMPromptsConfig, limits_from)
from rvt_bench.leaderboards.config import LeaderboardConfig
import rvt_bench.loaders.config  # noqa: F401  registers the `dataset` schema (schema/dataset): one import registers every schema
from rvt_bench.metrics.judge import Judge


CONF = CONF_DIR
# ${repo:demo} in conf/ -> absolute path of the shipped demo, whatever the working directory.
OmegaConf.register_new_resolver("repo", shipped, replace=True)


@dataclass
class BootstrapConfig:
    """95% CIs of the headline metrics (bench/harness/bootstrap.py). B: resamples (0 = no CIs)."""

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
    retry_failed:  failure kinds a resume predicts again (default rvt_bench.core.types.RETRYABLE): failures
                   outside the model's output (a server that was down, a missing package, a frame
                   since repaired); parse failures (the model's own output) are final.
    max_attempts:  records per sample at most: a failure that keeps recurring stays a failure.
    bootstrap:     BootstrapConfig.
    report:        write report.html at the end of every full run (bench/harness/report); a failure is one warning.
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
    """rvt_bench.metrics.judge.Judge's keyword arguments (conf/judge/openai.yaml); the defaults are Judge's own
    (see its docstring), base_url has none there and is OpenAI's here."""

    _target_: Optional[str] = "rvt_bench.metrics.judge.Judge"
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
# The model node's resource request for one Slurm job (conf/model/precomputed.yaml): not an argument.
MODEL_RESOURCES = "resources"


def adapter_node(model: DictConfig) -> DictConfig:
    """The `model` node as hydra.utils.instantiate takes it: resolved (the policy's `rollout` block
    has been read), without its policy's `rollout` block and without `resources` (what one Slurm job
    asks for, read by conf/hydra/launcher/slurm.yaml). The rollout block stays in the config, and so
    in the run's fingerprint and config.yaml; `model` itself is not changed."""
    node = copy.deepcopy(model)  # keeps its parent, so interpolations resolve against the whole config
    OmegaConf.resolve(node)
    if MODEL_RESOURCES in node:
        with open_dict(node):
            del node[MODEL_RESOURCES]
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
