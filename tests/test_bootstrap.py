"""rvt_bench.harness.bootstrap: the estimators the protocols declare reproduce their numbers; intervals and paired tests."""
import math

import numpy as np
import pytest

from rvt_bench.core.records import ScoreRecord
from rvt_bench.harness import bootstrap
from rvt_bench.metrics.protocols.llmseg40k import LLMSegProtocol
from rvt_bench.metrics.protocols.reasonseg import ReasonSegProtocol
from rvt_bench.metrics.protocols.revos import ReVOSProtocol, ReVOSValues
from rvt_bench.metrics.protocols.rvtbench import RVTBenchProtocol
from rvt_bench.metrics.units.box_iou import BoxValues
from rvt_bench.metrics.units.captions import TextValues
from rvt_bench.metrics.units.lisa_iou import LisaIoU, LLMSegIoU, MaskIoUValues
from rvt_bench.metrics.units.video_jf import VideoJFValues


def revos_records(n=40, seed=1):
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        j, f, a = (float(x) for x in rng.random(3))
        out.append(ScoreRecord(f"e{k:03d}", meta={"type_id": k % 2},
                               values={"revos": ReVOSValues(k % 2, j, f, (j + f) / 2, {}, A=a)}))
    return out


def image_records(n=30, seed=2, unit=LisaIoU()):
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        u = int(rng.integers(0, 500))
        i = int(rng.integers(0, u + 1))
        out.append(ScoreRecord(f"s{k:03d}", task="segmentation",
                               values={"mask_iou": MaskIoUValues(i, u, u, unit.term(i, u), i / u if u else 1.0)}))
    return out


def mean_records(values):
    return [ScoreRecord(f"s{k:04d}", task="segmentation", values={"video_jf": VideoJFValues(v, v, v, {})})
            for k, v in enumerate(values)]


@pytest.mark.parametrize("mode", ["reference", "textbook"])
def test_revos_estimators_reproduce_the_protocol(mode):
    protocol, records = ReVOSProtocol(mode=mode), revos_records()
    reported = protocol.aggregate(records)["metrics"]
    for key in ("J&F", "J", "F", "A", "referring/J&F", "reasoning/F"):
        assert protocol.estimator(key, records).value() == pytest.approx(reported[key], abs=1e-9)
    assert len(protocol.estimator("J", records).strata) == 2  # referring and reasoning resampled apart


def test_revos_estimators_follow_the_metric_names_of_the_protocols_options():
    protocol, records = ReVOSProtocol(failed="empty"), revos_records()
    reported = protocol.aggregate(records)["metrics"]
    assert protocol.estimator("J&F[failed-empty]", records).value() == pytest.approx(reported["J&F[failed-empty]"], abs=1e-9)
    assert "no estimator" in protocol.estimator("J&F", records)


def test_ciou_estimator_is_a_ratio_of_sums():
    protocol, records = ReasonSegProtocol(mode="textbook"), image_records()
    reported = protocol.aggregate(records)["metrics"]
    assert protocol.estimator("cIoU", records).value() == pytest.approx(reported["cIoU"], abs=1e-12)
    assert protocol.estimator("gIoU", records).value() == pytest.approx(reported["gIoU"], abs=1e-12)


@pytest.mark.parametrize("n", [1, 3, 10, 30])
def test_reference_giou_estimator_divides_by_n_plus_1e_5_as_lisa(n):
    # LISA's gIoU is sum / (N + 1e-5); a plain mean differs by ~gIoU * 1e-5 / N, beyond the
    # tolerance for the main job's 3 image samples, which then printed no interval.
    protocol, records = ReasonSegProtocol(mode="reference"), image_records(n=n, seed=n)
    reported = protocol.aggregate(records)["metrics"]["gIoU"]
    assert protocol.estimator("gIoU", records).value() == pytest.approx(reported, abs=1e-7)
    ci = bootstrap.headline_cis(protocol, records, {"gIoU": reported}, b=200)["gIoU"]
    assert ci["low"] is not None and ci["low"] <= reported + 1e-6 and ci["high"] >= reported - 1e-6


@pytest.mark.parametrize("n", [3, 30])
def test_llmseg40k_giou_and_ciou_have_intervals_from_its_own_terms(n):
    # LLM-Seg's term is float32 I / (U + 1e-8) (not LISA's 1e-5), its sum divided by N + 1e-5 too
    protocol, records = LLMSegProtocol(), image_records(n=n, seed=n, unit=LLMSegIoU())
    reported = protocol.aggregate(records)["metrics"]
    cis = bootstrap.headline_cis(protocol, records, reported, b=200)
    for key in ("gIoU", "cIoU"):
        assert protocol.estimator(key, records).value() == pytest.approx(reported[key], abs=1e-7)
        assert cis[key]["low"] is not None, cis[key]  # it printed n/a, "no per-sample estimator", before
        assert cis[key]["low"] <= reported[key] + 1e-6 and cis[key]["high"] >= reported[key] - 1e-6, cis[key]


def test_constant_scores_give_a_zero_width_interval():
    est = RVTBenchProtocol().estimator("segmentation/J&F", mean_records([0.25] * 50))
    ci = bootstrap.confidence_interval(est, b=200)
    assert ci["low"] == pytest.approx(0.25) and ci["high"] == pytest.approx(0.25) and ci["n"] == 50


def test_interval_of_a_mean_matches_the_normal_approximation():
    values = [1.0] * 200 + [0.0] * 200  # p = 0.5, n = 400: 95% half-width 1.96 * sqrt(0.25 / 400) = 0.049
    ci = bootstrap.confidence_interval(RVTBenchProtocol().estimator("segmentation/J", mean_records(values)), b=4000)
    assert (ci["high"] - ci["low"]) / 2 == pytest.approx(1.96 * math.sqrt(0.25 / 400), rel=0.1)
    assert ci["low"] < 0.5 < ci["high"]


def test_same_seed_same_interval_other_seed_other_interval():
    est = ReasonSegProtocol().estimator("cIoU", image_records())
    assert bootstrap.confidence_interval(est, seed=3) == bootstrap.confidence_interval(est, seed=3)
    assert bootstrap.confidence_interval(est, seed=3)["low"] != bootstrap.confidence_interval(est, seed=4)["low"]


def test_corpus_text_metric_without_resampling_statistics_gets_a_reason_not_an_interval():
    # METEOR is the Java jar's own corpus aggregate; BLEU-n and CIDEr are resampled (tests/test_text_resample.py)
    records = [ScoreRecord("q1", task="vqa", values={"text": TextValues("a cat", ["a cat"])})]
    cis = bootstrap.headline_cis(RVTBenchProtocol(headline=["vqa/METEOR"]), records, {"vqa/METEOR": 0.3})
    assert cis["vqa/METEOR"]["low"] is None and "no resampling statistics" in cis["vqa/METEOR"]["reason"]


def test_identical_runs_have_zero_delta_and_p_one():
    est = ReasonSegProtocol().estimator("gIoU", image_records())
    result = bootstrap.paired(est, est, b=500)
    assert result.delta == 0 and result.low == 0 and result.high == 0
    assert result.p_value == 1.0 and result.ties == result.n == 30


def test_a_uniformly_better_run_is_significant_with_all_wins():
    rng = np.random.default_rng(0)
    a = rng.random(60) * 0.5
    proto = RVTBenchProtocol()
    ea = proto.estimator("segmentation/J&F", mean_records(list(a)))
    eb = proto.estimator("segmentation/J&F", mean_records(list(a + 0.2)))
    result = bootstrap.paired(ea, eb, b=999)
    assert result.delta == pytest.approx(0.2)
    assert result.p_value == pytest.approx(1 / 1000)  # no permutation reaches |delta|
    assert (result.wins, result.losses) == (60, 0) and result.low > 0.19


def test_grounding_m_viou_estimator_is_the_mean_of_per_sample_viou():
    records = [ScoreRecord(f"g{i}", task="grounding", values={"box_iou": BoxValues(0.5, 1.0, 2.0, [0.5], viou=v)})
               for i, v in enumerate([0.0, 0.25, 0.5, 1.0])]
    protocol = RVTBenchProtocol()
    metrics = protocol.parts["grounding"].aggregate(records)["metrics"]
    for key in ("m_vIoU", "vIoU@0.3", "gIoU", "cIoU", "Acc@0.5"):
        assert protocol.estimator(f"grounding/{key}", records).value() == pytest.approx(metrics[key]), key
