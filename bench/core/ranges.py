"""The ranges of numeric settings, checked before a run starts: a schema field says its range in its
dataclass metadata ({"ge": 1}, {"gt": 0}, {"ge": 0, "le": 1}; None passes where the field is
Optional), `within` writes such a field, `ranged` copies a dataclass owned elsewhere (an adapter's
settings, or another module's schema) with ranges added, and `problems` walks a composed config and
lists every value outside its range, plus the few rules between two settings (run.shard <
run.num_shards).

Every numeric setting has an upper bound too (tests/test_config_schemas.py walks every schema of
conf/schemas.yaml for one): a value past it is a typo, and some are worse than slow (a timeout of
`inf` or 1e308 overflows `selectors` at the first wait; an output cap of 1e8 builds a string of that
size every round). The bounds are the named constants of rvt_bench.core.bounds, each with its
reason. A number that is not finite (inf, nan) is refused wherever it appears in the config, schema
or not.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf, ValueNode

# the upper bounds, each with its reason, live in rvt_bench.core.bounds (no omegaconf: the sandbox's
# settings read them in any interpreter); named here too, beside the ranges that use them
from rvt_bench.core.bounds import (  # noqa: F401
    SECONDS, CHARS, SANDBOX_OUTPUT_CHARS, TOKENS, WORKERS, PROCESSES, BATCH, RETRIES, MEGABYTES, ROUNDS,
    COUNT, PIXELS, SAMPLE_PIXELS, SIDE, FPS, SEED, VERSION, TEMPERATURE, JSON_DEPTH, UNSCHEMED, SANDBOX_POOL, SANDBOX_CAPS,
)

_BOUNDS = {"ge": (">=", lambda v, b: v >= b), "gt": (">", lambda v, b: v > b),
           "le": ("<=", lambda v, b: v <= b), "lt": ("<", lambda v, b: v < b)}


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
            # name (`*_s` seconds, a pool's size), otherwise no number past 2^53
            limit = unschemed_limit(str(key))
            if abs(child._value()) > limit:
                out.append(f"{where}={child._value()!r} must be <= {limit:g}")
        elif bounds:
            value = _value(node, key)
            if value is not None and (not _number(value) or not all(_BOUNDS[k][1](value, b) for k, b in bounds.items())):
                out.append(f"{where}={value!r} must be {range_text(bounds)}")
        if isinstance(child, (DictConfig, ListConfig)):
            _walk(child, where, out)


_POOL_NAMES = ("workers", "concurrency", "threads", "parallel", "pool_size")


def unschemed_limit(key: str) -> float:
    """The upper bound of a numeric setting `key` that no schema ranges, by its unit read from its
    name: a name ending in `_s` is seconds (SECONDS); `workers`, `concurrency`, `threads`,
    `parallel`, `pool_size` or a name ending in `_` + one of them (`n_parallel`) is a pool's size (WORKERS, 1024: a
    precomputed model's `model.workers=1e8` would start a hundred million threads); any other at
    UNSCHEMED (2^53, the last integer a float holds exactly)."""
    if key.endswith("_s"):
        return SECONDS
    if any(key == name or key.endswith("_" + name) for name in _POOL_NAMES):
        return WORKERS
    return UNSCHEMED


def _finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def _value(node: DictConfig, key: str) -> Any:
    try:
        return node[key]
    except Exception:  # noqa: BLE001 - a missing (???) or unresolvable value is reported where it is used
        return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
