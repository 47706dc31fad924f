"""Ref-DAVIS17 protocol, VISA's ``tools/eval_davis17.py`` (cilinyan/VISA@ec158fde): per expression
davis2017's J and F averaged over every frame of the video (metrics/units/video_jf.py), then plain
means over expressions, J&F = (J + F) / 2. Its quirks, the variants and what other papers print
under the same name: docs/benchmarks/ref_davis17.md."""
from __future__ import annotations

from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import Prediction, Sample
from rvt_bench.metrics.protocols.base import excluded_block
from rvt_bench.metrics.protocols.units import UnitProtocol
from rvt_bench.metrics.units.video_jf import VideoJF, VideoJFValues

FAILED = ("visa", "zero", "empty")


class RefDAVIS17Protocol(UnitProtocol):
    """J, F, J&F as VISA's eval_davis17.py; every frame counted (a frame empty on both sides is
    J = F = 1, as davis2017's db_eval_iou / f_measure).

    failed: what a failed expression (no prediction, an unreadable or wrong-size PNG) counts as:
      "visa" (default, the reference's printed number): VISA scores an expression whose video
        folder is missing 0, and silently drops one whose expression folder or a frame PNG is
        missing or unreadable (its worker dies on it). We cannot see folders, so: when every
        expression of a video failed, the video is taken as missing and each scores J = F = 0;
        otherwise each failed expression is dropped from the means, and a warning names it;
      "zero": every failed expression scores 0 (metric keys get "[failed-zero]");
      "empty": scored as an empty prediction (metric keys get "[failed-empty]").
    bound_th: F's boundary tolerance, davis2017's 0.008 of the frame diagonal.
    Raises ValueError for an unknown ``failed``.

    score(sample, pred): header + VideoJFValues ("video_jf"); a failed prediction gets J = F = 0
    unless failed="empty". aggregate(records): {"metrics": {"J&F", "J", "F"} in [0, 1] (VISA
    prints round(100 * x, 2)) and the corrected number beside it ("J&F[failed-zero]", or the
    chosen variant's keys; the headline's first), "n" (expressions the headline counts),
    "breakdown": {}, "baseline_empty", "warnings", "dropped": [sample ids], "excluded" /
    "excluded_samples" (the dropped ones with their reason)}.
    """

    name = "ref_davis17"
    headline = ["J&F", "J", "F"]

    def __init__(self, failed: str = "visa", bound_th: float | None = None) -> None:
        if failed not in FAILED:
            raise ValueError(f"ref_davis17: failed must be one of {list(FAILED)}, got {failed!r}")
        self.failed = failed
        unit = VideoJF() if bound_th is None else VideoJF(bound_th)
        super().__init__([unit], name=type(self).name, headline=list(type(self).headline), meta_keys=("video",),
                         what="expressions")
        if failed != "visa":  # the variant's keys head the run
            self.headline = [f"{k}[failed-{failed}]" for k in type(self).headline]

    def score(self, sample: Sample, pred: Prediction) -> ScoreRecord:
        record = super().score(sample, pred)
        if pred.error is not None and self.failed != "empty":
            values = self.units[0].of(record)
            record.values[values.kind] = VideoJFValues(0.0, 0.0, 0.0, {"I": [], "U": [], "J": [], "F": []},
                                                       values.gt_empty, values.baseline)
        return record

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        kept, dropped = self.counted(records, "visa")
        reference = super().aggregate(_zeroed(kept))
        tag = f"[failed-{'zero' if self.failed == 'visa' else self.failed}]"
        honest = super().aggregate(list(records))
        honest["metrics"] = {f"{k}{tag}": v for k, v in honest["metrics"].items()}
        honest["baseline_empty"] = {f"{k}{tag}": v for k, v in honest["baseline_empty"].items()}
        out, other = (reference, honest) if self.failed == "visa" else (honest, reference)
        # both numbers in one run: the headline's first, the other's under its own keys
        out["metrics"] = {**out["metrics"], **other["metrics"]}
        out["baseline_empty"] = {**out["baseline_empty"], **other["baseline_empty"]}
        out["breakdown"] = {}
        dropped = dropped if self.failed == "visa" else []
        out["n"], out["dropped"] = len(records) - len(dropped), dropped
        out.update(excluded_block({i: DROPPED_WHY for i in dropped}))
        if dropped:
            out["warnings"] = out["warnings"] + [
                f"{len(dropped)} expressions dropped as VISA's eval_davis17.py drops them (expression folder or a "
                f"frame PNG missing or unreadable; dataset.protocol.failed=zero counts them 0, its number is "
                f"J&F[failed-zero]): {', '.join(dropped)}"]
        return out

    def counting_failures(self) -> "RefDAVIS17Protocol":
        return self if self.failed != "visa" else type(self)(failed="zero", bound_th=self.units[0].bound_th)

    def variant_label(self) -> str:
        return "" if self.failed == "visa" else f"failed={self.failed}"

    def counted(self, records: list[ScoreRecord], rule: str | None = None) -> tuple[list[ScoreRecord], list[str]]:
        """(records the means count, ids of the expressions dropped), by the ``failed`` rule (or `rule`)."""
        if (rule or self.failed) != "visa":
            return list(records), []
        by_video: dict[str, list[ScoreRecord]] = {}
        for r in records:
            by_video.setdefault(str(r.meta.get("video")), []).append(r)
        kept, dropped = [], []
        for group in by_video.values():
            whole_video_missing = all(r.failed for r in group)
            for r in group:
                if r.failed and not whole_video_missing:
                    dropped.append(r.sample_id)
                else:
                    kept.append(r)
        return kept, sorted(dropped)

    def estimator(self, key: str, records: list[ScoreRecord]):
        """The reference's keys over the expressions VISA keeps (a failed one 0), a "[failed-...]" key
        over every expression as scored."""
        base = key.split("[")[0]
        if base != key:
            return super().estimator(base, list(records))
        return super().estimator(base, _zeroed(self.counted(records, "visa")[0]))


DROPPED_WHY = "dropped as VISA's eval_davis17.py drops it: its expression folder or a frame PNG is missing or unreadable"


def _zeroed(records: list[ScoreRecord]) -> list[ScoreRecord]:
    """`records` with every failed one scored J = F = 0 (as VISA scores a missing video), copies."""
    import copy

    out = []
    for r in records:
        values = r.values.get(VideoJFValues.kind) if r.failed else None
        if isinstance(values, VideoJFValues) and (values.J, values.F) != (0.0, 0.0):
            r = copy.copy(r)
            r.values = {**r.values, VideoJFValues.kind: VideoJFValues(0.0, 0.0, 0.0, {"I": [], "U": [], "J": [], "F": []},
                                                                values.gt_empty, values.baseline)}
        out.append(r)
    return out
