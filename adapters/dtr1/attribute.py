"""Why each failed DT-R1 sample failed, across runs of the model: a copied example, format, plan,
perception or reasoning.

    rvt-bench attribute RUN_DIR [RUN_DIR ...] [--json OUT] [--examples 3]

(DTR1Adapter.attribute, which the command asks.) Each RUN_DIR is a finished DT-R1 run
(config.yaml, scores.jsonl with each sample's stage of rvt_bench.adapters.dtr1.funnel).
The runs should differ only in policy.decoding (free | grammar) and perception (oracle = the
dataset's own annotations, anything else = foundation models) and cover the same samples. The
*target* run is the one whose failures are explained: free decoding with foundation perception
when given, else the first run. Each of its failed samples (result not correct) gets one label,
the first that applies:

  copied_example  the rollout wrote the system prompt's worked example back as its own: its plan or
              one of its code blocks equals the example's (rvt_bench.adapters.dtr1.funnel.copied_example).
              The policy answered the prompt, not its query, whatever stage it then stopped at
              (e.g. the embedded 135M demo policy: the example's plan in every rollout)
  perception  the sample fails with foundation perception but its result is correct with the
              oracle twin under the same decoding (the DT-R1 paper's "32% of failures are SAM2's"),
              or perception itself failed (twin not built)
  format      the rollout broke the protocol: no plan, a rollout that never reached its answer
              block, or an unparsable answer (first failure plan_emitted / code_rounds_ran /
              answer_parsed); `confirmed` when grammar decoding with the same perception parses it
  plan        the plan was not a valid DAG of the tool registry (first failure dag_valid)
  reasoning   the answer parsed but declared the wrong task or the wrong result, and the oracle
              twin does not make it correct (or no oracle run was given)

A text answer without a judge is undecided, neither failed nor correct, and is not labelled.
Prints counts, shares and examples; --json writes {"target", "runs", "counts", "samples"}.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rvt_bench.core import files
from rvt_bench.core.types import DatasetFormatError, RvtBenchError

LABELS = ("copied_example", "format", "plan", "perception", "reasoning")
_FORMAT_STAGES = ("plan_emitted", "code_rounds_ran", "answer_parsed")


class AttributionError(RvtBenchError):
    """Runs that cannot be compared (missing files, no funnel, no common samples)."""

    kind = "attribution"


@dataclass
class RunView:
    """One run: its directory, decoding mode, perception kind and per-sample funnel."""

    path: Path
    decoding: str
    perception: str
    model: str
    funnel: dict[str, dict]  # sample_id -> {"first_failed", "result_correct"}
    errors: dict[str, str]   # sample_id -> error message (failed predictions)
    copied: dict[str, list[str]]  # sample_id -> parts of the prompt's worked example it copied (when any)

    @property
    def key(self) -> str:
        return f"{self.decoding}+{self.perception}"

    def correct(self, sample_id: str) -> bool:
        return self.funnel.get(sample_id, {}).get("result_correct") is True

    def failed(self, sample_id: str) -> bool:
        """Failed = some stage failed (an undecided text answer is not a failure)."""
        return self.funnel.get(sample_id, {}).get("first_failed") not in (None, "no_rollout")


def load_run(path: str | Path) -> RunView:
    """Read a run directory. Raises AttributionError naming the missing file or key."""
    import yaml

    root = Path(path)
    cfg_path, scores_path = root / "config.yaml", root / "scores.jsonl"
    for p in (cfg_path, scores_path):
        if not p.is_file():
            raise AttributionError(f"{root}: expected a finished run directory with {p.name}")
    try:
        cfg = yaml.safe_load(files.read_text(cfg_path, "run file")) or {}
        funnel = _funnels(scores_path)
        errors, copied = _predictions(sorted(root.glob("predictions*.jsonl")))
    except (OSError, DatasetFormatError, yaml.YAMLError) as exc:
        raise AttributionError(f"{root}: cannot read the run's files ({exc})") from exc
    model = cfg.get("model") or {}
    policy = model.get("policy") if isinstance(model.get("policy"), dict) else {}
    perception = model.get("perception") if isinstance(model.get("perception"), dict) else {}
    target = str(perception.get("_target_", ""))
    kind = "oracle" if target.rsplit(".", 1)[-1].lower().startswith("oracle") else "foundation"
    return RunView(root, str(policy.get("decoding") or "free"), kind, _model_identity(model), funnel, errors, copied)


def _funnels(scores_path: Path) -> dict[str, dict]:
    """sample id -> its funnel, from a run's scores.jsonl (each line bounded: rvt_bench.core.files.lines)."""
    funnel: dict[str, dict] = {}
    for number, line in files.lines(scores_path, "scores file"):
        if line is None or not line.strip():
            continue
        rec = files.loads(line, f"{scores_path} line {number}", duplicates="last")
        if "funnel" not in rec:
            raise AttributionError(f"{scores_path}: records have no 'funnel' (scored before stage funnels); "
                                   "re-score with run.merge=true")
        funnel[rec["sample_id"]] = rec["funnel"]
    return funnel


def _predictions(pred_files: list[Path]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """({sample id: its failure's message (200 characters)}, {sample id: the parts of the prompt's
    worked example its rollout copied, when any}) from a run's predictions files."""
    from rvt_bench.adapters.dtr1.funnel import copied_example
    from rvt_bench.core.types import Prediction

    errors: dict[str, str] = {}
    copied: dict[str, list[str]] = {}
    for pred_file in pred_files:
        for number, line in files.lines(pred_file, "predictions file"):
            try:
                pred = files.loads(line, f"{pred_file} line {number}", duplicates="last") if line else None
            except DatasetFormatError:
                continue  # a torn last line: the runner redoes it
            if not isinstance(pred, dict) or not isinstance(pred.get("sample_id"), str):
                continue
            sid = pred["sample_id"]
            error = pred.get("error")
            if isinstance(error, dict) and error:
                errors[sid] = str(error.get("message", ""))[:200]
            parts = copied_example(Prediction(sid, trace=pred.get("trace")))
            if parts:
                copied[sid] = parts
            else:
                copied.pop(sid, None)
    return errors, copied


def _model_identity(model: dict) -> str:
    """The model's config without the two axes being compared, for the same-model check."""
    policy = {k: v for k, v in (model.get("policy") or {}).items() if k != "decoding"} if isinstance(model.get("policy"), dict) else model.get("policy")
    rest = {k: v for k, v in model.items() if k not in ("perception", "policy")}
    return json.dumps({"policy": policy, **rest}, sort_keys=True, default=str)


def pick_target(runs: list[RunView]) -> RunView:
    return next((r for r in runs if r.decoding == "free" and r.perception == "foundation"), runs[0])


def label_sample(sample_id: str, target: RunView, runs: list[RunView]) -> tuple[str, bool]:
    """(label, confirmed) for a sample that failed in `target` (see the module docstring); a copied
    example is confirmed when its plan and its code both equal the example's."""
    stage = target.funnel[sample_id].get("first_failed")
    if sample_id in target.copied:
        return "copied_example", set(target.copied[sample_id]) == {"plan", "code"}
    if target.perception != "oracle":
        for other in runs:
            if other.perception == "oracle" and other.decoding == target.decoding and other.correct(sample_id):
                return "perception", True
        if stage == "twin_built":
            return "perception", False
    if stage in _FORMAT_STAGES:
        confirmed = any(o.decoding == "grammar" and o.perception == target.perception and o is not target
                        and o.funnel.get(sample_id, {}).get("first_failed") not in _FORMAT_STAGES for o in runs)
        return "format", confirmed
    if stage == "dag_valid":
        return "plan", False
    return "reasoning", any(o.perception == "oracle" for o in runs)


def attribute(paths: list[str | Path], examples: int = 3) -> dict[str, Any]:
    """Label the failed samples of the target run among `paths`; the result as --json writes it."""
    runs = [load_run(p) for p in paths]
    if len({r.model for r in runs}) > 1:
        print("warning: the runs differ in more than decoding and perception; labels compare different models",
              file=sys.stderr)
    target = pick_target(runs)
    common = set(target.funnel)
    for r in runs:
        common &= set(r.funnel)
    if not common:
        raise AttributionError("the runs share no sample ids; attribution compares the same samples")
    samples: dict[str, dict] = {}
    counts = {label: 0 for label in LABELS}
    for sid in sorted(common):
        if not target.failed(sid):
            continue
        label, confirmed = label_sample(sid, target, runs)
        counts[label] += 1
        samples[sid] = {"label": label, "confirmed": confirmed,
                        "first_failed": {r.key: r.funnel[sid].get("first_failed") for r in runs},
                        "error": target.errors.get(sid), "copied": target.copied.get(sid, [])}
    return {"target": str(target.path), "runs": {r.key: str(r.path) for r in runs}, "n": len(common),
            "failed": len(samples), "counts": counts, "samples": samples, "examples": examples}


def format_report(result: dict[str, Any]) -> str:
    """Counts and shares per label, then up to `examples` samples per label."""
    n_failed = result["failed"] or 1
    lines = [f"target run: {result['target']}  ({result['failed']} of {result['n']} common samples failed)",
             "runs: " + ", ".join(f"{k}={v}" for k, v in result["runs"].items())]
    for label in LABELS:
        c = result["counts"][label]
        lines.append(f"  {label:<14} {c:>5}  {100 * c / n_failed:5.1f}%")
    for label in LABELS:
        shown = [(sid, s) for sid, s in result["samples"].items() if s["label"] == label][: result["examples"]]
        for sid, s in shown:
            stages = ", ".join(f"{k}:{v or 'ok'}" for k, v in s["first_failed"].items())
            copied = f"  copied the example's {' and '.join(s['copied'])}" if s.get("copied") else ""
            lines.append(f"  e.g. {label}: {sid}  [{stages}]{copied}" + (f"  {s['error'][:100]}" if s.get("error") else ""))
    return "\n".join(lines)
