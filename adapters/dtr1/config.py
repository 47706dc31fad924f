"""The structured configs of DT-R1's nodes (Hydra ConfigStore dataclasses, registered under the
names conf/schemas.yaml gives them): `model` = conf/model/dtr1.yaml (DTR1Config), its sandbox
(SandboxConfig) and grammar spans (SpansConfig), the GRPO training budgets (`rollout` of
conf/train/dtr1_grpo.yaml, TrainRolloutConfig).

Every default here is read from the code that uses it: rvt_bench.adapters.dtr1.rollout.RolloutLimits
and grammar.Spans, rvt_bench.adapters.sandbox.runner.SandboxSettings (docs/architecture.md
"Conventions"); `_target_`, policy and perception have none: conf/model/dtr1.yaml names them.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any

from omegaconf import MISSING, OmegaConf

from rvt_bench.adapters.dtr1.grammar import Spans
from rvt_bench.adapters.dtr1.rollout import RolloutLimits
from rvt_bench.adapters.sandbox.config import sandbox_schema
from rvt_bench.adapters.sandbox.runner import SandboxSettings
from rvt_bench.core.ranges import BATCH, CHARS, ROUNDS, SANDBOX_CAPS, TOKENS, ranged, within

# llama.cpp expands a grammar's {0,n} repetition into n rules: a span of more than 2^16 characters
# would build a grammar of that many rules per span before the first token
_SPAN_CAPS = {"think_chars": 1 << 16, "code_chars": 1 << 16, "text_chars": 1 << 16, "max_boxes": 1000, "code_rounds": ROUNDS}
# Spans is frozen (a grammar's bounds must not change under it); a config node must take overrides.
SpansConfig = make_dataclass("SpansConfig", [(f.name, int, within(f.default, ge=1, le=_SPAN_CAPS[f.name]))
                                             for f in fields(Spans)])


_SANDBOX_DOC = """The DT-R1 sandbox (`model.sandbox`, `rollout.sandbox`): rvt_bench.adapters.sandbox.runner.SandboxSettings'
    fields, defaults and documentation. start_timeout_s is left out: interpreter start-up patience,
    not a limit, and a key that was never in the config (a new key would rename every run directory)."""
# the sandbox's schema with the upper bounds of rvt_bench.core.ranges (SANDBOX_CAPS) added
SandboxConfig = ranged(sandbox_schema("SandboxConfig", tuple(f.name for f in fields(SandboxSettings) if f.name != "start_timeout_s"),
                                      _SANDBOX_DOC), SANDBOX_CAPS, "SandboxConfig", _SANDBOX_DOC)


@dataclass
class RolloutBudgetsConfig:
    """The DT-R1 rollout budgets and prompt settings (twin_style; task_hint: the user message names
    the task, a variant off the paper's protocol), shared by evaluation (DTR1Config) and training
    (TrainRolloutConfig) so both roll out alike; defaults from RolloutLimits and Spans."""

    max_rounds: int = within(RolloutLimits.max_rounds, ge=1, le=ROUNDS)
    max_new_tokens: int = within(RolloutLimits.max_new_tokens, ge=1, le=TOKENS)
    max_total_tokens: int = within(RolloutLimits.max_total_tokens, ge=1, le=TOKENS)
    twin_max_chars: int = within(RolloutLimits.twin_max_chars, ge=1, le=CHARS)
    twin_style: str = RolloutLimits.twin_style
    task_hint: bool = RolloutLimits.task_hint
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
    embeddings: bool = False  # list DINOv2 and describe the instance embeddings in the prompt


@dataclass
class TrainRolloutConfig(RolloutBudgetsConfig):
    """The `rollout` node of GRPO training (conf/train/dtr1_grpo.yaml): the budgets of evaluation.
    batch_size: rollouts decoded together / requests in flight to a vLLM server."""

    batch_size: int = within(8, ge=1, le=BATCH)


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
                         str(node["twin_style"]), bool(node["task_hint"]))
