"""The ranges of numeric settings, checked before a run starts: a schema field says its range in its
dataclass metadata ({"ge": 1}, {"gt": 0}, {"ge": 0, "le": 1}; None passes where the field is
Optional), `within` writes such a field, `ranged` copies a dataclass owned elsewhere (an adapter's
settings) with ranges added, and `problems` walks a composed config and lists every value outside its
range, plus the few rules between two settings (run.shard < run.num_shards).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

_BOUNDS = {"ge": (">=", lambda v, b: v >= b), "gt": (">", lambda v, b: v > b),
           "le": ("<=", lambda v, b: v <= b), "lt": ("<", lambda v, b: v < b)}


def within(default: Any = dataclasses.MISSING, **bounds: float) -> Any:
    """A dataclass field with `default` and its range, e.g. ``limit: Optional[int] = within(None, ge=1)``."""
    assert set(bounds) <= set(_BOUNDS), bounds
    return dataclasses.field(default=default, metadata=bounds)


def ranged(cls: type, ranges: dict[str, dict[str, float]], name: str | None = None) -> type:
    """A dataclass with `cls`'s fields and defaults whose fields named in `ranges` carry their range
    (for schemas built from another module's settings dataclass, which stays as it is)."""
    import typing

    hints = typing.get_type_hints(cls)  # the real types: `cls`'s annotations may be strings of its own module
    specs = []
    for f in dataclasses.fields(cls):
        default = {"default": f.default} if f.default is not dataclasses.MISSING else {"default_factory": f.default_factory}
        specs.append((f.name, hints[f.name], dataclasses.field(**default, metadata=ranges.get(f.name, {}))))
    out = dataclasses.make_dataclass(name or f"{cls.__name__}Config", specs)
    out.__doc__ = f"{cls.__module__}.{cls.__qualname__}'s fields and defaults, with their ranges."
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
            _walk(node._get_node(k), f"{path}[{k}]", out)
        return
    if not isinstance(node, DictConfig) or node._is_missing() or node._is_none():
        return
    schema = OmegaConf.get_type(node)
    ranges = {f.name: dict(f.metadata) for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else {}
    for key in node.keys():
        where = f"{path}.{key}" if path else str(key)
        bounds = {k: v for k, v in ranges.get(key, {}).items() if k in _BOUNDS}
        if bounds:
            value = _value(node, key)
            if value is not None and (not _number(value) or not all(_BOUNDS[k][1](value, b) for k, b in bounds.items())):
                out.append(f"{where}={value!r} must be {range_text(bounds)}")
        child = node._get_node(key)
        if isinstance(child, (DictConfig, ListConfig)):
            _walk(child, where, out)


def _value(node: DictConfig, key: str) -> Any:
    try:
        return node[key]
    except Exception:  # noqa: BLE001 - a missing (???) or unresolvable value is reported where it is used
        return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
