"""Registered names: what a run's fingerprint hashes in place of a `_target_`, so that moving or
renaming a module keeps every run directory's name (docs/architecture.md "Run directory").

A component's name is its dotted path under `rvt_bench.` (without that prefix) when it is added,
so a new benchmark's loader or protocol needs no line here. The names below are the dotted paths
these classes had before the package moved under `rvt_bench` (2026-12), which is what the
fingerprints of existing run directories hashed (the same rule). Moving a component adds its line
here: its old name, its new target (tests/test_fingerprints.py pins the fingerprints), never a new
name. A `_target_` outside rvt_bench (a user's own class) is hashed as written.
"""
from __future__ import annotations

from typing import Any

_PREFIX = "rvt_bench."
_REGISTERED = [  # targets (where the code lives now) whose name is their pre-move path
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
    "harness.sweep_table.SweepTable",  # a Hydra callback (conf/config.yaml); in no fingerprint, registered as every target
    "harness.slurm.SlurmStates",  # added after the move (conf/hydra/launcher/slurm.yaml; in no fingerprint)
    "loaders.mevis.MeViSDataset",  # added after the move (MeViS, issue 35)
    "metrics.protocols.mevis.MeViSProtocol",
    "loaders.refytvos.RefYTVOSDataset",  # Ref-YouTube-VOS (issue 35)
    "metrics.protocols.server.ServerProtocol",
    "loaders.refcoco.RefCOCODataset",  # added after the move (issue 35)
    "metrics.protocols.refcoco.RefCOCOProtocol",
    "loaders.ref_davis17.RefDAVIS17Dataset",
    "metrics.protocols.ref_davis17.RefDAVIS17Protocol",
    "adapters.segzero.adapter.SegZeroAdapter",  # added after the move (conf/model/seg_zero.yaml, visionreasoner.yaml)
]
# registered name -> the `_target_` that builds it today
NAMES: dict[str, str] = {name: _PREFIX + name for name in _REGISTERED}
_BY_TARGET = {target: name for name, target in NAMES.items()}


def registered_name(target: str) -> str:
    """The registered name of a `_target_` string: its registered name, else its path under
    rvt_bench without the prefix, else the string itself (a class outside rvt_bench)."""
    if target in _BY_TARGET:
        return _BY_TARGET[target]
    return target[len(_PREFIX):] if target.startswith(_PREFIX) else target


def with_registered_names(node: Any) -> Any:
    """A copy of a resolved config (dicts, lists, scalars) whose `_target_` values are registered names."""
    if isinstance(node, dict):
        return {k: (registered_name(v) if k == "_target_" and isinstance(v, str) else with_registered_names(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [with_registered_names(v) for v in node]
    return node


def with_current_targets(node: Any) -> Any:
    """A copy of a config read from an older run directory (config.yaml of a run made before the
    move) whose `_target_` values that are registered names point at today's code."""
    if isinstance(node, dict):
        return {k: (NAMES.get(v, v) if k == "_target_" and isinstance(v, str) else with_current_targets(v))
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
