"""Metric units (metrics/units/): each against the reference-tested functions it wraps, the
empty-prediction baseline, the task check, and the one place RLEs are validated."""
from __future__ import annotations

import math
import shutil
from dataclasses import replace

import numpy as np
import pytest

from rvt_bench.core import masks
from rvt_bench.core.records import JudgeVerdict, ScoreRecord
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction, Sample, Target
from rvt_bench.metrics.boxes import aggregate_boxes, sample_box_scores
from rvt_bench.metrics.judge import NOT_CONFIGURED
from rvt_bench.metrics.masks import ciou, f_measure, giou, jaccard, lisa_sample_iou
from rvt_bench.metrics.protocols.units import UnitProtocol
from rvt_bench.metrics.units.box_iou import BoxIoU
from rvt_bench.metrics.units.judge import JudgeScore
from rvt_bench.metrics.units.captions import TextValues
from rvt_bench.metrics.units.lisa_iou import LisaIoU, LLMSegIoU, MaskIoUValues, llmseg_sample_iou
from rvt_bench.metrics.units.rle import decode_pair, rle_size_box
from rvt_bench.metrics.units.video_jf import VideoJF

H, W = 9, 11
needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed")


def rect(y0, y1, x0, x1, shape=(H, W)) -> np.ndarray:
    m = np.zeros(shape, dtype=bool)
    m[y0:y1, x0:x1] = True
    return m


def sample(sid="s", task="segmentation", n=3, **target) -> Sample:
    return Sample(id=sid, dataset="t", split="t", modality="video" if n > 1 else "image",
                  frames=[f"{k}.jpg" for k in range(n)], frame_ids=[str(k) for k in range(n)], query="q", task=task,
                  target=Target(**target), meta={"level": 1})


def record(sid: str, *values) -> ScoreRecord:
    return ScoreRecord(sid, values={v.kind: v for v in values})


def test_video_jf_is_davis_per_frame_then_mean_and_its_baseline_is_an_empty_prediction():
    gt = [rect(1, 6, 1, 6), None, rect(0, H, 0, W)]
    pr = [rect(2, 7, 1, 5), rect(0, 2, 0, 2), rect(0, H, 0, W)]
    s = sample(masks=[masks.encode(m) if m is not None else None for m in gt])
    rec = VideoJF().score(s, Prediction("s", masks=[masks.encode(m) for m in pr]))
    empty = np.zeros((H, W), bool)
    js = [jaccard(g if g is not None else empty, p) for g, p in zip(gt, pr)]
    fs = [f_measure(g if g is not None else empty, p) for g, p in zip(gt, pr)]
    assert rec.frames["J"] == js and rec.frames["F"] == fs
    assert rec.J == float(np.mean(js)) and rec.jf == (rec.J + rec.F) / 2
    # empty prediction: J = 1 only on the frame with an empty GT; F also on the full-frame GT (no boundary)
    assert rec.baseline["J"] == pytest.approx(1 / 3) and rec.baseline["F"] == pytest.approx(2 / 3)
    zero = replace(rec, J=0.0, F=0.0, jf=0.0)
    assert VideoJF().aggregate([record("a", rec), record("b", zero)])["J"] == rec.J / 2
    est = VideoJF().estimator("J&F", [record("a", rec), record("b", zero)])
    assert est.value() == VideoJF().aggregate([record("a", rec), record("b", zero)])["J&F"]
    assert VideoJF().estimator("m_vIoU", [record("a", rec)]) is None  # not one of its metrics


def test_video_jf_scores_a_prediction_for_another_task_as_empty():
    s = sample(n=1, masks=[masks.encode(rect(0, 3, 0, 3))])
    exact = [masks.encode(rect(0, 3, 0, 3))]
    assert VideoJF().score(s, Prediction("s", task="segmentation", masks=exact)).J == 1.0
    assert VideoJF().score(s, Prediction("s", task="grounding", masks=exact)).J == 0.0


def test_lisa_iou_matches_metrics_masks_and_llmseg_uses_its_own_epsilon():
    records = []
    for i, (g, p) in enumerate([(rect(0, 4, 0, 4), rect(0, 4, 0, 2)), (rect(0, 2, 0, 5), None), (None, None)]):
        s = sample(f"i{i}", n=1, masks=[masks.encode(g) if g is not None else None])
        records.append(record(f"i{i}", LisaIoU().score(s, Prediction(f"i{i}", masks=[masks.encode(p) if p is not None else None]))))
    inters, unions = [r.of(MaskIoUValues).I for r in records], [r.of(MaskIoUValues).U for r in records]
    assert (inters, unions) == ([8, 0, 0], [16, 10, 0])
    assert LisaIoU().aggregate(records) == {"gIoU": giou([lisa_sample_iou(i, u) for i, u in zip(inters, unions)]),
                                            "cIoU": ciou(inters, unions)}
    assert LisaIoU().baseline(records)["cIoU"] == 0.0
    assert LLMSegIoU().term(10, 12) == llmseg_sample_iou(10, 12) != LisaIoU().term(10, 12)
    with pytest.raises(ValueError, match="mode"):
        LisaIoU(mode="fast")


def test_box_iou_is_metrics_boxes_and_a_silent_model_scores_its_baseline():
    gt = [[[0, 0, 4, 4]], [], []]
    s = sample("g", task="grounding", boxes=gt)
    rec = BoxIoU().score(s, Prediction("g", boxes=[[[0, 0, 4, 2]], [], [[1, 1, 2, 2]]]))
    expected = sample_box_scores([[[0, 0, 4, 2]], [], [[1, 1, 2, 2]]], gt)
    assert (rec.giou_term, rec.viou) == (expected["giou_term"], expected["viou"])
    assert BoxIoU().aggregate([record("g", rec)]) == {k: v for k, v in aggregate_boxes([expected]).items() if k != "n"}
    silent = record("g", BoxIoU().score(s, Prediction.failure("g", "parse", "no answer")))
    assert BoxIoU().aggregate([silent])["m_vIoU"] == 0.0 == BoxIoU().baseline([silent])["m_vIoU"]
    with pytest.raises(DatasetFormatError, match="ground truth"):
        BoxIoU().score(sample("g", task="grounding", boxes=[[[4, 0, 1, 4]], [], []]), Prediction("g"))
    with pytest.raises(AdapterError, match="frame 0"):
        BoxIoU().score(s, Prediction("g", boxes=[[[4, 0, 1, 4]], [], []]))


def test_judge_unit_reports_not_configured_without_verdicts_and_counts_failures():
    recs = [record("a", TextValues("x", ["x"]))]
    assert JudgeScore().aggregate(recs) == {"judge": NOT_CONFIGURED}
    assert JudgeScore().estimator("judge", recs) == "no judged samples"
    judged = [ScoreRecord(sid, values=recs[0].values, judge=JudgeVerdict(score)) for sid, score in
              (("a", 1.0), ("b", 0.0), ("c", None))]
    out = JudgeScore().aggregate(judged)
    assert out["judge"] == 0.5 and out["judge_n"] == 3 and out["judge_n_failed"] == 1
    assert math.isclose(out["judge_failure_rate"], 1 / 3)
    assert JudgeScore().estimator("judge", judged).value() == 0.5  # over the scored verdicts
    assert judged[0].correct() is True and judged[1].correct() is False and judged[2].correct() is None


@needs_java
def test_captions_unit_is_pycocoevalcap_over_its_records():
    from rvt_bench.metrics.text import caption_scores
    from rvt_bench.metrics.units.captions import Captions

    pairs = [("v1", "three birds", ["three birds land"]), ("v2", "a red car", ["a red car parks"])]
    recs = [record(sid, Captions().score(sample(sid, task="vqa", answers=refs), Prediction(sid, text=hyp)))
            for sid, hyp, refs in pairs]
    expected = caption_scores([(sid, hyp) for sid, hyp, _ in pairs], {sid: refs for sid, _, refs in pairs},
                              metrics=("BLEU", "CIDEr"))["corpus"]
    assert Captions().aggregate(recs) == expected


def test_unit_protocol_merges_units_and_breaks_down_by_meta():
    proto = UnitProtocol([VideoJF()], name="segmentation", headline=["J&F"])
    s = sample(masks=[masks.encode(rect(0, 3, 0, 3)), None, None])
    out = proto.aggregate([proto.score(s, Prediction("s"))])
    assert out["metrics"]["J"] == 2 / 3 and out["breakdown"]["level"]["1"]["n"] == 1
    assert out["baseline_empty"]["J"] == 2 / 3
    assert any(w.startswith("J&F = ") for w in out["warnings"])  # the headline equals its baseline
    with pytest.raises(ValueError, match="no units"):
        UnitProtocol([])


def test_rle_validation_blames_the_model_for_predictions_and_the_dataset_for_gt():
    s = sample(n=1)
    good = masks.encode(rect(0, 2, 0, 2))
    with pytest.raises(AdapterError, match=r"sample 's' frame 0: predicted mask is not a valid COCO RLE"):
        decode_pair(s, 0, good, {"size": [H, W], "counts": "!!not rle"})
    with pytest.raises(DatasetFormatError, match=r"sample 's' frame 0: ground-truth mask is not a valid COCO RLE"):
        rle_size_box(s, 0, {"counts": "x"}, "ground-truth")
    with pytest.raises(AdapterError, match=r"predicted mask is \[4, 4\] \(H, W\), the ground truth is \[9, 11\]"):
        decode_pair(s, 0, good, masks.encode(np.zeros((4, 4), bool)))
