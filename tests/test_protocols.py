"""metrics/protocols: record shape, failure handling, aggregation, and parity with VISA / LISA runs.

Reference numbers: tests/data/parity/revos_eval_visa.json (VISA tools/eval_revos.py @ ec158fd, run
unchanged) and lisa_giou_ciou*.json (LISA validate @ 3cb2d43); see tests/data/parity/README.md.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from rvt_bench.core.masks import encode
from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction, Sample, Target
from rvt_bench.metrics.protocols import CompositeProtocol, ReasonSegProtocol, ReVOSProtocol
from rvt_bench.metrics.protocols.revos import ReVOSValues
from rvt_bench.metrics.units.lisa_iou import MaskIoUValues

PARITY = Path(__file__).parent / "data" / "parity"
REVOS_VISA = json.loads((PARITY / "revos_eval_visa.json").read_text())
LISA = [json.loads(line) for line in open(PARITY / "lisa_giou_ciou.jsonl")]
LISA_AGG = json.loads((PARITY / "lisa_giou_ciou_aggregate.json").read_text())


def video_sample(sid, gt, type_id=0, **meta):
    return Sample(id=sid, dataset="revos", split="valid", modality="video", frames=[f"f{k}.jpg" for k in range(len(gt))],
                  frame_ids=[str(k) for k in range(len(gt))], query="q", task="segmentation",
                  target=Target(masks=gt), meta={"type_id": type_id, **meta})


def image_sample(sid, gt, ignore=None, **meta):
    return Sample(id=sid, dataset="reasonseg", split="val", modality="image", frames=["x.jpg"], frame_ids=["x"],
                  query="q", task="segmentation", target=Target(masks=[gt], ignore=[ignore]), meta=meta)


def rv(record: ScoreRecord) -> ReVOSValues:
    return record.of(ReVOSValues)


def box_mask(h, w, y0, y1, x0, x1):
    m = np.zeros((h, w), bool)
    m[y0:y1, x0:x1] = True
    return encode(m)


# --- ReVOS ------------------------------------------------------------------------------------------


def _visa_records(protocol):
    records = []
    for e in REVOS_VISA["expressions"]:
        sample = video_sample(f"{e['video']}/{e['exp_id']}", e["gt"], e["type_id"])
        records.append(protocol.score(sample, Prediction(sample_id=sample.id, masks=e["pred"])))
    return records


def test_revos_per_expression_j_f_match_visa():
    for e, r in zip(REVOS_VISA["expressions"], _visa_records(ReVOSProtocol())):
        assert abs(rv(r).J - e["J_unrounded"]) <= 1e-12
        assert abs(rv(r).F - e["F_unrounded"]) <= 1e-12
        assert round(100 * np.float64(rv(r).J), 2) == e["visa_csv"]["J"]
        assert round(100 * np.float64(rv(r).F), 2) == e["visa_csv"]["F"]


def test_revos_reference_mode_matches_eval_revos_output():
    got = ReVOSProtocol().aggregate(_visa_records(ReVOSProtocol()))["metrics"]
    visa = REVOS_VISA["visa_results"]  # percent
    for ours, theirs in [("", "overall"), ("referring/", "referring"), ("reasoning/", "reason")]:
        for key, visa_key in [("J", "J"), ("F", "F"), ("J&F", "JF")]:
            assert abs(got[ours + key] - visa[theirs][visa_key] / 100) <= 1e-12, ours + key


def test_revos_textbook_mode_skips_the_rounding():
    records = _visa_records(ReVOSProtocol())
    ref = ReVOSProtocol().aggregate(records)["metrics"]
    book = ReVOSProtocol(mode="textbook").aggregate(records)["metrics"]
    referring = [rv(r).J for r in records if rv(r).type_id == 0]
    assert book["referring/J"] == pytest.approx(np.mean(referring), abs=1e-15)
    assert book["J"] != ref["J"]
    assert abs(book["J"] - ref["J"]) < 5e-5  # rounding to 0.01 % moves each expression by <= 5e-5


def test_revos_no_target_expressions_are_reported_apart_from_the_headline():
    records = _visa_records(ReVOSProtocol())
    with_type2 = ReVOSProtocol().aggregate(records)
    without = ReVOSProtocol().aggregate([r for r in records if rv(r).type_id != 2])
    assert with_type2["metrics"] == without["metrics"]
    assert with_type2["breakdown"]["type"]["2"]["n"] == sum(e["type_id"] == 2 for e in REVOS_VISA["expressions"])
    assert "2" not in without["breakdown"]["type"]


def test_revos_record_fields_and_per_frame_counts():
    gt = [box_mask(10, 10, 0, 4, 0, 4), None]
    pred = [box_mask(10, 10, 0, 4, 0, 2), None]
    rec = ReVOSProtocol().score(video_sample("v/0", gt, 1, level=2), Prediction(sample_id="v/0", masks=pred))
    json.dumps(rec.to_json())
    assert (rec.sample_id, rec.modality, rec.task, rec.failed, rec.error_kind) == ("v/0", "video", "segmentation", False, None)
    assert rec.meta == {"type_id": 1, "level": 2}
    assert rv(rec).frames["I"] == [8, 0] and rv(rec).frames["U"] == [16, 0]
    assert rv(rec).frames["J"] == [0.5, 1.0]
    assert rv(rec).J == 0.75 and rv(rec).type_id == 1


def test_revos_failed_prediction_scores_zero_as_visa():
    """VISA eval_revos.py's bare `except` records [0, 0, 0, 0] for the expression, even on frames
    whose GT is empty (where an empty mask would score 1)."""
    gt = [box_mask(10, 10, 0, 4, 0, 4), None, None]
    failed = Prediction.failure("v/0", "parse", "no <answer>")
    rec = ReVOSProtocol().score(video_sample("v/0", gt), failed)
    assert rec.failed is True and rec.error_kind == "parse" and rv(rec).zeroed is True
    assert (rv(rec).J, rv(rec).F, rv(rec).A, rv(rec).jf) == (0.0, 0.0, 0.0, 0.0)
    assert ReVOSProtocol().aggregate([rec])["failed_zero"] == ["v/0"]


def test_revos_failed_empty_option_scores_a_failure_as_an_empty_mask_under_its_own_name():
    gt = [box_mask(10, 10, 0, 4, 0, 4), None, None]
    protocol = ReVOSProtocol(failed="empty")
    rec = protocol.score(video_sample("v/0", gt), Prediction.failure("v/0", "parse", "no <answer>"))
    assert rv(rec).frames["J"] == [0.0, 1.0, 1.0]
    assert rv(rec).frames["F"] == [0.0, 1.0, 1.0]
    assert protocol.headline == ["J&F[failed-empty]", "J[failed-empty]", "F[failed-empty]"]
    assert protocol.aggregate([rec])["metrics"]["J[failed-empty]"] == pytest.approx(2 / 3, abs=0.005)


def test_revos_wrong_frame_count_raises_adapter_error_naming_both():
    sample = video_sample("v/0", [None, None, None])
    with pytest.raises(AdapterError, match=r"2 masks.*3 frames"):
        ReVOSProtocol().score(sample, Prediction(sample_id="v/0", masks=[None, None]))


def test_revos_wrong_mask_size_raises_adapter_error():
    sample = video_sample("v/0", [box_mask(10, 10, 0, 2, 0, 2)])
    with pytest.raises(AdapterError, match="frame 0"):
        ReVOSProtocol().score(sample, Prediction(sample_id="v/0", masks=[box_mask(10, 12, 0, 2, 0, 2)]))


def test_malformed_predicted_rle_is_an_adapter_error_naming_the_sample():
    sample = video_sample("v/7", [box_mask(10, 10, 0, 2, 0, 2)])
    with pytest.raises(AdapterError, match=r"'v/7' frame 0: predicted mask"):
        ReVOSProtocol().score(sample, Prediction(sample_id="v/7", masks=[{"counts": "abc"}]))
    with pytest.raises(AdapterError, match=r"'img' frame 0: predicted mask"):
        ReasonSegProtocol().score(image_sample("img", None), Prediction(sample_id="img", masks=["not an RLE"]))


def test_revos_missing_type_id_is_a_dataset_error_unless_defaulted():
    sample = video_sample("v/0", [None])
    del sample.meta["type_id"]
    with pytest.raises(DatasetFormatError, match="type_id"):
        ReVOSProtocol().score(sample, Prediction(sample_id="v/0"))
    assert rv(ReVOSProtocol(default_type_id=1).score(sample, Prediction(sample_id="v/0"))).type_id == 1


def test_revos_breakdown_by_level_and_category_and_order_independence():
    gt = [box_mask(8, 8, 0, 4, 0, 4)]
    hit = [box_mask(8, 8, 0, 4, 0, 4)]
    records = [
        ReVOSProtocol().score(video_sample("a", gt, 0, level=1, category="dog"), Prediction("a", masks=hit)),
        ReVOSProtocol().score(video_sample("b", gt, 1, level=2, category="dog"), Prediction("b", masks=[None])),
        ReVOSProtocol().score(video_sample("c", gt, 1, level=2, category="cat"), Prediction("c", masks=hit)),
    ]
    out = ReVOSProtocol().aggregate(records)
    assert out["n"] == 3
    assert out["breakdown"]["level"]["1"] == {"J": 1.0, "F": 1.0, "J&F": 1.0, "A": 1.0, "n": 1}
    assert out["breakdown"]["level"]["2"]["J"] == 0.5
    assert out["breakdown"]["category"]["dog"]["n"] == 2
    assert out["metrics"]["J"] == (1.0 + 0.5) / 2  # (referring + reasoning) / 2, not the mean of 3
    shuffled = records[:]
    random.Random(0).shuffle(shuffled)
    assert ReVOSProtocol().aggregate(shuffled) == out


# --- ReasonSeg --------------------------------------------------------------------------------------


def _lisa_records(protocol):
    return [protocol.score(image_sample(c["id"], c["gt"], c["ignore"]), Prediction(sample_id=c["id"], masks=[c["pred"]]))
            for c in LISA]


def test_reasonseg_records_carry_lisa_counts():
    for case, rec in zip(LISA, _lisa_records(ReasonSegProtocol())):
        values = rec.of(MaskIoUValues)
        assert (values.I, values.U, values.target) == (case["intersection"], case["union"], case["target"])
        assert values.giou_term == case["acc_iou_float32"]


def test_reasonseg_reference_mode_matches_lisa_validate():
    metrics = ReasonSegProtocol().aggregate(_lisa_records(ReasonSegProtocol()))["metrics"]
    assert metrics["gIoU"] == LISA_AGG["lisa_reference"]["giou"]["value"]
    assert metrics["cIoU"] == LISA_AGG["lisa_reference"]["ciou"]["value"]


def test_reasonseg_textbook_mode():
    metrics = ReasonSegProtocol(mode="textbook").aggregate(_lisa_records(ReasonSegProtocol()))["metrics"]
    assert abs(metrics["gIoU"] - LISA_AGG["textbook_float64"]["giou"]) <= 1e-12
    assert abs(metrics["cIoU"] - LISA_AGG["textbook_float64"]["ciou"]) <= 1e-12


def test_reasonseg_failed_prediction_scores_as_empty_and_breakdown_by_query_kind():
    gt = box_mask(10, 10, 0, 5, 0, 5)
    records = [
        ReasonSegProtocol().score(image_sample("a", gt, is_sentence=True), Prediction.failure("a", "sandbox", "timeout")),
        ReasonSegProtocol().score(image_sample("b", gt, is_sentence=False), Prediction("b", masks=[gt])),
    ]
    assert records[0].failed and records[0].of(MaskIoUValues).I == 0 and records[0].of(MaskIoUValues).U == 25
    out = ReasonSegProtocol(mode="textbook").aggregate(records)
    assert out["breakdown"]["is_sentence"]["true"] == {"gIoU": 0.0, "cIoU": 0.0, "n": 1}
    assert out["breakdown"]["is_sentence"]["false"] == {"gIoU": 1.0, "cIoU": 1.0, "n": 1}
    assert out["metrics"] == {"gIoU": 0.5, "cIoU": 0.5}


def test_reasonseg_baseline_and_warnings_for_empty_gt_and_a_baseline_score():
    """Two samples, one with an empty GT: an empty prediction scores gIoU (0 + 1) / 2, and a run of
    empty predictions equals that baseline and is flagged."""
    gt = box_mask(10, 10, 0, 5, 0, 5)
    records = [ReasonSegProtocol(mode="textbook").score(image_sample("a", gt), Prediction("a", masks=[None])),
               ReasonSegProtocol(mode="textbook").score(image_sample("b", None), Prediction("b", masks=[None]))]
    out = ReasonSegProtocol(mode="textbook").aggregate(records)
    assert out["baseline_empty"] == {"gIoU": 0.5, "cIoU": 0.0}
    assert out["metrics"]["gIoU"] == 0.5
    assert any("1 of 2 scored samples have an empty GT" in w and "b" in w for w in out["warnings"])
    assert any("more than 3%" in w for w in out["warnings"])
    assert any(w.startswith("gIoU = 0.500000 equals the empty-prediction baseline") for w in out["warnings"])


def test_reasonseg_rejects_multi_frame_samples():
    sample = image_sample("a", None)
    sample.frames, sample.frame_ids, sample.target.masks = ["1", "2"], ["1", "2"], [None, None]
    with pytest.raises(DatasetFormatError, match="one frame"):
        ReasonSegProtocol().score(sample, Prediction("a"))


# --- Composite --------------------------------------------------------------------------------------


def _mixed():
    gt = box_mask(8, 8, 0, 4, 0, 4)
    return [
        (image_sample("image/a", gt, is_sentence=False), Prediction("image/a", masks=[gt])),
        (video_sample("video/v/0", [gt, None], 0), Prediction("video/v/0", masks=[gt, None])),
        (video_sample("video/v/1", [gt, gt], 1), Prediction("video/v/1", masks=[None, gt])),
    ]


def test_composite_routes_by_modality_and_prefixes_metrics():
    proto = CompositeProtocol(parts={"image": ReasonSegProtocol(), "video": ReVOSProtocol(mode="textbook")})
    records = [proto.score(s, p) for s, p in _mixed()]
    assert [r.parts["part"] for r in records] == ["image", "video", "video"]
    out = proto.aggregate(records)
    assert out["n"] == 3
    assert out["parts"]["video"]["metrics"]["J"] == out["metrics"]["video/J"] == (1.0 + 0.5) / 2
    assert out["metrics"]["image/cIoU"] == ReasonSegProtocol().aggregate(records[:1])["metrics"]["cIoU"]
    assert proto.headline == ["image/gIoU", "image/cIoU", "video/J&F", "video/J", "video/F"]


def test_composite_builds_parts_from_hydra_configs():
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"_target_": "rvt_bench.metrics.protocols.composite.CompositeProtocol",
                            "headline": ["video/J&F", "image/gIoU"],
                            "parts": {"image": {"_target_": "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol"},
                                      "video": {"_target_": "rvt_bench.metrics.protocols.revos.ReVOSProtocol", "mode": "textbook"}}})
    proto = instantiate(cfg)
    assert isinstance(proto.parts["image"], ReasonSegProtocol)
    assert proto.parts["video"].mode == "textbook"
    assert proto.headline == ["video/J&F", "image/gIoU"]
    assert set(proto.aggregate([proto.score(s, p) for s, p in _mixed()])["metrics"]) >= {"video/J&F", "image/gIoU"}


def test_composite_unknown_modality_is_a_dataset_error():
    proto = CompositeProtocol(parts={"image": ReasonSegProtocol()})
    sample, pred = _mixed()[1]
    with pytest.raises(DatasetFormatError, match="modality 'video'"):
        proto.score(sample, pred)
