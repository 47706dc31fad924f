"""The cluster bootstrap: samples of one video or image resampled together (rvt_bench.harness.bootstrap)."""
import numpy as np
import pytest

from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import Prediction, Sample, Target
from rvt_bench.harness import bootstrap
from rvt_bench.metrics.protocols.base import record_header, sample_source
from rvt_bench.metrics.protocols.revos import ReVOSProtocol, ReVOSValues


def revos_videos(videos=60, per_video=4, seed=3, sources=True):
    """A ReVOS-like run: each video's expressions score near-identically (one draw per video)."""
    rng = np.random.default_rng(seed)
    out = []
    for v in range(videos):
        base = float(rng.random())
        for k in range(per_video):
            j = min(1.0, max(0.0, base + 1e-3 * float(rng.standard_normal())))
            out.append(ScoreRecord(f"v{v:03d}/{k}", meta={"type_id": k % 2}, source=f"v{v:03d}" if sources else None,
                                   values={"revos": ReVOSValues(k % 2, j, j, j, {}, A=j)}))
    return out


def width(ci):
    return ci["high"] - ci["low"]


def test_correlated_expressions_get_an_interval_wider_by_about_sqrt_k():
    protocol = ReVOSProtocol()
    clustered = protocol.estimator("J&F", revos_videos())
    flat = protocol.estimator("J&F", revos_videos(sources=False))
    assert clustered.value() == pytest.approx(flat.value())
    wide, narrow = bootstrap.confidence_interval(clustered, b=2000), bootstrap.confidence_interval(flat, b=2000)
    # 4 near-identical expressions per video, 2 in each type stratum; the video is drawn with all
    # four (across both strata), so the effective n is a quarter: the width grows by ~sqrt(4)
    assert 1.6 < width(wide) / width(narrow) < 2.4
    assert wide["resampled"].startswith("sources (60 videos or images") and "across the 2 strata" in wide["resampled"]
    assert narrow["resampled"] == "samples within 2 strata"


def test_one_stratum_ratio_is_sqrt_k():
    records = revos_videos(videos=80, per_video=4)
    for r in records:  # one type: all four expressions of a video in one stratum
        r.meta["type_id"] = 0
        r.values["revos"] = ReVOSValues(0, *(r.values["revos"].J,) * 3, {}, A=0.0)
    flat = [ScoreRecord(r.sample_id, meta=r.meta, values=r.values) for r in records]
    protocol = ReVOSProtocol()
    ratio = (width(bootstrap.confidence_interval(protocol.estimator("referring/J&F", records), b=3000))
             / width(bootstrap.confidence_interval(protocol.estimator("referring/J&F", flat), b=3000)))
    assert ratio == pytest.approx(2.0, rel=0.2)  # sqrt(4)


def test_unique_sources_draw_exactly_as_the_sample_bootstrap():
    with_sources = revos_videos(per_video=1)
    without = revos_videos(per_video=1, sources=False)
    protocol = ReVOSProtocol()
    a = bootstrap.confidence_interval(protocol.estimator("J&F", with_sources), b=300, seed=5)
    b = bootstrap.confidence_interval(protocol.estimator("J&F", without), b=300, seed=5)
    assert a == b


def test_paired_test_swaps_and_draws_whole_videos():
    protocol = ReVOSProtocol()
    ra = revos_videos(seed=4)
    rb = revos_videos(seed=4)
    rng = np.random.default_rng(9)
    shift = {f"v{v:03d}": 0.05 * float(rng.standard_normal()) for v in range(60)}  # per-video differences
    for r in rb:
        j = r.values["revos"].J + shift[r.source]
        r.values["revos"] = ReVOSValues(r.values["revos"].type_id, j, j, j, {}, A=j)
    flat = lambda rs: [ScoreRecord(r.sample_id, meta=r.meta, values=r.values) for r in rs]  # noqa: E731
    clustered = bootstrap.paired(protocol.estimator("J&F", ra), protocol.estimator("J&F", rb), b=999)
    plain = bootstrap.paired(protocol.estimator("J&F", flat(ra)), protocol.estimator("J&F", flat(rb)), b=999)
    assert clustered.delta == pytest.approx(plain.delta)
    assert (clustered.high - clustered.low) > 1.2 * (plain.high - plain.low)
    assert clustered.resampled.startswith("sources") and plain.resampled.startswith("samples")


def test_source_is_the_video_or_image_and_survives_scores_jsonl():
    video = Sample("vid/3", "d", "valid", "video", ["/x/JPEGImages/vid/00000.jpg"], ["00000"], "q", "segmentation",
                   Target(), meta={"video": "vid"})
    image = Sample("img#1", "d", "val", "image", ["/x/val/img.jpg"], ["img"], "q", "segmentation", Target())
    assert sample_source(video) == "vid" and sample_source(image) == "img.jpg"
    record = record_header(video, Prediction("vid/3"), ("type_id",))
    assert record.source == "vid"
    assert ScoreRecord.from_json(record.to_json()).source == "vid"
    assert "source" not in ScoreRecord("s").to_json()


def test_the_method_reaches_metrics_json_and_the_report_rows():
    from rvt_bench.harness.view import headline_rows

    protocol = ReVOSProtocol()
    records = revos_videos(videos=10, per_video=2)
    metrics = protocol.aggregate(records)["metrics"]
    cis = bootstrap.headline_cis(protocol, records, metrics, b=50)
    assert cis["J&F"]["resampled"].startswith("sources (")
    rows = headline_rows({"metrics": metrics, "headline": ["J&F"], "ci": cis})
    assert rows[0].resampled == cis["J&F"]["resampled"]
