"""Long-RVOS: loader of the release's <split>/ layout, eval_long_rvos's printed numbers on a fixture
(tests/data/long_rvos_parity/), its prediction folders, the documented command."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rvt_bench.adapters.precomputed import PrecomputedAdapter
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction
from rvt_bench.loaders.long_rvos import LongRVOSDataset
from rvt_bench.metrics.protocols.long_rvos import DROPPED_WHY, LongRVOSProtocol, LongRVOSValues, temporal_ious
from tests.precomputed_runs import load_script, run_precomputed

PARITY = Path(__file__).parent / "data" / "long_rvos_parity"
EXPECTED = json.loads((PARITY / "reference" / "expected_long_rvos.json").read_text())
PREFIX = {"static": "static/", "dynamic": "dynamic/", "hybrid": "hybrid/", "overall": ""}


def hostile_fixture(base: Path) -> Path:
    """The release written under `base` for the hostile-dataset kit (tests/hostile_kit.py)."""
    root = base / "long_rvos"
    load_script(PARITY / "make_fixture.py", "long_rvos_make_fixture").write_fixture(root)
    return root


@pytest.fixture(scope="module")
def fixture(tmp_path_factory) -> tuple[Path, Path]:
    make_fixture = load_script(PARITY / "make_fixture.py", "long_rvos_make_fixture")
    base = tmp_path_factory.mktemp("long_rvos")
    make_fixture.write_fixture(base / "long_rvos")
    make_fixture.write_predictions(base / "long_rvos", base / "pred")
    return base / "long_rvos", base / "pred"


def scored(protocol, dataset, root):
    adapter = PrecomputedAdapter(root, layout="long_rvos")
    out = []
    for sample in dataset:
        try:
            pred = adapter.predict(sample)
        except AdapterError as exc:
            pred = Prediction.failure(sample.id, exc.kind, str(exc), trace=exc.trace)
        out.append(protocol.score(sample, pred))
    return out


def assert_printed(metrics: dict, suffix: str = "") -> None:
    for kind, prefix in PREFIX.items():
        for metric in ("J", "F", "J&F", "tIoU", "vIoU"):
            assert metrics[f"{prefix}{metric}{suffix}"] == pytest.approx(EXPECTED[kind][metric], abs=1e-9), (kind, metric)


def test_loader_reads_gray_pngs_and_absent_frames_as_empty(fixture):
    ds = LongRVOSDataset(fixture[0])
    assert len(ds) == 16 and ds.errors == []
    s = ds[0]
    assert s.meta == {"video": "vid_a", "exp_id": "0", "obj_id": 0, "type": "static", "type_name": "static"}
    folder = fixture[0] / "valid" / "Annotations" / "vid_a" / "0"
    for t, f in enumerate(s.frame_ids):
        present = (folder / f"{f}.png").exists()
        assert (s.target.masks[t] is not None) == present
    assert any(not (folder / f"{f}.png").exists() for f in s.frame_ids)


def test_defaults_reproduce_what_eval_long_rvos_printed(fixture):
    ds = LongRVOSDataset(fixture[0])
    protocol = LongRVOSProtocol()
    records = scored(protocol, ds, fixture[1])
    out = protocol.aggregate(records)
    assert_printed(out["metrics"])
    assert out["dropped"] == ["vid_b/3", "vid_c/1"]
    assert out["zeroed"] == ["vid_d/0", "vid_d/1", "vid_d/2", "vid_d/3"]
    ours = {r.sample_id.replace("/", "_"): r.of(LongRVOSValues) for r in records}
    for kind, rows in EXPECTED["per_expression"].items():
        for name, (j, f, t, v) in rows.items():
            got = ours[name]
            assert (got.J, got.F, got.tIoU, got.vIoU) == pytest.approx((j, f, t, v), abs=1e-12), name


def test_failed_zero_scores_the_dropped_ones_zero(fixture):
    protocol = LongRVOSProtocol(failed="zero")
    out = protocol.aggregate(scored(protocol, LongRVOSDataset(fixture[0]), fixture[1]))
    rows = [v for per in EXPECTED["per_expression"].values() for v in per.values()]
    assert out["metrics"]["J[failed-zero]"] == pytest.approx(sum(r[0] for r in rows) / (len(rows) + 2), abs=1e-12)
    assert out["dropped"] == [] and out["n"] == 16 and "excluded" not in out
    assert out["zeroed"] == ["vid_b/3", "vid_c/1", "vid_d/0", "vid_d/1", "vid_d/2", "vid_d/3"]
    assert protocol.variant_label() == "failed=zero" and LongRVOSProtocol().variant_label() == ""
    # both numbers in one run: the reference's printed ones beside the headline
    assert_printed(out["metrics"])


def test_n_counts_what_the_headline_averages_and_both_numbers_are_in_one_run(fixture):
    # 16 expressions: vid_b/3 and vid_c/1 dropped as the reference drops them (excluded, with the
    # reason), vid_d's four scored 0 (its video folder is missing: the reference's 0, in n)
    records = scored(LongRVOSProtocol(), LongRVOSDataset(fixture[0]), fixture[1])
    out = LongRVOSProtocol().aggregate(records)
    assert len(records) == 16 and out["n"] == 14
    assert out["excluded"] == {DROPPED_WHY: 2}
    assert [e["sample_id"] for e in out["excluded_samples"]] == ["vid_b/3", "vid_c/1"]
    zero = LongRVOSProtocol(failed="zero").aggregate(records)
    assert {k: v for k, v in out["metrics"].items()} == {k: v for k, v in zero["metrics"].items()}
    without_n = lambda body: {k: {m: v for m, v in row.items() if m != "n"}  # noqa: E731
                              for k, row in body["breakdown"]["type"].items()}
    assert without_n(out) == without_n(zero) and out["breakdown"]["type"]["static+dynamic"]["n"] == 2
    for key in ("J&F[failed-zero]", "static/vIoU[failed-zero]"):
        assert LongRVOSProtocol().estimator(key, records).value() == pytest.approx(out["metrics"][key], abs=1e-12)
    assert LongRVOSProtocol().counting_failures().failed == "zero"


def test_temporal_ious_follow_the_reference():
    assert temporal_ious([False, False], [False, False], [1.0, 1.0]) == (1.0, 1.0)
    t, v = temporal_ious([True, True, False], [True, False, True], [0.5, 0.0, 0.0])
    assert t == pytest.approx(1 / 3) and v == pytest.approx(0.5 / 3)


def test_records_round_trip_and_estimators_give_the_reported_means(fixture):
    from rvt_bench.core.records import ScoreRecord

    protocol = LongRVOSProtocol()
    records = [ScoreRecord.from_json(json.loads(json.dumps(r.to_json())))
               for r in scored(protocol, LongRVOSDataset(fixture[0]), fixture[1])]
    out = protocol.aggregate(records)
    assert_printed(out["metrics"])
    for key in [*protocol.headline, "static/J&F", "hybrid/vIoU"]:
        assert protocol.estimator(key, records).value() == pytest.approx(out["metrics"][key], abs=1e-12)


def test_a_prediction_of_another_size_fails_its_expression(fixture, tmp_path):
    import shutil

    import cv2

    pred = tmp_path / "pred"
    shutil.copytree(fixture[1], pred)
    cv2.imwrite(str(pred / "vid_a" / "0" / "00000.png"), np.zeros((5, 5), np.uint8))
    ds = LongRVOSDataset(fixture[0])
    with pytest.raises(AdapterError, match="first frame"):
        PrecomputedAdapter(pred, layout="long_rvos").predict(ds[0])


def test_an_expression_without_type_is_a_data_error(fixture, tmp_path):
    import shutil

    root = tmp_path / "r"
    shutil.copytree(fixture[0], root)
    meta_path = root / "valid" / "meta_expressions.json"
    meta = json.loads(meta_path.read_text())
    del meta["videos"]["vid_a"]["expressions"]["1"]["type"]
    meta_path.write_text(json.dumps(meta))
    ds = LongRVOSDataset(root)
    assert len(ds) == 15 and [e["sample_id"] for e in ds.errors] == ["vid_a/1"]
    with pytest.raises(DatasetFormatError, match="splits present"):
        LongRVOSDataset(root, split="test")


def test_the_documented_command_gives_the_printed_numbers(fixture, tmp_path):
    # rvt-bench +dataset=long_rvos dataset.root=... +model=precomputed model.root=... (docs/benchmarks/long_rvos.md)
    body = run_precomputed("long_rvos", tmp_path, fixture[0], fixture[1], "run.report=false").metrics
    assert_printed(body["metrics"])
    assert body["n"] == 14 and body["excluded"] == {DROPPED_WHY: 2} and "J&F[failed-zero]" in body["metrics"]


def contract_samples(rng, node):
    """Synthetic samples of this benchmark's format for tests/test_protocol_contract.py: the three types."""
    from dataclasses import replace

    from tests.contract_samples import revos_samples

    kinds = ["static", "dynamic", "static+dynamic"]
    return [replace(s, meta={"video": s.id, "exp_id": "0", "type": kinds[i % 3]}) for i, s in enumerate(revos_samples(rng))]


def test_a_fifo_in_place_of_the_meta_file_is_refused_not_called_missing(fixture, tmp_path):
    import os
    import shutil

    root = tmp_path / "r"
    shutil.copytree(fixture[0], root)
    (root / "valid" / "meta_expressions.json").unlink()
    os.mkfifo(root / "valid" / "meta_expressions.json")
    with pytest.raises(DatasetFormatError, match=r"not a regular file \(a FIFO\)"):
        LongRVOSDataset(root)
