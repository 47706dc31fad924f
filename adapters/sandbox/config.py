"""Config nodes of sandbox limits for the models that run code (DT-R1's `model.sandbox`, JiT's):
a structured-config dataclass over rvt_bench.adapters.sandbox.runner.SandboxSettings' fields."""
from __future__ import annotations

from dataclasses import fields, make_dataclass

from rvt_bench.adapters.sandbox.runner import SandboxSettings
from rvt_bench.adapters.sandbox.settings import MAX_OUTPUT_CHARS
from rvt_bench.core.ranges import within

# SandboxSettings' own checks (its __post_init__), stated as schema ranges so that they fail before
# the run; what a probe round needs at least is the sandbox preflight's to say
RANGES = {"timeout_s": {"gt": 0}, "memory_mb": {"gt": 0}, "max_output_chars": {"gt": 0, "le": MAX_OUTPUT_CHARS},
          "max_processes": {"gt": 0}, "disk_mb": {"gt": 0}, "pool_size": {"ge": 0}, "start_timeout_s": {"gt": 0}}


def sandbox_schema(name: str, keys: tuple[str, ...], doc: str) -> type:
    """A dataclass `name` of the SandboxSettings fields `keys`, with their types, defaults and ranges.
    SandboxSettings is frozen (a pool is keyed by its settings); a config node must take overrides."""
    schema = make_dataclass(name, [(f.name, type(f.default), within(f.default, **RANGES.get(f.name, {})))
                                   for f in fields(SandboxSettings) if f.name in keys])
    schema.__doc__ = doc
    return schema
