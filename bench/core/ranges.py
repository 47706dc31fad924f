"""The ranges of numeric settings, checked before a run starts: a schema field says its range in its
dataclass metadata ({"ge": 1}, {"gt": 0}, {"ge": 0, "le": 1}; None passes where the field is
Optional), `within` writes such a field, `ranged` copies a dataclass owned elsewhere (an adapter's
settings, or another module's schema) with ranges added, and `problems` walks a composed config and
lists every value outside its range, plus the few rules between two settings (run.shard <
run.num_shards).

Every numeric setting has an upper bound too (tests/test_config_schemas.py walks every schema of
conf/schemas.yaml for one): a value past it is a typo, and some are worse than slow (a timeout of
`inf` or 1e308 overflows `selectors` at the first wait; an output cap of 1e8 builds a string of that
size every round). The bounds are the named constants below, each with its reason. A number that
is not finite (inf, nan) is refused wherever it appears in the config, schema or not.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf, ValueNode

_BOUNDS = {"ge": (">=", lambda v, b: v >= b), "gt": (">", lambda v, b: v > b),
           "le": ("<=", lambda v, b: v <= b), "lt": ("<", lambda v, b: v < b)}


# --- upper bounds (one per unit; none of them limits a real run) ----------------------------------------

SECONDS = 86_400.0
"""Any timeout, wait or backoff: a day. No single round, request or start-up of a run needs longer;
past it is a typo, and inf / 1e308 overflow the event loop (selectors) at the first wait."""
CHARS = 1_000_000
"""Text budgets (a twin, a scene graph, a grammar span): a million characters, ~250k tokens, more than
any context window a policy has."""
SANDBOX_OUTPUT_CHARS = 20_000
"""A sandbox round's output returned to the policy (model.sandbox.max_output_chars): the harness
decodes and bounds every reply of that size each round (its largest reply, 20,000 characters
JSON-escaped, decodes in < 50 ms: perf/decode_reply.py); the default is 2,000."""
TOKENS = 1 << 20
"""Token budgets: 2^20, past every context window a policy has."""
WORKERS = 1024
"""Processes, threads, pools, concurrent requests: 1024, the default open-file limit (each holds
descriptors); sandbox pool_size=100000 would start that many interpreters."""
PROCESSES = 4096
"""Processes one sandbox may run at once (its pids limit): a fork bomb is bounded by it."""
BATCH = 65_536
"""Samples or rollouts decoded together: 2^16."""
RETRIES = 100
"""Attempts, retries, resume records of one sample: 100 (with backoff, more is waiting forever)."""
MEGABYTES = 1 << 20
"""Sizes in MB (memory, disk, a file read whole): 2^20 MB = 1 TiB, past any machine's memory."""
ROUNDS = 1000
"""Code rounds of one rollout, frames window: 1000."""
COUNT = 1_000_000_000
"""Counts of samples, shards, bootstrap resamples, polygon points, frames, images: 10^9."""
PIXELS = 1 << 32
"""Pixels of one image (width x height): 2^32 = a 65536 x 65536 image."""
SIDE = 65_536
"""Pixels along one side of an image (sizes, motions, patch factors): 2^16, JPEG's and most decoders' limit."""
FPS = 1000.0
"""Frames per second sampled from a video: 1000, past any benchmark's recording rate."""
SEED = (1 << 32) - 1
"""Random seeds: NumPy's and torch's generators take 32-bit seeds."""
VERSION = 1_000_000
"""Version numbers of prompts and templates."""
TEMPERATURE = 10.0
"""Sampling temperature: OpenAI's API takes 0-2, vLLM any; past 10 every token is nearly uniform noise."""
JSON_DEPTH = 10_000
"""JSON nesting (dataset.limits.max_json_depth): past Python's own recursion limit."""

UNSCHEMED = float(1 << 53)
"""Any number of a setting that no schema ranges (a policy backend's, a user model's): the last
integer a float holds exactly; a seconds setting (its name ends in `_s`) at most SECONDS."""

SANDBOX_POOL = 64
"""Warm sandboxes kept started ahead of use (model.sandbox.pool_size): each is an interpreter of about
47 MB (measured by the adversary review, 2026-12-04), so 64 are about 3 GB; 1024 would be 48 GB."""

SANDBOX_CAPS = {"timeout_s": {"le": SECONDS}, "start_timeout_s": {"le": SECONDS}, "memory_mb": {"le": MEGABYTES},
                "disk_mb": {"le": MEGABYTES}, "max_output_chars": {"le": SANDBOX_OUTPUT_CHARS},
                "max_processes": {"le": PROCESSES}, "pool_size": {"le": SANDBOX_POOL}}
"""The upper bounds of a sandbox's settings (model.sandbox.*, rollout.sandbox.*), added to the
sandbox schema's own lower bounds by the models that run code (adapters/dtr1, adapters/jit config.py)."""


def within(default: Any = dataclasses.MISSING, **bounds: float) -> Any:
    """A dataclass field with `default` and its range, e.g. ``limit: Optional[int] = within(None, ge=1)``."""
    assert set(bounds) <= set(_BOUNDS), bounds
    return dataclasses.field(default=default, metadata=bounds)


def ranged(cls: type, ranges: dict[str, dict[str, float]], name: str | None = None, doc: str | None = None) -> type:
    """A dataclass with `cls`'s fields and defaults whose fields named in `ranges` carry their range
    (for schemas built from another module's settings dataclass, which stays as it is), added to the
    range a field already has (a schema of another module given upper bounds)."""
    import typing

    hints = typing.get_type_hints(cls)  # the real types: `cls`'s annotations may be strings of its own module
    specs = []
    for f in dataclasses.fields(cls):
        default = {"default": f.default} if f.default is not dataclasses.MISSING else {"default_factory": f.default_factory}
        specs.append((f.name, hints[f.name], dataclasses.field(**default, metadata={**f.metadata, **ranges.get(f.name, {})})))
    out = dataclasses.make_dataclass(name or f"{cls.__name__}Config", specs)
    out.__doc__ = doc or f"{cls.__module__}.{cls.__qualname__}'s fields and defaults, with their ranges."
    return out


def range_text(bounds: dict[str, float]) -> str:
    return " and ".join(f"{_BOUNDS[k][0]} {v}" for k, v in bounds.items() if k in _BOUNDS)


def problems(cfg: DictConfig) -> list[str]:
    """'<key>=<value> must be <range>' for every value of `cfg` outside its schema's range, then the
    rules between settings. Nodes without a dataclass schema are walked for typed children."""
    out: list[str] = []
    _walk(cfg, "", out)
    run = cfg.get("run")
    if isinstance(run, DictConfig):
        shard, shards = _value(run, "shard"), _value(run, "num_shards")
        if _number(shard) and _number(shards) and shards >= 1 and not 0 <= shard < shards:
            out.append(f"run.shard={shard} must be in [0, run.num_shards={shards})")
    return out


def _walk(node: Any, path: str, out: list[str]) -> None:
    if isinstance(node, ListConfig):
        for k in range(len(node)):
            child = node._get_node(k)
            if isinstance(child, ValueNode) and not _finite(child._value()):
                out.append(f"{path}[{k}]={child._value()!r} must be a finite number")
            _walk(child, f"{path}[{k}]", out)
        return
    if not isinstance(node, DictConfig) or node._is_missing() or node._is_none():
        return
    schema = OmegaConf.get_type(node)
    ranges = {f.name: dict(f.metadata) for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else {}
    for key in node.keys():
        where = f"{path}.{key}" if path else str(key)
        bounds = {k: v for k, v in ranges.get(key, {}).items() if k in _BOUNDS}
        child = node._get_node(key)
        if isinstance(child, ValueNode) and not _finite(child._value()):  # inf, nan: no range holds them
            out.append(f"{where}={child._value()!r} must be a finite number")
        elif not bounds and isinstance(child, ValueNode) and _number(child._value()):
            # a setting no schema ranges (a policy backend's, a model's own): its unit read from its
            # name (`*_s` seconds), otherwise no number past 2^53, the last integer a float holds
            limit = SECONDS if str(key).endswith("_s") else UNSCHEMED
            if abs(child._value()) > limit:
                out.append(f"{where}={child._value()!r} must be <= {limit:g}")
        elif bounds:
            value = _value(node, key)
            if value is not None and (not _number(value) or not all(_BOUNDS[k][1](value, b) for k, b in bounds.items())):
                out.append(f"{where}={value!r} must be {range_text(bounds)}")
        if isinstance(child, (DictConfig, ListConfig)):
            _walk(child, where, out)


def _finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def _value(node: DictConfig, key: str) -> Any:
    try:
        return node[key]
    except Exception:  # noqa: BLE001 - a missing (???) or unresolvable value is reported where it is used
        return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
