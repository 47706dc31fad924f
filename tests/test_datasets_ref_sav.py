"""Ref-SAV: loader of Sa2VA's ref_sav_eval layout, eval_ref_sav.py's printed numbers on a fixture
(tests/data/ref_sav_parity/), the results.json and PNG prediction layouts, the documented command."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rvt_bench.adapters.precomputed import PrecomputedAdapter
from rvt_bench.core import benchmark, masks
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction
from rvt_bench.loaders.ref_sav import RefSAVDataset
from rvt_bench.metrics.protocols.ref_sav import DROPPED_WHY, OTHER_TYPE_WHY, RefSAVProtocol, RefSAVValues
from tests.precomputed_runs import load_script, run_precomputed

PARITY = Path(__file__).parent / "data" / "ref_sav_parity"
EXPECTED = json.loads((PARITY / "reference" / "expected_sa2va.json").read_text())
SPLITS = {"long": "long/", "short": "short/", "overall": ""}


def hostile_fixture(base: Path) -> Path:
    """The release written under `base` for the hostile-dataset kit (tests/hostile_kit.py)."""
    root = base / "ref_sav_eval"
    load_script(PARITY / "make_fixture.py", "ref_sav_make_fixture").write_fixture(root)
    return root


@pytest.fixture(scope="module")
def fixture(tmp_path_factory) -> tuple[Path, Path]:
    make_fixture = load_script(PARITY / "make_fixture.py", "ref_sav_make_fixture")
    base = tmp_path_factory.mktemp("ref_sav")
    make_fixture.write_fixture(base / "ref_sav_eval")
    make_fixture.write_predictions(base / "ref_sav_eval", base / "pred")
    return base / "ref_sav_eval", base / "pred"


def predictions(dataset, root: Path, layout: str) -> list[Prediction]:
    adapter = PrecomputedAdapter(root, layout=layout)
    out = []
    for sample in dataset:
        try:
            out.append(adapter.predict(sample))
        except AdapterError as exc:
            out.append(Prediction.failure(sample.id, exc.kind, str(exc), trace=exc.trace))
    return out


def scored(protocol, dataset, root, layout="ref_sav"):
    return [protocol.score(s, p) for s, p in zip(dataset, predictions(dataset, root, layout))]


def assert_printed(metrics: dict, suffix: str = "") -> None:
    for split, prefix in SPLITS.items():
        for metric, ref in (("J", "J"), ("F", "F"), ("A", "A"), ("J&F", "JF")):
            assert metrics[f"{prefix}{metric}{suffix}"] * 100 == pytest.approx(EXPECTED["results"][split][ref], abs=1e-9)


def test_loader_reads_every_expression_with_its_anno_tracks(fixture):
    ds = RefSAVDataset(fixture[0])
    assert len(ds) == 13 and ds.errors == []
    s = ds[3]  # sav_000001/3: three annos
    assert s.id == "sav_000001/3" and s.meta == {"video": "sav_000001", "exp_id": "3", "type_id": 1, "type": "short",
                                                  "anno_id": [0, 1, 2], "obj_id": [0, 1, 2]}
    assert s.frame_ids == ["00000", "00001", "00002", "00003"] and [a.id for a in s.annotations] == ["0", "1", "2"]
    mask_dict = json.loads((fixture[0] / "mask_dict.json").read_text())
    for t in range(4):
        present = [masks.decode(mask_dict[a][t]) for a in ("0", "1", "2") if mask_dict[a][t]]
        if present:
            assert np.array_equal(masks.decode(s.target.masks[t]), sum(p.astype(np.uint8) for p in present) > 0)
        else:
            assert s.target.masks[t] is None


def test_defaults_reproduce_what_eval_ref_sav_printed(fixture):
    ds = RefSAVDataset(fixture[0])
    protocol = RefSAVProtocol()
    out = protocol.aggregate(scored(protocol, ds, fixture[1]))
    assert_printed(out["metrics"])
    assert out["dropped"] == ["sav_000003/1"] and out["excluded"] == {DROPPED_WHY: 1, OTHER_TYPE_WHY: 1}
    assert any("sav_000003/1" in w for w in out["warnings"])


def test_each_expression_rounds_as_the_reference_csv(fixture):
    from rvt_bench.metrics.protocols.revos import visa_percent

    records = scored(RefSAVProtocol(), RefSAVDataset(fixture[0]), fixture[1])
    ours = {r.sample_id.replace("/", "_"): r.of(RefSAVValues) for r in records if r.of(RefSAVValues).outcome == "scored"}
    rows = {row["videxp"]: row for row in EXPECTED["expressions"]}
    assert sorted(ours) == sorted(rows)
    for name, row in rows.items():
        v = ours[name]
        for metric, value in (("J", v.J), ("F", v.F), ("A", v.A)):
            assert float(visa_percent(value)) == pytest.approx(float(row[metric]), abs=1e-9), (name, metric)


def test_png_folders_give_the_same_numbers(fixture):
    ds = RefSAVDataset(fixture[0])
    protocol = RefSAVProtocol()
    out = protocol.aggregate(scored(protocol, ds, fixture[1] / "png", "ref_sav_png"))
    assert_printed(out["metrics"])


def test_overlapping_annos_count_against_a_as_the_uint8_sum(fixture):
    # the reference's GT is the uint8 sum of the annos: 2 where two overlap, never equal to a 0/1 prediction
    ds = RefSAVDataset(fixture[0])
    s = ds[1]
    pred = Prediction(sample_id=s.id, task="segmentation", masks=list(s.target.masks))
    v = RefSAVProtocol().score(s, pred).of(RefSAVValues)
    assert v.J == 1.0
    mask_dict = json.loads((fixture[0] / "mask_dict.json").read_text())
    overlap = [int(np.count_nonzero(masks.decode(mask_dict["0"][t]) & masks.decode(mask_dict["1"][t])))
               if mask_dict["0"][t] and mask_dict["1"][t] else 0 for t in range(4)]
    assert any(overlap)
    assert v.A == pytest.approx(np.mean([1 - o / (24 * 32) for o in overlap]), abs=1e-12)


def test_failed_zero_scores_the_missing_expression_zero(fixture):
    ds = RefSAVDataset(fixture[0])
    protocol = RefSAVProtocol(failed="zero")
    records = scored(protocol, ds, fixture[1])
    out = protocol.aggregate(records)
    assert out["dropped"] == [] and out["zeroed"] == ["sav_000003/1"]
    long_j = [float(r["J"]) for r in EXPECTED["expressions"] if r["type_id"] == "0"] + [0.0]
    assert out["metrics"]["long/J[failed-zero]"] * 100 == pytest.approx(np.mean(long_j), abs=1e-9)
    assert protocol.headline == ["J&F[failed-zero]", "J[failed-zero]", "F[failed-zero]"]
    assert protocol.variant_label() == "failed=zero" and RefSAVProtocol().variant_label() == ""
    # both numbers in one run: the reference's printed ones beside the headline, in either mode
    assert_printed(out["metrics"])
    assert out["n"] == 12 and out["excluded"] == {OTHER_TYPE_WHY: 1}
    reference = RefSAVProtocol().aggregate(records)
    assert {k: v for k, v in reference["metrics"].items() if k.endswith("[failed-zero]")} == {
        k: v for k, v in out["metrics"].items() if k.endswith("[failed-zero]")}
    assert reference["breakdown"]["type"]["0"]["J[failed-zero]"] == out["breakdown"]["type"]["0"]["J[failed-zero]"]
    for key in ("J&F[failed-zero]", "long/A[failed-zero]"):
        assert protocol.estimator(key, records).value() == pytest.approx(out["metrics"][key], abs=1e-12)


def test_n_counts_what_the_headline_averages_and_the_rest_is_excluded_with_its_reason(fixture):
    # 13 expressions: sav_000003/1 has no prediction (dropped as the reference drops it), sav_000002/4
    # is of type_id 2 (in neither split's mean): the reference's headline averages the other 11
    records = scored(RefSAVProtocol(), RefSAVDataset(fixture[0]), fixture[1])
    out = RefSAVProtocol().aggregate(records)
    assert len(records) == 13 and out["n"] == 11
    assert out["excluded"] == {DROPPED_WHY: 1, OTHER_TYPE_WHY: 1}
    assert out["excluded_samples"] == [{"sample_id": "sav_000002/4", "reason": OTHER_TYPE_WHY},
                                       {"sample_id": "sav_000003/1", "reason": DROPPED_WHY}]
    assert out["dropped"] == ["sav_000003/1"] and out["zeroed"] == []
    assert RefSAVProtocol().counting_failures().failed == "zero"


def test_records_round_trip_and_estimators_give_the_reported_means(fixture):
    from rvt_bench.core.records import ScoreRecord

    protocol = RefSAVProtocol()
    records = [ScoreRecord.from_json(json.loads(json.dumps(r.to_json())))
               for r in scored(protocol, RefSAVDataset(fixture[0]), fixture[1])]
    out = protocol.aggregate(records)
    assert_printed(out["metrics"])
    for key in [*protocol.headline, "A", "long/J&F", "short/A"]:
        assert protocol.estimator(key, records).value() == pytest.approx(out["metrics"][key], abs=1e-12)


def test_a_results_entry_with_too_few_frames_or_a_wrong_size_fails_its_sample(fixture, tmp_path):
    ds = RefSAVDataset(fixture[0])
    results = json.loads((fixture[1] / "results.json").read_text())
    results["sav_000001"]["0"]["prediction_masks"] = results["sav_000001"]["0"]["prediction_masks"][:2]
    results["sav_000002"]["0"]["prediction_masks"][1] = masks.encode(np.zeros((5, 5), bool))
    (tmp_path / "results.json").write_text(json.dumps(results))
    by_id = {p.sample_id: p for p in predictions(ds, tmp_path, "ref_sav")}
    assert "at least 4" in by_id["sav_000001/0"].error["message"]
    assert "frame 1" in by_id["sav_000002/0"].error["message"]
    assert by_id["sav_000001/1"].error is None


def test_a_prediction_for_an_expression_whose_gt_is_empty_must_have_the_frames_size(fixture, tmp_path):
    """With no GT frame to take the size from, a result's RLE is checked against the video's frames:
    an RLE claiming 100000 x 100000 pixels (a valid 7-byte string) fails its sample in the reader
    instead of being decoded by the scoring (10 GB)."""
    import shutil

    root = tmp_path / "r"
    shutil.copytree(fixture[0], root)
    mask_dict = json.loads((root / "mask_dict.json").read_text())
    mask_dict["2"] = [None] * len(mask_dict["2"])  # sav_000001/2's only anno: empty in every frame
    (root / "mask_dict.json").write_text(json.dumps(mask_dict))
    ds = RefSAVDataset(root)
    sample = next(s for s in ds if s.id == "sav_000001/2")
    assert all(m is None for m in sample.target.masks)
    results = json.loads((fixture[1] / "results.json").read_text())
    huge = masks.compress({"size": [100000, 100000], "counts": [10**9] * 10})
    entry = results["sav_000001"]["2"]
    entry["prediction_masks"] = [huge] * len(entry["prediction_masks"])
    (tmp_path / "pred").mkdir()
    (tmp_path / "pred" / "results.json").write_text(json.dumps(results))
    with pytest.raises(AdapterError, match=r"frame 0: 'size' \[100000, 100000\] differs from the frame size \[H, W\] = \[24, 32\]"):
        PrecomputedAdapter(tmp_path / "pred", layout="ref_sav").predict(sample)
    entry["prediction_masks"] = [masks.encode(np.zeros((24, 32), bool))] * len(entry["prediction_masks"])
    (tmp_path / "pred" / "results.json").write_text(json.dumps(results))
    assert PrecomputedAdapter(tmp_path / "pred", layout="ref_sav").predict(sample).error is None


def test_bad_expression_is_a_data_error_and_the_rest_loads(fixture, tmp_path):
    import shutil

    root = tmp_path / "r"
    shutil.copytree(fixture[0], root)
    meta = json.loads((root / "meta_expressions_valid.json").read_text())
    meta["videos"]["sav_000001"]["expressions"]["0"]["anno_id"] = [999]
    meta["videos"]["sav_000002"]["expressions"]["1"]["type_id"] = "0"
    (root / "meta_expressions_valid.json").write_text(json.dumps(meta))
    ds = RefSAVDataset(root)
    assert len(ds) == 11
    assert sorted(e["sample_id"] for e in ds.errors) == ["sav_000001/0", "sav_000002/1"]
    assert "anno_id 999 is missing" in ds.errors[0]["message"]
    with pytest.raises(DatasetFormatError, match="splits present"):
        RefSAVDataset(root, split="test")


def test_the_documented_command_gives_the_printed_numbers(fixture, tmp_path):
    # rvt-bench +dataset=ref_sav dataset.root=... +model=precomputed model.root=... (docs/benchmarks/ref_sav.md)
    for k, pred in enumerate((fixture[1], fixture[1] / "png")):  # results.json, then the PNG folders (auto)
        body = run_precomputed("ref_sav", tmp_path / str(k), fixture[0], pred, "run.report=false").metrics
        assert_printed(body["metrics"])
        assert body["n"] == 11 and body["excluded"] == {DROPPED_WHY: 1, OTHER_TYPE_WHY: 1}
        assert body["metrics"]["J&F[failed-zero]"] < body["metrics"]["J&F"]  # both numbers in the run's metrics.json


def test_auto_with_neither_results_json_nor_pngs_names_both(fixture, tmp_path):
    # model.root one folder off (a new user's mistake): the failure names results.json too, not only a PNG
    sample = next(iter(RefSAVDataset(fixture[0])))
    (tmp_path / "elsewhere").mkdir()
    adapter = PrecomputedAdapter(tmp_path / "elsewhere")
    adapter.use_prediction_layouts(benchmark.prediction_layouts("ref_sav"))  # as a run does
    with pytest.raises(AdapterError) as info:
        adapter.predict(sample)
    assert "does not exist" in str(info.value)
    assert f"nor is there {tmp_path / 'elsewhere' / 'results.json'} (layout ref_sav)" in str(info.value)


def contract_samples(rng, node):
    """Synthetic samples of this benchmark's format for tests/test_protocol_contract.py: both splits."""
    from dataclasses import replace

    from tests.contract_samples import revos_samples

    return [replace(s, meta={"video": s.id, "exp_id": "0", "type_id": i % 2}) for i, s in enumerate(revos_samples(rng))]


@pytest.mark.parametrize("name", ["meta_expressions_valid.json", "mask_dict.json"])
def test_a_fifo_in_place_of_a_json_file_is_refused_not_called_missing(fixture, tmp_path, name):
    import os
    import shutil

    root = tmp_path / "r"
    shutil.copytree(fixture[0], root)
    (root / name).unlink()
    os.mkfifo(root / name)
    with pytest.raises(DatasetFormatError, match=r"not a regular file \(a FIFO\)"):
        RefSAVDataset(root)
