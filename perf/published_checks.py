"""One published number per released model, with the rvt-bench command that should reproduce it on
a GPU node holding the real checkpoint and data: read by `perf/gpu_real_models.py --published`
(which runs them and prints ours beside the paper's) and shown in docs/models.md "One published
number per model, on a GPU node". Values are the sources' own, in percent as printed there. The
commands use `model.backend=hf` where a model can also be served (no server on the GPU node).

A check's `overrides` are the command line after `python run_bench.py`; `{NAME}` placeholders are
filled from `--data NAME=DIR` (the GPU machine usually has no network: data and weights must be on
disk or in the HF cache, which `HF_HUB_OFFLINE=1` then reads). `metric` is the key of the run's
metrics.json "metrics" (a fraction; multiplied by 100 to compare). Each check names the public
checkpoint, the split, the precision the authors ran it in (the command pins it), the published
row's scoring variant (`dataset.protocol.variant`, docs/benchmarks/reasonseg.md "Variants") and the
tolerance a reproduction on other hardware is expected to land within (percentage points; a
judgement, not a published figure).

Targets (issue 42): a validation row is reproduced only with a checkpoint not trained on val. LISA's
v1 checkpoints were trained on train+val (LISA README @3cb2d43 line 246: "the `v1` model is trained
using both `train+val` sets, so please use the `v0` model to reproduce the validation results"), so
they serve test rows only; LISA_TARGETS pairs every LISA row of LISA's Table 1 with the checkpoint
that can reproduce it, or says none can.
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
    checkpoint: str = ""            # the public checkpoint(s) the command loads, joined by " + " (MLLM + SAM 3)
    split: str = ""                 # the split the published value is of
    precision: str = ""             # the authors' precision, which the command pins
    tolerance: float = 1.0          # percentage points a reproduction is expected within


CHECKS: tuple[Check, ...] = (
    Check("lisa",
          ("+dataset=reasonseg", "dataset.root={REASONSEG}", "dataset.split=test", "+model=lisa",
           "model.checkpoint=xinlai/LISA-7B-v1", "model.dtype=bfloat16"),
          "gIoU", 47.3,
          "LISA (arXiv 2308.00692) Table 1, LISA-7B (ft), ReasonSeg test overall gIoU; "
          "leaderboards/paper/lisa_arxiv2308.00692.csv (verified). A v1 checkpoint serves a test row only (trained "
          "on train+val: LISA README @3cb2d43 line 246, 'please use the v0 model to reproduce the validation "
          "results'); that LISA-7B-v1 is the paper's LISA-7B (ft) is not stated (v1 adds val to its training "
          "data): expect near, not equal",
          checkpoint="xinlai/LISA-7B-v1", split="test", precision="bfloat16 (LISA's chat.py default --precision bf16)",
          tolerance=3.0),
    Check("seg_zero",
          ("+dataset=reasonseg", "dataset.hf_dataset=Ricky06662/ReasonSeg_test", "dataset.split=test",
           "dataset.protocol.variant=segzero", "+model=seg_zero", "model.backend=hf", "model.dtype=bfloat16",
           "model.model=Ricky06662/Seg-Zero-7B-Best-on-ReasonSegTest"),
          "gIoU", 57.5,
          "Seg-Zero (arXiv 2503.06520v3) Table 9, Seg-Zero-7B, ReasonSeg test gIoU; "
          "leaderboards/paper/segzero_arxiv2503.06520.csv (verified; the checkpoint is the one the authors' "
          "eval_reasonseg.sh names, Seg-Zero issue #14); scored as their calculate_iou.py (variant segzero)",
          checkpoint="Ricky06662/Seg-Zero-7B-Best-on-ReasonSegTest", split="test",
          precision="Qwen2.5-VL bfloat16, SAM2 under bfloat16 autocast (evaluation.py)", tolerance=1.0),
    Check("visionreasoner",
          ("+dataset=reasonseg", "dataset.hf_dataset=Ricky06662/ReasonSeg_val", "dataset.protocol.variant=segzero",
           "+model=visionreasoner", "model.backend=hf", "model.dtype=bfloat16"),
          "gIoU", 66.3,
          "VisionReasoner (arXiv 2505.12081v5) Table 2, VisionReasoner-7B, ReasonSeg val gIoU; "
          "leaderboards/paper/visionreasoner_arxiv2505.12081.csv (verified; 66.26 in Seg-Zero's README, printed by "
          "its eval_reasonseg_visionreasoner.sh: evaluation_visionreasoner.py, 1024 new tokens); scored as "
          "calculate_iou.py (variant segzero). zero-shot on ReasonSeg (its Sec. 4.2)",
          checkpoint="Ricky06662/VisionReasoner-7B", split="val",
          precision="Qwen2.5-VL bfloat16, SAM2 under bfloat16 autocast (evaluation_visionreasoner.py)", tolerance=1.0),
    Check("sa2va",
          ("+dataset=mevis", "dataset.root={MEVIS}", "dataset.split=valid_u", "+model=sa2va",
           "model.checkpoint=ByteDance/Sa2VA-4B"),
          "J&F", 55.9,
          "Sa2VA (arXiv 2501.04001v3) Table 8, base MLLM InternVL2.5-4B (its Table 19 names the InternVL2.5-based "
          "models Sa2VA-1B/4B/8B/26B), MeViS valid_u J&F; leaderboards/paper/sa2va_arxiv2501.04001.csv (verified)",
          checkpoint="ByteDance/Sa2VA-4B", split="valid_u", precision="bfloat16 (the authors' ref_vos_eval.py)",
          tolerance=1.5),
    Check("sam3",
          ("+dataset=saco_gold", "dataset.root={SACO_GOLD}", "dataset.subset=attributes", "+model=sam3",
           "model.checkpoint=facebook/sam3", "model.dtype=bfloat16"),
          "cgF1", 54.9,
          "SAM 3 (arXiv 2511.16719) Table 30, SAM 3, SA-Co/Gold Attributes cgF1, the oracle over the three "
          "annotators; leaderboards/paper/sam3_arxiv2511.16719.csv (verified; the authors' scripts/eval/gold/README.md "
          "@99d02f2 prints 54.93). The authors' run (sam3/train/configs/gold_image_evals/sam3_gold_image_attributes.yaml) "
          "dumps every detection scoring above 0.3 and CGF1Evaluator counts those >= 0.5; the adapter keeps those above "
          "0.5 as instances (trace 'instances'), the same for cgF1. This is transformers' port of SAM 3, not the authors' "
          "code (issue 46 item 4): expect near",
          checkpoint="facebook/sam3", split="attributes",
          precision="bfloat16 autocast in the authors' evaluation (sam3/train/configs/eval_base.yaml @99d02f2: "
                    "trainer.optim.amp enabled, amp_dtype bfloat16); the command casts transformers' port to bfloat16 "
                    "(model.dtype=bfloat16), not autocast",
          tolerance=1.5),
    Check("sam3_agent",
          ("+dataset=reasonseg", "dataset.root={REASONSEG}", "dataset.split=val", "+model=sam3_agent",
           "model.backend=hf", "model.model=Qwen/Qwen2.5-VL-7B-Instruct", "model.dtype=bfloat16",
           "model.prompts_dir={SAM3_PROMPTS}", "model.sam3.checkpoint=facebook/sam3", "model.sam3.dtype=bfloat16"),
          "gIoU", 62.2,
          "SAM 3 (arXiv 2511.16719) Table 40 (Table 8 prints the same gIoU), SAM 3 Agent (Qwen2.5-VL 7B), ReasonSeg "
          "val overall gIoU; leaderboards/paper/sam3_arxiv2511.16719.csv (verified). Zero-shot (trained on neither "
          "referring segmentation nor ReasonSeg), so the val row stands. The paper does not say which code computed "
          "gIoU: scored by LISA's rule (the default variant) on LISA's release. SAM3_PROMPTS = the repository's "
          "sam3/agent/system_prompts (git clone https://github.com/facebookresearch/sam3, @99d02f2; a pip-installed "
          "wheel of it lacks these files; not shipped, SAM License). "
          "The repository's example serves the MLLM with vLLM (examples/sam3_agent.ipynb) and its client sends no "
          "sampling settings (the server's defaults; the paper names no server); this command runs it through transformers, greedy (model.backend=hf, no "
          "server; with one: vllm serve Qwen/Qwen2.5-VL-7B-Instruct and model.backend=openai), and SAM 3 through "
          "transformers' port, not the authors' code: a different decoding changes whole tool-call trajectories, and "
          "one of the 200 val images moves gIoU by up to 0.5 points: expect near",
          checkpoint="Qwen/Qwen2.5-VL-7B-Instruct + facebook/sam3", split="val",
          precision="MLLM bfloat16 (the paper states none; vLLM's default dtype auto is the checkpoint's "
                    "torch_dtype, bfloat16); SAM 3 under bfloat16 "
                    "autocast in examples/sam3_agent.ipynb, here transformers' port cast to bfloat16 "
                    "(model.sam3.dtype=bfloat16), not autocast",
          tolerance=3.0),
)


@dataclass(frozen=True)
class Target:
    """A published row of LISA's and the public checkpoint that can reproduce it (None: none can)."""

    row_model: str                  # the row's `model` in leaderboards/paper/lisa_arxiv2308.00692.csv
    split: str                      # val | test
    checkpoint: str | None          # a public checkpoint not trained on that split, or None
    why: str                        # the source line for the pairing


_V1 = ("LISA README @3cb2d43 line 246: 'the v1 model is trained using both train+val sets, so please use the "
       "v0 model to reproduce the validation results'")
_V0 = ("LISA README @3cb2d43 lines 91-92 and 246: LISA-13B-llama2-v0 (and -v0-explanatory) run on the legacy code "
       "(git checkout 0e26916), which the port runs as model.code=v0 (detected from the layout; held to 0e26916 by "
       "tests/test_lisa_v0_equivalence.py; docs/models.md 'LISA v0'); the row is in the README's image of Table 1 "
       "(imgs/table1.jpg @3cb2d43: val gIoU 60.0, cIoU 67.8), not in the arXiv v3 text; that v0 is the paper's "
       "LISA-Llama2-13B (ft) is inferred from the names (LLaMA-2 13B, the README's v0 = validation advice), not stated")
_NONE = ("no such checkpoint in LISA's README @3cb2d43 (lines 85-92 list LISA-7B-v1, -v1-explanatory, "
         "LISA-13B-llama2-v1, -v1-explanatory, -v0, -v0-explanatory, LISA++ LISA_Plus_7b; the xinlai hub page was not "
         "reachable here)")
LISA_TARGETS: tuple[Target, ...] = (
    Target("LISA-7B", "val", None, _NONE),
    Target("LISA-7B", "test", None, _NONE),
    Target("LISA-7B (ft)", "val", None, _V1 + "; " + _NONE),
    Target("LISA-7B (ft)", "test", "xinlai/LISA-7B-v1", _V1 + "; v1 adds val to the training data: near, not equal"),
    Target("LISA-13B", "val", None, _NONE),
    Target("LISA-13B", "test", None, _NONE),
    Target("LISA-13B (ft)", "val", None, _NONE),
    Target("LISA-13B (ft)", "test", None, _NONE),
    Target("LISA-Llama2-13B (ft)", "val", "xinlai/LISA-13B-llama2-v0", _V0),
    Target("LISA-Llama2-13B (ft)", "test", "xinlai/LISA-13B-llama2-v1", _V1 + "; v1 adds val to the training data"),
    Target("LISA-7B-LLaVA1.5", "val", None, _NONE),
    Target("LISA-7B-LLaVA1.5", "test", None, _NONE),
    Target("LISA-7B-LLaVA1.5 (ft)", "val", None, _NONE),
    Target("LISA-7B-LLaVA1.5 (ft)", "test", None, _NONE),
    Target("LISA-13B-LLaVA1.5", "val", None, _NONE),
    Target("LISA-13B-LLaVA1.5", "test", None, _NONE),
    Target("LISA-13B-LLaVA1.5 (ft)", "val", None, _NONE),
    Target("LISA-13B-LLaVA1.5 (ft)", "test", None, _NONE),
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
