"""ReasonVOS protocol, following VideoLISA `evaluation/reason_vos/eval_reason_vos.py`
(showlab/VideoLISA@146f2bc): per expression J and F over every frame the loader gives (the sorted
GT PNGs; metrics/units/video_jf.py, davis2017's definitions with cv2 dilation, float64, no
rounding); J = mean over expressions of J, F likewise, J&F = (J + F) / 2.

The reference's rule for a prediction that is not there: an expression whose prediction folder is
missing is skipped ("... not found, not take into metric computation"), and so, silently, is one
whose folder lacks a frame's PNG or holds one of another size (its worker raises and the
expression never reaches the result dict). So by default (`failed="skip"`) a failed prediction is
left out of every mean, and metrics.json lists it ("skipped") with a warning naming each.
`failed="empty"` is the corrected variant: a failed prediction is scored as an empty mask and every
metric key is tagged "[failed-empty]". Notes: docs/benchmarks/reasonvos.md.
"""
from __future__ import annotations

from rvt_bench.core.records import ScoreRecord
from rvt_bench.metrics.estimators import Found
from rvt_bench.metrics.masks import DAVIS_BOUND_TH
from rvt_bench.metrics.protocols.base import excluded_block
from rvt_bench.metrics.protocols.units import UnitProtocol
from rvt_bench.metrics.units.video_jf import VideoJF

FAILED = ("skip", "empty")
SKIPPED_WHY = "skipped as eval_reason_vos.py skips it: its prediction folder or a frame PNG is missing or unusable"
TAG = "[failed-empty]"
LISTED = 20  # skipped expressions named in the warning before "... and N more"


class ReasonVOSProtocol(UnitProtocol):
    """J, F, J&F of ReasonVOS (module docstring); breakdown by is_sent and source.

    failed: "skip" (the reference: a failed expression is left out; default) or "empty" (scored as
        an empty mask; keys "J[failed-empty]", ...).
    bound_th: F's boundary tolerance (fraction of the frame diagonal), davis2017's 0.008.
    aggregate(records) -> UnitProtocol's body under the headline's rule, with the other rule's
    metrics beside it (both numbers in one run: "J&F" as the reference skips, "J&F[failed-empty]");
    "n" (and "n_scored", its older name): the records the headline averages; "skipped": the ids the
    reference leaves out, also as "excluded" / "excluded_samples" with the reason. Raises ValueError
    for an unknown `failed`.
    """

    version = 1
    # is_sent as the paper layout's columns name it (conf/dataset/reasonvos.yaml): a short phrase or a sentence
    group_names = {"is_sent": {"false": "short", "true": "sentence"}}

    def __init__(self, failed: str = "skip", bound_th: float = DAVIS_BOUND_TH) -> None:
        if failed not in FAILED:
            raise ValueError(f"reasonvos protocol: failed must be one of {FAILED}, got {failed!r}")
        self.failed = failed
        super().__init__([VideoJF(bound_th)], name="reasonvos", headline=["J&F", "J", "F"],
                         meta_keys=("is_sent", "source"), what="expressions")
        self.headline = [self.key(k) for k in ("J&F", "J", "F")]
        self.baseline_keys = ["J&F", "J", "F"]  # compared before the keys are tagged

    def key(self, metric: str) -> str:
        """The published name of `metric` under this protocol's `failed` ("J" or "J[failed-empty]")."""
        return metric + (TAG if self.failed == "empty" else "")

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        skipped = sorted(r.sample_id for r in records if r.failed) if self.failed == "skip" else []
        reference = super().aggregate([r for r in records if not r.failed])
        honest = super().aggregate(list(records))
        honest["metrics"] = {k + TAG: v for k, v in honest["metrics"].items()}
        honest["baseline_empty"] = {k + TAG: v for k, v in honest["baseline_empty"].items()}
        honest["breakdown"] = {g: {v: {k + TAG: x for k, x in vals.items() if k != "n"} for v, vals in rows.items()}
                               for g, rows in honest["breakdown"].items()}
        body, other = (reference, honest) if self.failed == "skip" else (honest, reference)
        # both numbers in one run: the headline's first, the other's under its own keys
        body["metrics"] = {**body["metrics"], **other["metrics"]}
        body["baseline_empty"] = {**body["baseline_empty"], **other["baseline_empty"]}
        for group, rows in other["breakdown"].items():
            for value, vals in rows.items():
                body["breakdown"].setdefault(group, {}).setdefault(value, {}).update(
                    {k: x for k, x in vals.items() if k != "n"})
        body["n"], body["n_scored"], body["skipped"] = len(records) - len(skipped), len(records) - len(skipped), skipped
        body.update(excluded_block({i: SKIPPED_WHY for i in skipped}))
        if skipped:
            named = ", ".join(skipped[:LISTED]) + (f" ... and {len(skipped) - LISTED} more" if len(skipped) > LISTED else "")
            body["warnings"].insert(0, (
                f"{len(skipped)} of {len(records)} expressions have no usable prediction and are left out of every "
                f"mean, as VideoLISA's eval_reason_vos.py skips them: {named}; dataset.protocol.failed=empty scores "
                "them as empty masks (its number is J&F[failed-empty])"))
        return body

    def counting_failures(self) -> "ReasonVOSProtocol":
        return self if self.failed == "empty" else type(self)(failed="empty", bound_th=self.units[0].bound_th)

    def variant_label(self) -> str:
        return "failed=empty" if self.failed == "empty" else ""

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found:
        """The reference's keys over the expressions it keeps, the "[failed-empty]" ones over all."""
        if key.endswith(TAG):
            return super().estimator(key[: -len(TAG)], list(records))
        return super().estimator(key, [r for r in records if not r.failed])
