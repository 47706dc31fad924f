"""Config nodes of sandbox limits for the models that run code (DT-R1's `model.sandbox`, JiT's):
a structured-config dataclass over rvt_bench.adapters.sandbox.runner.SandboxSettings' fields."""
from __future__ import annotations

from dataclasses import fields, make_dataclass

from rvt_bench.adapters.sandbox.runner import SandboxSettings


def sandbox_schema(name: str, keys: tuple[str, ...], doc: str) -> type:
    """A dataclass `name` of the SandboxSettings fields `keys`, with their types and defaults.
    SandboxSettings is frozen (a pool is keyed by its settings); a config node must take overrides."""
    schema = make_dataclass(name, [(f.name, type(f.default), f.default) for f in fields(SandboxSettings) if f.name in keys])
    schema.__doc__ = doc
    return schema
