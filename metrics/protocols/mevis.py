"""MeViS protocol, following henghuiding/MeViS (7c0620b) `tools/eval_mevis.py` (VISA ships the same
script): per expression J and F = davis2017's region and boundary measures averaged over every frame
(metrics/units/video_jf.py); J = mean of the expressions' J, F likewise, J&F = (J + F) / 2, float64,
no rounding. The reference's rules for missing predictions and each option: docs/benchmarks/mevis.md.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from rvt_bench.core.records import ScoreRecord, UnitValues
from rvt_bench.core.types import Prediction, Sample
from rvt_bench.metrics.estimators import Found, mean_of
from rvt_bench.metrics.masks import DAVIS_BOUND_TH
from rvt_bench.metrics.protocols.base import (Protocol, baseline_warnings, empty_gt_warnings, excluded_block,
                                             record_header, submission_block)
from rvt_bench.metrics.units.base import CORRECT_IOU
from rvt_bench.metrics.units.rle import predicted_masks
from rvt_bench.metrics.units.video_jf import empty_frame_jf, frame_crops, frame_jf, gt_mask_list, jf_means, mean

log = logging.getLogger(__name__)

FAILED = ("reference", "zero")
SCORED, ZERO, DROPPED, SERVER = "scored", "zero", "dropped", "server"
UNSCORED = (DROPPED, SERVER)
ZERO_TAG = "[failed-zero]"
DROPPED_WHY = "dropped as eval_mevis.py drops it: its prediction folder or a frame PNG is missing or unreadable"
SERVER_WHY = "no public GT (MeViS valid): the evaluation server scores it"
WORKERS = 64  # eval_mevis.py's NUM_WOEKERS: each dropped expression ends one of its worker processes


@dataclass
class MeViSValues(UnitValues):
    """One expression as eval_mevis.py scores it: J, F = means over frames (float64); jf ("J&F") =
    (J + F) / 2; frames = {"I", "U", "J", "F"} per frame ({} when not scored); outcome = "scored",
    "zero" (J = F = 0: its video has no prediction folder) or "dropped" (the reference leaves it out
    of every mean: its folder or a frame PNG is missing; failed="zero" counts it 0, J = F = 0 here);
    "server" (no public GT, the `valid` split: the CodaLab server scores it; left out here);
    gt_empty = the GT is empty in every frame; baseline = {"J", "F"} of an empty prediction."""

    kind = "mevis"
    J: float
    F: float
    jf: float = field(metadata={"key": "J&F"})
    frames: dict[str, list]
    outcome: str  # required: a version 1 record (which never had it) is not read as MeViS values
    gt_empty: bool | None = None
    baseline: dict[str, float] | None = None

    def correct(self) -> bool | None:
        return None if self.outcome == SERVER else self.J > CORRECT_IOU

    def sample_score(self) -> float | None:
        return None if self.outcome == SERVER else self.jf


class MeViSProtocol(Protocol):
    """J, F, J&F per expression and over the split, as eval_mevis.py prints them.

    failed: "reference" (default): a failed prediction whose video folder is missing scores J = F = 0,
        any other failed prediction (its expression folder or a frame PNG missing or unreadable, a
        model's failure) is dropped from the means with a warning naming it, as eval_mevis.py does
        without a word; "zero" (corrected): every failed expression scores 0 (metric keys get
        "[failed-zero]").
    bound_th: F's boundary tolerance (fraction of the frame diagonal), davis2017's 0.008.
    Raises ValueError for an unknown `failed`.
    """

    name = "mevis"
    version = 1

    def __init__(self, failed: str = "reference", bound_th: float = DAVIS_BOUND_TH) -> None:
        if failed not in FAILED:
            raise ValueError(f"mevis protocol: failed must be one of {FAILED}, got {failed!r}")
        self.failed = failed
        self.bound_th = float(bound_th)
        self.headline = [self.key("J&F"), self.key("J"), self.key("F")]

    def key(self, metric: str) -> str:
        """The published name of `metric` under this protocol's options, e.g. "J&F[failed-zero]"."""
        return metric + (ZERO_TAG if self.failed == "zero" else "")

    def score(self, sample: Sample, pred: Prediction) -> ScoreRecord:
        """Record: header + MeViSValues (outcome "server" for a sample without GT masks: the `valid`
        split). Raises AdapterError when the prediction's frame count or mask size differs from
        the sample's."""
        record = record_header(sample, pred, ())
        if sample.target.masks is None:  # valid: no public GT, the server scores it
            record.add(MeViSValues(0.0, 0.0, 0.0, {}, SERVER))
            return record
        gt_masks = gt_mask_list(sample)
        gt_empty = all(m is None for m in gt_masks)
        frames: dict[str, list] = {"I": [], "U": [], "J": [], "F": []}
        base: dict[str, list] = {"J": [], "F": []}
        pred_masks = [None] * len(gt_masks) if pred.error is not None else predicted_masks(sample, pred)
        for crop in frame_crops(sample, gt_masks, pred_masks):
            for key, value in frame_jf(crop, self.bound_th).items():
                frames[key].append(value)
            for key, value in empty_frame_jf(crop).items():
                base[key].append(value)
        baseline = {"J": mean(base["J"]), "F": mean(base["F"])}
        if pred.error is not None:  # the reference's outcome, whatever `failed` picks for the headline
            outcome = ZERO if _video_missing(sample, pred) else DROPPED
            record.add(MeViSValues(0.0, 0.0, 0.0, {}, outcome, gt_empty, baseline))
            return record
        j, f = mean(frames["J"]), mean(frames["F"])
        record.add(MeViSValues(j, f, (j + f) / 2, frames, SCORED, gt_empty, baseline))
        return record

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        """Both numbers in one run: metrics "J&F", "J", "F" as eval_mevis.py prints them (a dropped
        expression left out) and "J&F[failed-zero]", ... (every failed expression 0), the headline's
        first; fractions in [0, 1]. "n": the expressions the headline averages; "excluded" /
        "excluded_samples" (base.excluded_block): the ones it leaves out, each with its reason
        (dropped, under the reference's rule; no public GT, the `valid` split); "dropped": ids of
        dropped expressions (the headline's rule); "zeroed": ids scored 0 for a failure;
        "baseline_empty": the same metrics for an empty prediction on the same expressions;
        "warnings": the dropped expressions by name, samples with an all-empty GT, a headline equal
        to the baseline."""
        records = sorted(records, key=lambda r: r.sample_id)
        server = [r.sample_id for r in records if _v(r).outcome == SERVER]
        reference = [r for r in records if _v(r).outcome not in UNSCORED]
        honest = [r for r in records if _v(r).outcome != SERVER]
        ref_dropped = [r.sample_id for r in records if _v(r).outcome == DROPPED]
        kept = honest if self.failed == "zero" else reference
        dropped = [] if self.failed == "zero" else ref_dropped
        both = {"reference": reference, "zero": honest}
        metrics, baseline = {}, {}
        for rule in (self.failed, *(r for r in both if r != self.failed)):
            group = both[rule]
            metrics.update(self._means(group, lambda v: (v.J, v.F), rule))
            baseline.update(self._means([r for r in group if _v(r).baseline is not None],
                                        lambda v: (v.baseline["J"], v.baseline["F"]), rule))
        warnings = []
        if server:
            warnings.append(f"{len(server)} expression(s) have no public GT (MeViS valid): the CodaLab server scores them; "
                            "write its zip with: python -m rvt_bench.harness.submission mevis DATA_ROOT RUN_DIR "
                            "submission.zip")
        if dropped:
            warnings.append(f"{len(dropped)} expression(s) dropped from every mean, as eval_mevis.py drops an expression "
                            f"whose prediction folder or a frame PNG is missing (its worker crashes without a word; "
                            f"dataset.protocol.failed=zero scores them 0, its number is J&F[failed-zero]): "
                            f"{', '.join(dropped)}")
            if len(dropped) >= WORKERS:
                warnings.append(f"{len(dropped)} dropped expressions: eval_mevis.py's {WORKERS} worker processes would "
                                "all have died and left later expressions unscored; its printed numbers are not "
                                "reproducible beyond this point")
        warnings += empty_gt_warnings([r.sample_id for r in kept if _v(r).gt_empty], len(kept), "expressions")
        warnings += baseline_warnings(metrics, baseline, [self.key("J&F")])
        for w in warnings:
            log.warning("MeViS: %s", w)
        reasons = {i: DROPPED_WHY for i in dropped} | {i: SERVER_WHY for i in server}
        return {"metrics": metrics, "breakdown": {}, "n": len(kept), **excluded_block(reasons),
                **({"submission": submission_block("mevis")} if server else {}),
                "baseline_empty": baseline, "warnings": warnings, "dropped": dropped,
                "zeroed": [r.sample_id for r in records if _v(r).outcome == ZERO or (self.failed == "zero" and
                                                                                    _v(r).outcome == DROPPED)]}

    def counting_failures(self) -> "MeViSProtocol":
        return self if self.failed == "zero" else type(self)(failed="zero", bound_th=self.bound_th)

    def variant_label(self) -> str:
        return "failed=zero" if self.failed == "zero" else ""

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found:
        """J, F, J&F: the plain mean over the expressions not dropped (J&F per expression is
        (J + F) / 2, so its mean is the reported J&F); the "[failed-zero]" keys over every expression
        with GT (a dropped one counts 0)."""
        zero = key.endswith(ZERO_TAG)
        name = {"J": "J", "F": "F", "J&F": "jf"}.get(key[: -len(ZERO_TAG)] if zero else key)
        kept = [r for r in records if _v(r).outcome != SERVER and (zero or _v(r).outcome != DROPPED)]
        if name is None:
            return f"no estimator for MeViS metric {key!r}"
        if not kept:
            return "no scored expressions"
        return mean_of(key, kept, lambda r: 0.0 if _v(r).outcome == DROPPED else getattr(_v(r), name))

    def _means(self, records: list[ScoreRecord], jf, rule: str) -> dict[str, float]:
        """{key: mean} of "J&F", "J", "F" over `records` (a dropped one counted 0), keys tagged for
        the rule "zero"."""
        if not records:
            return {}
        pairs = [(0.0, 0.0) if _v(r).outcome == DROPPED else jf(_v(r)) for r in records]
        means = jf_means([p[0] for p in pairs], [p[1] for p in pairs])
        return {k + (ZERO_TAG if rule == "zero" else ""): v for k, v in means.items()}


def _v(record: ScoreRecord) -> MeViSValues:
    return record.of(MeViSValues)


def _video_missing(sample: Sample, pred: Prediction) -> bool:
    """Whether a failed prediction records that its video's folder is missing: the precomputed
    adapter's trace "missing" = the first path part under its root that does not exist, the video
    folder or one above it (eval_mevis.py scores such an expression 0)."""
    missing = pred.trace.get("missing") if isinstance(pred.trace, dict) else None
    video = str(sample.meta.get("video", ""))
    return isinstance(missing, str) and bool(video) and (video == missing or video.startswith(missing + "/"))
