"""ReasonVOS (bench/loaders/reasonvos.py, metrics/protocols/reasonvos.py, conf/dataset/reasonvos.yaml)
on a fixture in the release's exact layout (tests/data/reasonvos_parity/make_fixture.py), held to
the numbers VideoLISA's own evaluator printed on it: showlab/VideoLISA@146f2bc
evaluation/reason_vos/eval_reason_vos.py, run by tests/data/reasonvos_parity/run_reference.py
(expected.json)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from rvt_bench.adapters.precomputed import PrecomputedAdapter
from rvt_bench.core import benchmark
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction
from rvt_bench.loaders.reasonvos import ReasonVOSDataset
from rvt_bench.metrics.protocols.reasonvos import ReasonVOSProtocol

HERE = Path(__file__).resolve().parent / "data" / "reasonvos_parity"
def load_fixture_module():
    """make_fixture.py of this benchmark's parity folder, under its own module name (another
    benchmark's folder has a make_fixture.py too)."""
    spec = importlib.util.spec_from_file_location("reasonvos_fixture", HERE / "make_fixture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXPECTED = json.loads((HERE / "expected.json").read_text())


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    write_fixture = load_fixture_module().write_fixture
    return write_fixture(tmp_path_factory.mktemp("reasonvos"))


def predictions(dataset, pred_root):
    adapter = PrecomputedAdapter(pred_root)
    adapter.use_prediction_layouts(benchmark.prediction_layouts("reasonvos"))
    out = []
    for sample in dataset:
        try:
            out.append((sample, adapter.predict(sample)))
        except AdapterError as exc:
            out.append((sample, Prediction.failure(sample.id, "adapter", str(exc))))
    return out


@pytest.fixture(scope="module")
def scored(fixture):
    root, pred = fixture
    dataset = ReasonVOSDataset(root)
    pairs = predictions(dataset, pred)
    return dataset, pairs


def test_the_loader_reads_the_release_layout_and_leaves_out_what_the_reference_skips(scored):
    dataset, _ = scored
    assert len(dataset) == 9
    assert [e["sample_id"] for e in dataset.errors] == ["burst_c_vid_x_8_0"]  # its GT folder is missing
    assert "not take into metric computation" in dataset.errors[0]["message"]
    sample = next(s for s in dataset if s.id == "mevis_vid_a_0_1")
    assert sample.frame_ids == ["00000", "00002", "00004"]  # the sorted GT PNGs, not every JPEG
    assert sample.frames[1].endswith("JPEGImages/vid_a/00002.jpg")
    assert sample.meta == {"video": "vid_a", "source": "mevis", "vid_key": "mevis_vid_a_0", "obj_id": "0",
                           "exp_id": "1", "is_sent": True}


def test_every_expression_and_the_aggregate_equal_what_the_reference_printed(scored):
    _, pairs = scored
    protocol = ReasonVOSProtocol()
    records = [protocol.score(s, p) for s, p in pairs]
    body = protocol.aggregate(records)
    kept = {r.sample_id: r for r in records if not r.failed}
    assert sorted(kept) == sorted(EXPECTED["per_expression"])
    for sid, (j, f) in EXPECTED["per_expression"].items():
        values = kept[sid].values["video_jf"]
        assert values.J == pytest.approx(j, abs=1e-12) and values.F == pytest.approx(f, abs=1e-12), sid
    for key, value in EXPECTED["printed"].items():
        assert body["metrics"][key] == pytest.approx(value, abs=1e-12), key
    # left out, as the reference leaves them out: no folder (printed), a missing frame, a wrong-size PNG (its worker raised)
    assert body["skipped"] == ["burst_c_vid_x_7_1", "mevis_vid_a_1_3", "mose_b-video_3_2"]
    assert "mevis_vid_a_1_3" in body["warnings"][0] and "failed=empty" in body["warnings"][0]
    assert EXPECTED["worker_errors"] == 2 and "pred/mevis_vid_a_1/3" in EXPECTED["not_found"]


def test_failed_empty_scores_the_skipped_expressions_as_empty_masks_under_its_own_keys(scored):
    _, pairs = scored
    protocol = ReasonVOSProtocol(failed="empty")
    records = [protocol.score(s, p) for s, p in pairs]
    body = protocol.aggregate(records)
    assert body["skipped"] == [] and "excluded" not in body and body["n"] == len(records)
    # both numbers in one run: the variant's first (the headline), the reference's beside it, unchanged
    assert list(body["metrics"]) == ["J&F[failed-empty]", "J[failed-empty]", "F[failed-empty]", "J&F", "J", "F"]
    for key, value in EXPECTED["printed"].items():
        assert body["metrics"][key] == pytest.approx(value, abs=1e-12), key
    assert protocol.headline == ["J&F[failed-empty]", "J[failed-empty]", "F[failed-empty]"]
    assert protocol.variant_label() == "failed=empty" and ReasonVOSProtocol().variant_label() == ""
    assert body["metrics"]["J[failed-empty]"] < EXPECTED["printed"]["J"]  # three more expressions, each J < 1
    for key in ("J[failed-empty]", "J"):
        assert protocol.estimator(key, records).value() == pytest.approx(body["metrics"][key], abs=1e-12)


def test_the_reference_run_writes_the_honest_number_too_and_counts_only_what_it_averages(scored):
    _, pairs = scored
    protocol = ReasonVOSProtocol()
    records = [protocol.score(s, p) for s, p in pairs]
    body, honest = protocol.aggregate(records), ReasonVOSProtocol(failed="empty").aggregate(records)
    assert body["n"] == len(records) - 3 and body["excluded"] == {protocol_reason(): 3}
    assert [e["sample_id"] for e in body["excluded_samples"]] == body["skipped"]
    assert body["metrics"]["J&F[failed-empty]"] == honest["metrics"]["J&F[failed-empty]"]
    assert protocol.estimator("J&F[failed-empty]", records).value() == pytest.approx(
        body["metrics"]["J&F[failed-empty]"], abs=1e-12)


def protocol_reason() -> str:
    from rvt_bench.metrics.protocols.reasonvos import SKIPPED_WHY

    return SKIPPED_WHY


def test_a_split_other_than_test_and_a_missing_root_are_one_line(tmp_path):
    with pytest.raises(DatasetFormatError, match="one split"):
        ReasonVOSDataset(tmp_path, split="valid")
    with pytest.raises(DatasetFormatError, match="expected the dataset directory"):
        ReasonVOSDataset(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="failed must be one of"):
        ReasonVOSProtocol(failed="zero")


@pytest.mark.parametrize("source, says", [("../../..", "leaves"), ("/etc", "must be a relative path")])
def test_a_source_that_leads_out_of_annotations_fails_the_video_s_expressions(fixture, tmp_path, source, says):
    import shutil

    root, _ = fixture
    copy = tmp_path / "ReasonVOS"
    shutil.copytree(root, copy)
    path = copy / "meta_expressions.json"
    meta = json.loads(path.read_text())
    meta["videos"]["vid_a"]["source"] = source
    path.write_text(json.dumps(meta))
    dataset = ReasonVOSDataset(copy)
    failed = {e["sample_id"]: e["message"] for e in dataset.errors if "vid_a" in e["sample_id"]}
    assert len(failed) == len(meta["videos"]["vid_a"]["expressions"])
    assert all(says in m and "annotation folder <source>_<video>_<obj_id>" in m for m in failed.values())


def contract_samples(rng, node):
    """Synthetic samples of this benchmark's format for tests/test_protocol_contract.py."""
    from dataclasses import replace

    from tests.contract_samples import revos_samples

    return [replace(s, meta={"is_sent": i % 2 == 0, "source": "mevis"})
            for i, s in enumerate(revos_samples(rng, 10))]


def test_the_is_sent_breakdown_is_labelled_short_and_sentence_as_the_paper_layout(scored):
    """report.html's breakdown bars said "is_sent false" / "is_sent true" where the paper layout's
    columns say short / sentence; they now say short and sentence."""
    from rvt_bench.harness.report.breakdowns import breakdown_bars

    _, pairs = scored
    protocol = ReasonVOSProtocol()
    records = [protocol.score(s, p) for s, p in pairs]
    body = {**protocol.aggregate(records), "headline": protocol.headline, "metric_units": {}}
    labels = [bar.label for bar in breakdown_bars(body, protocol, records, b=0)]
    assert "short" in labels and "sentence" in labels and not any("is_sent" in label for label in labels)
    heads = [col["head"] for col in benchmark.paper("reasonvos")["columns"]]
    assert any(h.startswith("short ") for h in heads) and any(h.startswith("sentence ") for h in heads)
