"""The structured config of the sam3 adapter's `model` node (conf/model/sam3.yaml; a Hydra
ConfigStore dataclass registered under the name conf/schemas.yaml gives it). Every default is
Sam3Adapter's own keyword default (rvt_bench.adapters.sam3.adapter, which documents the fields)."""
from __future__ import annotations

import inspect
from dataclasses import dataclass

from omegaconf import MISSING

from rvt_bench.adapters.sam3.adapter import Sam3Adapter
from rvt_bench.core.ranges import within

_SAM3 = {k: p.default for k, p in inspect.signature(Sam3Adapter).parameters.items() if p.default is not inspect.Parameter.empty}


@dataclass
class Sam3AdapterConfig:
    """The `model` node of `+model=sam3`: Sam3Adapter's arguments with its defaults and ranges."""

    _target_: str = MISSING
    name: str = _SAM3["name"]
    checkpoint: str = _SAM3["checkpoint"]
    prompt: str = _SAM3["prompt"]
    threshold: float = within(_SAM3["threshold"], ge=0, le=1)
    mask_threshold: float = within(_SAM3["mask_threshold"], ge=0, le=1)
    geometry_cls: bool = _SAM3["geometry_cls"]
    device: str = _SAM3["device"]
    dtype: str = _SAM3["dtype"]
