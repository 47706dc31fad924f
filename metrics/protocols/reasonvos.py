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
from rvt_bench.metrics.protocols.units import UnitProtocol
from rvt_bench.metrics.units.video_jf import VideoJF

FAILED = ("skip", "empty")
TAG = "[failed-empty]"
LISTED = 20  # skipped expressions named in the warning before "... and N more"


class ReasonVOSProtocol(UnitProtocol):
    """J, F, J&F of ReasonVOS (module docstring); breakdown by is_sent and source.

    failed: "skip" (the reference: a failed expression is left out; default) or "empty" (scored as
        an empty mask; keys "J[failed-empty]", ...).
    bound_th: F's boundary tolerance (fraction of the frame diagonal), davis2017's 0.008.
    aggregate(records) -> UnitProtocol's body over the kept records ("n": every record), plus
    "n_scored": the records in the means and "skipped": the ids left out. Raises ValueError for an
    unknown `failed`.
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

    def _tagged(self, values: dict) -> dict:
        return {(k if k == "n" else self.key(k)): v for k, v in values.items()}

    def _kept(self, records: list[ScoreRecord]) -> list[ScoreRecord]:
        return [r for r in records if not r.failed] if self.failed == "skip" else list(records)

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        kept = self._kept(records)
        skipped = sorted(r.sample_id for r in records if r.failed) if self.failed == "skip" else []
        body = super().aggregate(kept)
        body["metrics"] = self._tagged(body["metrics"])
        body["baseline_empty"] = self._tagged(body["baseline_empty"])
        body["breakdown"] = {g: {v: self._tagged(vals) for v, vals in rows.items()} for g, rows in body["breakdown"].items()}
        body["n"], body["n_scored"], body["skipped"] = len(records), len(kept), skipped
        if skipped:
            named = ", ".join(skipped[:LISTED]) + (f" ... and {len(skipped) - LISTED} more" if len(skipped) > LISTED else "")
            body["warnings"].insert(0, (
                f"{len(skipped)} of {len(records)} expressions have no usable prediction and are left out of every "
                f"mean, as VideoLISA's eval_reason_vos.py skips them: {named}; dataset.protocol.failed=empty scores "
                "them as empty masks (keys [failed-empty])"))
        return body

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found:
        plain = key[: -len(TAG)] if self.failed == "empty" and key.endswith(TAG) else key
        if self.failed == "empty" and plain == key:
            return f"no estimator for ReasonVOS metric {key!r}"
        return super().estimator(plain, self._kept(records))
