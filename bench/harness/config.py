"""Structured configs (Hydra ConfigStore dataclasses): the schemas of `run`, `leaderboard`, `judge`
here; each model's beside its code; one registry for all of them, conf/schemas.yaml (name ->
group and "module:attr"), which `register` reads: the harness composes the schemas it is given
and imports no model to build them.

One source of truth per default, and the choice is the same for every node: the default lives in
the dataclass the code itself reads (RunConfig here, rvt_bench.leaderboards.config.LeaderboardConfig,
rvt_bench.metrics.judge.Judge's signature, and each model's own: its adapter's signature and
settings dataclasses, e.g. DT-R1's rollout limits); the YAML files extend these schemas and hold only what
differs (an override, with its reason) and what the code cannot have a default for (a `_target_`,
a model id, prompt texts, `model: ???`). Hydra composes the schema first, so
`python run_bench.py --cfg job` prints every default, and a key that is not in the schema (a typo
on the command line or in a YAML file) or a value of the wrong type fails at compose time with
Hydra's error naming the key and the schema ("Key 'fial_fast' not in 'RunConfig'").

The schemas are registered when this module is imported (with rvt_bench.loaders.config's `dataset` schema):
run_bench.py, train_dtr1.py and tests/conftest.py import it; code that composes conf/ with
hydra.compose must import it first.

A numeric setting's range is in its schema (rvt_bench.core.ranges.within: `limit >= 1`); the runner
checks every range before a run (`check_ranges`), so `run.limit=0` is one line, not a traceback.
"""
from __future__ import annotations

import copy
import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf, open_dict

from rvt_bench.core.paths import CONF_DIR, shipped
from rvt_bench.core.types import RETRYABLE, ConfigError
from rvt_bench.harness.bootstrap import DEFAULT_B, DEFAULT_SEED
from rvt_bench.core.ranges import BATCH, COUNT, RETRIES, SECONDS, SEED, TEMPERATURE, TOKENS, VERSION, WORKERS, within
from rvt_bench.leaderboards.config import LeaderboardConfig
import rvt_bench.loaders.config  # noqa: F401  registers the `dataset` schema (schema/dataset): one import registers every schema
from rvt_bench.metrics.judge import Judge


CONF = CONF_DIR
# ${repo:demo} in conf/ -> absolute path of the shipped demo, whatever the working directory.
OmegaConf.register_new_resolver("repo", shipped, replace=True)


@dataclass
class BootstrapConfig:
    """95% CIs of the headline metrics (bench/harness/bootstrap.py). B: resamples (0 = no CIs)."""

    B: int = within(DEFAULT_B, ge=0, le=COUNT)
    seed: int = within(DEFAULT_SEED, ge=0, le=SEED)


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
    stop_after_same_failures: K; when the first K samples an invocation predicts all fail alike for a
                   reason of the setup (no prediction file, the same server error, a model that cannot
                   load), the run stops with one line naming the setting to fix (exit 9); 0: never.
                   Samples predicted again (retry_failed) do not count: a resume of a run whose
                   missing predictions failed their samples goes on to scoring.
    bootstrap:     BootstrapConfig.
    report:        write report.html at the end of every full run (bench/harness/report); a failure is one warning.
    verbose:       the terminal summary prints every metric and breakdown value (default: the headline
                   table, the model's funnel, failures and warnings; the rest is in report.html).
    """

    root: str = "runs"
    name: Optional[str] = None
    shard: int = within(0, ge=0, le=COUNT)
    num_shards: int = within(1, ge=1, le=COUNT)
    merge: bool = False
    limit: Optional[int] = within(None, ge=1, le=COUNT)
    fail_fast: bool = False
    score_workers: int = within(1, ge=1, le=WORKERS)
    verify_frames: bool = True
    batch_size: Optional[int] = within(None, ge=1, le=BATCH)
    # Any, not List[str]: the runner also takes one kind as a string (run.retry_failed=adapter).
    retry_failed: Any = field(default_factory=lambda: list(RETRYABLE))
    max_attempts: int = within(3, ge=1, le=RETRIES)
    stop_after_same_failures: int = within(5, ge=0, le=COUNT)
    bootstrap: BootstrapConfig = field(default_factory=BootstrapConfig)
    report: bool = True
    verbose: bool = False


@dataclass
class JudgeConfig:
    """The `judge` node without a judge (conf/judge/none.yaml). _target_: None = no judge.
    max_failure_rate: read by the runner, not the judge: publishing refuses a run whose
    unscored-verdict rate exceeds it (metrics.json still records it)."""

    _target_: Optional[str] = None
    max_failure_rate: float = within(0.02, ge=0, le=1)


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
    template_version: int = within(_JUDGE["template_version"], ge=1, le=VERSION)
    timeout_s: float = within(_JUDGE["timeout_s"], gt=0, le=SECONDS)
    max_retries: int = within(_JUDGE["max_retries"], ge=0, le=RETRIES)
    backoff_s: float = within(_JUDGE["backoff_s"], ge=0, le=SECONDS)
    backoff_max_s: float = within(_JUDGE["backoff_max_s"], ge=0, le=SECONDS)
    max_concurrency: int = within(_JUDGE["max_concurrency"], ge=1, le=WORKERS)
    cache_dir: Optional[str] = _JUDGE["cache_dir"]
    temperature: float = within(_JUDGE["temperature"], ge=0, le=TEMPERATURE)
    max_tokens: int = within(_JUDGE["max_tokens"], ge=1, le=TOKENS)

@dataclass
class LoggerConfig:
    """The `logger` node without an experiment logger (conf/logger/none.yaml). _target_: None = none."""

    _target_: Optional[str] = None


@dataclass
class TensorBoardLoggerConfig(LoggerConfig):
    """rvt_bench.harness.loggers.tensorboard_logger.TensorBoardLogger's arguments (conf/logger/tensorboard.yaml)."""

    _target_: Optional[str] = "rvt_bench.harness.loggers.tensorboard_logger.TensorBoardLogger"
    dir: Optional[str] = None
    max_images: int = within(32, ge=0, le=COUNT)


@dataclass
class WandbLoggerConfig(LoggerConfig):
    """rvt_bench.harness.loggers.wandb_logger.WandbLogger's arguments (conf/logger/wandb.yaml)."""

    _target_: Optional[str] = "rvt_bench.harness.loggers.wandb_logger.WandbLogger"
    project: str = "rvt-bench"
    entity: Optional[str] = None
    group: Optional[str] = None
    tags: list = field(default_factory=list)
    mode: Optional[str] = None
    dir: Optional[str] = None
    max_images: int = within(64, ge=0, le=COUNT)


SCHEMA_FILE = CONF / "schemas.yaml"


def schemas(path=SCHEMA_FILE) -> dict[str, tuple[str | None, type]]:
    """name -> (group or None, dataclass) of every schema `path` (conf/schemas.yaml) lists, each
    imported from its "module:attr". Raises ImportError / AttributeError naming a schema that
    does not import."""
    out: dict[str, tuple[str | None, type]] = {}
    for name, entry in (OmegaConf.to_container(OmegaConf.load(path)) or {}).items():
        module, _, attr = str(entry["node"]).partition(":")
        out[str(name)] = (entry.get("group"), getattr(importlib.import_module(module), attr))
    return out


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
        if cfg.get("logger") is None:
            out.logger = OmegaConf.structured(LoggerConfig)
    return out


def check_ranges(cfg: DictConfig) -> None:
    """Raise ConfigError listing every numeric setting of `cfg` outside its schema's range
    (rvt_bench.core.ranges), dataset.limits included."""
    from rvt_bench.core.ranges import problems

    found = problems(cfg)
    if found:
        raise ConfigError("; ".join(dict.fromkeys(found)) + " (python run_bench.py --cfg job shows every setting)")


RUN_NAME_MAX = 200  # one path component, well under every filesystem's 255-byte name limit


def check_run_name(cfg: DictConfig) -> None:
    """Raise ConfigError when run.name is not one plain directory name: it names the run's
    directory under run.root/<dataset>/<model>/ and its leaderboard row, so a separator or "..",
    control or format characters, an unencodable string (a lone surrogate) or a name over
    RUN_NAME_MAX characters is refused before any work (such a name put the run outside run.root,
    or failed only at the leaderboard after every sample was predicted)."""
    import unicodedata

    name = OmegaConf.select(cfg, "run.name", default=None)
    if name is None or name == "":
        return
    name = str(name)
    shown = name.encode("unicode_escape", "backslashreplace").decode("ascii")[:80]
    why = None
    if "/" in name or "\\" in name or name in (".", ".."):
        why = "a path separator or '.'/'..' (it is one directory name under run.root)"
    elif any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in name):
        why = "control or invisible characters"
    elif len(name) > RUN_NAME_MAX:
        why = f"{len(name)} characters (at most {RUN_NAME_MAX})"
    if why:
        raise ConfigError(f"run.name='{shown}' has {why}: choose a plain name such as run.name=my-try")


def register(store: ConfigStore | None = None) -> None:
    """Store every schema of conf/schemas.yaml in Hydra's ConfigStore (idempotent)."""
    store = store or ConfigStore.instance()
    for name, (group, node) in schemas().items():
        store.store(name=name, group=group, node=node)


register()

__all__ = ["BootstrapConfig", "JudgeConfig", "LeaderboardConfig", "LoggerConfig", "OpenAIJudgeConfig", "RunConfig",
           "SCHEMA_FILE", "TensorBoardLoggerConfig", "WandbLoggerConfig", "adapter_node", "check_ranges", "group_node",
           "check_run_name", "register", "schemas", "with_schemas"]
