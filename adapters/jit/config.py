"""The structured config of JiT's `model` node (conf/model/jit.yaml; a Hydra ConfigStore dataclass
registered under the name conf/schemas.yaml gives it): JiTConfig, its prompts (JiTPromptsConfig)
and sandbox (JiTSandboxConfig). Every default is the adapter's own (rvt_bench.adapters.jit.adapter:
JiTAdapter's keyword defaults, Smoothing, TokenBudgets; the sandbox's from SandboxSettings); the
YAML holds the prompt texts, which have none.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List

from omegaconf import MISSING

from rvt_bench.adapters.jit.adapter import SANDBOX_KEYS, JiTAdapter, Smoothing, TokenBudgets
from rvt_bench.adapters.sandbox.config import sandbox_schema
from rvt_bench.core.ranges import CHARS, ROUNDS, SANDBOX_CAPS, SIDE, TOKENS, VERSION, ranged, within

_JIT = {k: p.default for k, p in inspect.signature(JiTAdapter).parameters.items() if p.default is not inspect.Parameter.empty}

# the adapter's settings dataclasses stay its own; the schemas are copies with ranges
SmoothingConfig = ranged(Smoothing, {"alpha": {"ge": 0, "le": 1}})
TokenBudgetsConfig = ranged(TokenBudgets, {f.name: {"ge": 1, "le": TOKENS} for f in fields(TokenBudgets)})

_SANDBOX_DOC = """JiT's reasoning-program sandbox (`model.sandbox` of conf/model/jit.yaml): the SandboxSettings
    fields rvt_bench.adapters.jit.adapter.SANDBOX_KEYS names, with SandboxSettings' defaults, and the upper bounds of rvt_bench.core.ranges.SANDBOX_CAPS."""
JiTSandboxConfig = ranged(sandbox_schema("JiTSandboxConfig", SANDBOX_KEYS, _SANDBOX_DOC), SANDBOX_CAPS, "JiTSandboxConfig",
                          _SANDBOX_DOC)


@dataclass
class JiTPromptsConfig:
    """JiT's prompts (adapters/jit/prompts.py, which documents the fields): no defaults, the texts
    live in conf/model/jit.yaml; the schema names the keys so that a typo fails at compose time."""

    version: int = within(MISSING, ge=1, le=VERSION)
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
    window: int = within(_JIT["window"], ge=1, le=ROUNDS)
    min_motion: float = within(_JIT["min_motion"], ge=0, le=SIDE)
    similarity: float = within(_JIT["similarity"], ge=0, le=1)
    graph_max_chars: int = within(_JIT["graph_max_chars"], ge=1, le=CHARS)
    smoothing: SmoothingConfig = field(default_factory=SmoothingConfig)  # type: ignore[valid-type]
    max_new_tokens: TokenBudgetsConfig = field(default_factory=TokenBudgetsConfig)  # type: ignore[valid-type]
    sandbox: JiTSandboxConfig = field(default_factory=JiTSandboxConfig)  # type: ignore[valid-type]
    prompts: JiTPromptsConfig = field(default_factory=JiTPromptsConfig)
