"""Registered names: what a run's fingerprint hashes in place of a `_target_`, so that moving or
renaming a module keeps every run directory's name (docs/architecture.md "Run directory").

The name of a component of rvt_bench is its dotted path under the package, without `rvt_bench.`,
where it was when it was added (the place rule): `rvt_bench.loaders.mevis.MeViSDataset` is named
`loaders.mevis.MeViSDataset`, so a new loader, protocol, adapter or unit needs no line here. The
table lists only names whose component is no longer (or was never) at that place:

- the pre-move names: the dotted paths these classes had before the package moved under
  `rvt_bench` (2026-12), which is what the fingerprints of existing run directories hashed and what
  their config.yaml files hold (with_current_targets maps them to today's code);
- a moved component: before moving one, add `old name -> new target` to _MOVED (or change its
  target here when it is already listed); the name never changes. A module moved without its line
  renames every run directory that used it.

A place whose name is registered to another target (a component moved away and a new one put in
its place) is hashed as written, so no two components share a name. A `_target_` outside rvt_bench
(a user's own class) is hashed as written.
"""
from __future__ import annotations

from typing import Any

_PREFIX = "rvt_bench."
_PRE_MOVE = [  # pre-move names whose code lives at rvt_bench.<name> today
    "adapters.dtr1.adapter.DTR1Adapter",
    "adapters.jit.adapter.JiTAdapter",
    "adapters.lisa.adapter.LisaAdapter",
    "adapters.vlm.adapter.VLMAdapter",
    "adapters.precomputed.PrecomputedAdapter",
    "adapters.policy.gguf.GGUFPolicy",
    "adapters.policy.hf.HFPolicy",
    "adapters.policy.openai_compat.OpenAIPolicy",
    "adapters.policy.scripted.ScriptedPolicy.from_file",
    "adapters.policy.vllm_engine.VLLMEnginePolicy",
    "adapters.twin.backends.depth_anything.DepthAnythingBackend",
    "adapters.twin.backends.depth_anything.DepthAnythingBackend.tiny",
    "adapters.twin.backends.dinov2.Dinov2Backend",
    "adapters.twin.backends.dinov2.Dinov2Backend.tiny",
    "adapters.twin.backends.owlv2.Owlv2Backend",
    "adapters.twin.backends.owlv2.Owlv2Backend.tiny",
    "adapters.twin.backends.qwen_vl.QwenVLBackend",
    "adapters.twin.backends.qwen_vl.QwenVLBackend.tiny",
    "adapters.twin.backends.sam2_hf.Sam2HFBackend",
    "adapters.twin.backends.sam2_hf.Sam2HFBackend.tiny",
    "adapters.twin.backends.sam2_pkg.Sam2PkgBackend",
    "adapters.twin.cache.ToolCache",
    "adapters.twin.foundation.FoundationPerception",
    "adapters.twin.oracle.OraclePerception",
    "adapters.twin.provided.ProvidedPerception",
    "harness.loggers.tensorboard_logger.TensorBoardLogger",
    "harness.loggers.wandb_logger.WandbLogger",
    "loaders.canonical.CanonicalDataset",
    "loaders.demo.DemoDataset",
    "loaders.llmseg40k.LLMSeg40KDataset",
    "loaders.reasonseg.ReasonSegDataset",
    "loaders.revos.ReVOSDataset",
    "metrics.judge.Judge",
    "metrics.protocols.composite.CompositeProtocol",
    "metrics.protocols.llmseg40k.LLMSegProtocol",
    "metrics.protocols.reasonseg.ReasonSegProtocol",
    "metrics.protocols.revos.ReVOSProtocol",
    "metrics.protocols.rvtbench.RVTBenchProtocol",
    "metrics.protocols.units.UnitProtocol",
    "metrics.units.box_iou.BoxIoU",
    "metrics.units.captions.Captions",
    "metrics.units.judge.JudgeScore",
    "metrics.units.lisa_iou.LisaIoU",
    "metrics.units.lisa_iou.LLMSegIoU",
    "metrics.units.video_jf.VideoJF",
    "harness.sweep_table.SweepTable",  # a Hydra callback (conf/config.yaml); in no fingerprint
]
_MOVED: dict[str, str] = {}  # name -> the `_target_` that builds it today, for components moved since
# registered name -> the `_target_` that builds it today
NAMES: dict[str, str] = {**{name: _PREFIX + name for name in _PRE_MOVE}, **_MOVED}
_BY_TARGET = {target: name for name, target in NAMES.items()}


def registered_name(target: str) -> str:
    """The name a fingerprint hashes for a `_target_` string: its registered name; else, inside
    rvt_bench, its place (the path without `rvt_bench.`) unless that name is registered to another
    target; else the string itself."""
    if target in _BY_TARGET:
        return _BY_TARGET[target]
    if target.startswith(_PREFIX):
        place = target[len(_PREFIX):]
        if place and place not in NAMES:
            return place
    return target


def with_registered_names(node: Any) -> Any:
    """A copy of a resolved config (dicts, lists, scalars) whose `_target_` values are registered names."""
    if isinstance(node, dict):
        return {k: (registered_name(v) if k == "_target_" and isinstance(v, str) else with_registered_names(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [with_registered_names(v) for v in node]
    return node


def current_target(value: str) -> str:
    """The `_target_` that builds what a run directory's config.yaml names `value` today: a
    registered name's target, also when written at its old place under rvt_bench (a run made
    before its component moved); else `value`."""
    if value in NAMES:
        return NAMES[value]
    if value.startswith(_PREFIX) and value[len(_PREFIX):] in NAMES:
        return NAMES[value[len(_PREFIX):]]
    return value


def with_current_targets(node: Any) -> Any:
    """A copy of a config read from an older run directory (config.yaml of a run made before the
    move, or before one of its components moved) whose `_target_` values point at today's code
    (current_target)."""
    if isinstance(node, dict):
        return {k: (current_target(v) if k == "_target_" and isinstance(v, str) else with_current_targets(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [with_current_targets(v) for v in node]
    return node


def load_run_config(path: Any) -> Any:
    """A run directory's config.yaml (OmegaConf DictConfig) with today's `_target_` values; read
    through rvt_bench.core.files (RunStoreError naming it when it cannot be read)."""
    from pathlib import Path

    from omegaconf import OmegaConf

    from rvt_bench.harness.rundir import load_config

    return OmegaConf.create(with_current_targets(load_config(Path(path))))
