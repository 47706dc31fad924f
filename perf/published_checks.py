"""One published number per released model, with the rvt-bench command that should reproduce it on
a GPU node holding the real checkpoint and data: read by `perf/gpu_real_models.py --published`
(which runs them and prints ours beside the paper's) and shown in docs/models.md "One published
number per model, on a GPU node". Values are the sources' own, in percent as printed there. The
commands use `model.backend=hf` where a model can also be served (no server on the GPU node).

A check's `overrides` are the command line after `python run_bench.py`; `{NAME}` placeholders are
filled from `--data NAME=DIR` (the GPU machine usually has no network: data and weights must be on
disk or in the HF cache, which `HF_HUB_OFFLINE=1` then reads). `metric` is the key of the run's
metrics.json "metrics" (a fraction; multiplied by 100 to compare).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    model: str                      # the +model= config
    overrides: tuple[str, ...]      # run_bench.py arguments, {NAME} placeholders filled from --data
    metric: str                     # metrics.json "metrics" key (fraction)
    expected: float                 # the published value, percent
    source: str                     # where the value is printed (and how far it was checked)


CHECKS: tuple[Check, ...] = (
    Check("lisa",
          ("+dataset=reasonseg", "dataset.root={REASONSEG}", "dataset.split=val", "+model=lisa",
           "model.checkpoint=xinlai/LISA-7B-v1"),
          "gIoU", 52.9,
          "LISA (arXiv 2308.00692) Table 1, LISA-7B (ft), ReasonSeg val gIoU; "
          "leaderboards/paper/lisa_arxiv2308.00692.csv (verified)"),
    Check("seg_zero",
          ("+dataset=reasonseg", "dataset.hf_dataset=Ricky06662/ReasonSeg_test", "dataset.split=test",
           "+model=seg_zero", "model.backend=hf", "model.model=Ricky06662/Seg-Zero-7B-Best-on-ReasonSegTest"),
          "gIoU", 57.5,
          "Seg-Zero (arXiv 2503.06520v3) Table 9, Seg-Zero-7B, ReasonSeg test gIoU; "
          "leaderboards/paper/segzero_arxiv2503.06520.csv (verified; the checkpoint is the one the authors' "
          "eval_reasonseg.sh names, Seg-Zero issue #14)"),
    Check("visionreasoner",
          ("+dataset=reasonseg", "dataset.hf_dataset=Ricky06662/ReasonSeg_val", "+model=visionreasoner",
           "model.backend=hf"),
          "gIoU", 66.3,
          "VisionReasoner (arXiv 2505.12081v5) Table 2, VisionReasoner-7B, ReasonSeg val gIoU; "
          "leaderboards/paper/visionreasoner_arxiv2505.12081.csv (verified; 66.26 in Seg-Zero's README)"),
    Check("sa2va",
          ("+dataset=mevis", "dataset.root={MEVIS}", "dataset.split=valid_u", "+model=sa2va",
           "model.checkpoint=ByteDance/Sa2VA-4B"),
          "J&F", 55.9,
          "Sa2VA (arXiv 2501.04001v3) Table 8, base MLLM InternVL2.5-4B (its Table 19 names the InternVL2.5-based "
          "models Sa2VA-1B/4B/8B/26B), MeViS valid_u J&F; leaderboards/paper/sa2va_arxiv2501.04001.csv (verified)"),
)


def fill(overrides: tuple[str, ...], data: dict[str, str]) -> list[str]:
    """The overrides with each {NAME} replaced by data[NAME], the value an override holds a placeholder
    in written as a Hydra quoted string (`quote`: a path with a space, quote, comma or bracket parses,
    and `${...}` in it stays text). Raises KeyError naming a missing NAME."""
    out = []
    for arg in overrides:
        names = _placeholders(arg)
        if names:
            key, _, value = arg.partition("=")
            for name in names:
                if name not in data:
                    raise KeyError(name)
                value = value.replace("{" + name + "}", data[name])
            arg = f"{key}={quote(value)}"
        out.append(arg)
    return out


def quote(value: str) -> str:
    """`value` as a single-quoted string of Hydra's override grammar that OmegaConf reads back as
    `value`: `${` escaped as `\\${` (OmegaConf resolves interpolations in quoted strings too), the
    backslashes before it doubled; each `'` as `\\'` and the backslashes before a quote or at the end
    doubled (Hydra unescapes backslashes only there)."""
    import re

    value = re.sub(r"(\\*)\$\{", lambda m: m.group(1) * 2 + "\\${", value)
    value = re.sub(r"(\\*)('|$)", lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), value)
    return f"'{value}'"


def placeholders(check: Check) -> list[str]:
    """The {NAME} placeholders of a check's overrides, in order."""
    return [name for arg in check.overrides for name in _placeholders(arg)]


def _placeholders(arg: str) -> list[str]:
    import re

    return re.findall(r"\{([A-Z][A-Z0-9_]*)\}", arg)
