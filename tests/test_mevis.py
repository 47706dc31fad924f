"""MeViS valid_u: loader, precomputed predictions and protocol held to henghuiding/MeViS
tools/eval_mevis.py, whose printed J, F, J&F on the fixture of tests/mevis_fixture.py are in
tests/data/parity/mevis_eval_printed.json (run unchanged; the command is in the fixture's docstring)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rvt_bench.adapters.precomputed import PrecomputedAdapter
from rvt_bench.core import masks
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction
from rvt_bench.loaders.mevis import MeViSDataset
from rvt_bench.metrics.protocols.mevis import MeViSProtocol, MeViSValues
from tests import mevis_fixture

PRINTED = json.loads((Path(__file__).parent / "data" / "parity" / "mevis_eval_printed.json").read_text())


@pytest.fixture(scope="module")
def fixture(tmp_path_factory) -> tuple[Path, Path]:
    return mevis_fixture.write(tmp_path_factory.mktemp("mevis"))


def predictions(dataset, pred_root: Path) -> list[Prediction]:
    adapter = PrecomputedAdapter(pred_root, layout="mevis")
    out = []
    for sample in dataset:
        try:
            out.append(adapter.predict(sample))
        except AdapterError as exc:
            out.append(Prediction.failure(sample.id, exc.kind, str(exc), trace=exc.trace))
    return out


def scored(protocol, dataset, pred_root):
    return [protocol.score(s, p) for s, p in zip(dataset, predictions(dataset, pred_root))]


def test_loader_reads_every_expression_in_meta_order_with_summed_gt(fixture):
    ds = MeViSDataset(fixture[0], split="valid_u")
    assert [s.id for s in ds] == ["vidA/0", "vidA/1", "vidA/2", "vidA/3", "vidB/0", "vidB/1", "vidB/2",
                                  "vidC/0", "vidC/1", "vidD/0"]
    both = ds[1]  # anno 10 + anno 11, overlapping: the GT is where either is
    assert both.meta == {"video": "vidA", "exp_id": "1", "obj_id": [0, 1], "anno_id": [10, 11]}
    assert both.frame_ids == ["00000", "00001", "00002", "00003"]
    mask_dict = json.loads((fixture[0] / "valid_u" / "mask_dict.json").read_text())
    for t in range(4):
        expected = sum(masks.decode(mask_dict[a][t]).astype(np.uint8) for a in ("10", "11") if mask_dict[a][t]) > 0
        assert np.array_equal(masks.decode(both.target.masks[t]), expected)
    assert ds[2].target.masks[0] is None and ds[2].target.masks[3] is None  # anno 12 absent there
    assert ds.errors == []


def test_defaults_reproduce_the_printed_j_f_jf(fixture):
    ds = MeViSDataset(fixture[0])
    protocol = MeViSProtocol()
    out = protocol.aggregate(scored(protocol, ds, fixture[1]))
    for key in ("J", "F", "J&F"):
        assert out["metrics"][key] == pytest.approx(PRINTED["printed"][key], abs=1e-9)
    assert out["dropped"] == PRINTED["dropped_by_reference"]
    assert out["zeroed"] == ["vidC/0", "vidC/1"]
    # n: the expressions the printed means average; the two dropped are listed apart with their reason
    assert out["n"] == 8 and [e["sample_id"] for e in out["excluded_samples"]] == out["dropped"]
    assert list(out["excluded"].values()) == [2] and "eval_mevis.py drops it" in next(iter(out["excluded"]))
    assert any("vidA/3, vidB/1" in w for w in out["warnings"])


def test_each_expression_equals_the_reference_file(fixture):
    ds = MeViSDataset(fixture[0])
    records = scored(MeViSProtocol(), ds, fixture[1])
    ours = {r.sample_id.replace("/", "_"): r.of(MeViSValues) for r in records if r.of(MeViSValues).outcome != "dropped"}
    assert sorted(ours) == sorted(PRINTED["per_expression"])
    for name, (j, f) in PRINTED["per_expression"].items():
        assert ours[name].J == pytest.approx(j, abs=1e-12) and ours[name].F == pytest.approx(f, abs=1e-12)


def test_failed_zero_scores_every_failed_expression_zero(fixture):
    ds = MeViSDataset(fixture[0])
    protocol = MeViSProtocol(failed="zero")
    out = protocol.aggregate(scored(protocol, ds, fixture[1]))
    per = PRINTED["per_expression"]
    j = sum(v[0] for v in per.values()) / 10  # the two dropped ones count as 0
    assert out["metrics"]["J[failed-zero]"] == pytest.approx(j, abs=1e-12)
    assert out["dropped"] == [] and sorted(out["zeroed"]) == ["vidA/3", "vidB/1", "vidC/0", "vidC/1"]
    assert protocol.headline == ["J&F[failed-zero]", "J[failed-zero]", "F[failed-zero]"]
    assert out["n"] == 10 and "excluded" not in out and protocol.variant_label() == "failed=zero"
    # the reference's printed number stands beside it, from the same records
    for key in ("J", "F", "J&F"):
        assert out["metrics"][key] == pytest.approx(PRINTED["printed"][key], abs=1e-9)
    assert list(out["metrics"])[:3] == protocol.headline
    reference = MeViSProtocol().aggregate(scored(protocol, ds, fixture[1]))
    assert reference["metrics"]["J[failed-zero]"] == out["metrics"]["J[failed-zero]"]


def test_a_missing_video_folder_is_told_apart_from_a_missing_expression(fixture):
    ds = MeViSDataset(fixture[0])
    by_id = {p.sample_id: p for p in predictions(ds, fixture[1])}
    assert by_id["vidC/0"].trace["missing"] == "vidC"
    assert by_id["vidA/3"].trace["missing"] == "vidA/3"
    assert by_id["vidB/1"].trace["missing"] == "vidB/1/00001.png"


def test_records_round_trip_and_estimators_give_the_reported_means(fixture):
    from rvt_bench.core.records import ScoreRecord

    ds = MeViSDataset(fixture[0])
    protocol = MeViSProtocol()
    records = [ScoreRecord.from_json(json.loads(json.dumps(r.to_json()))) for r in scored(protocol, ds, fixture[1])]
    out = protocol.aggregate(records)
    for key in out["metrics"]:  # the reference's keys and the [failed-zero] ones
        assert protocol.estimator(key, records).value() == pytest.approx(out["metrics"][key], abs=1e-12)


def test_valid_split_without_gt_loads_for_submission_and_does_not_score(tmp_path):
    split = tmp_path / "valid"
    (split / "JPEGImages" / "v1").mkdir(parents=True)
    from PIL import Image

    Image.fromarray(np.zeros((4, 6, 3), dtype=np.uint8)).save(split / "JPEGImages" / "v1" / "00000.jpg")
    (split / "meta_expressions.json").write_text(json.dumps(
        {"videos": {"v1": {"expressions": {"0": {"exp": "the cat"}}, "frames": ["00000"]}}}))
    ds = MeViSDataset(tmp_path, split="valid")
    assert [s.id for s in ds] == ["v1/0"] and ds[0].target.masks is None
    protocol = MeViSProtocol()
    out = protocol.aggregate([protocol.score(ds[0], Prediction("v1/0", masks=[None]))])
    assert out["metrics"] == {} and "harness.submission mevis" in out["warnings"][0]


def test_bad_expression_is_a_data_error_and_the_rest_loads(fixture, tmp_path):
    import shutil

    root = tmp_path / "mevis"
    shutil.copytree(fixture[0], root)
    meta_path = root / "valid_u" / "meta_expressions.json"
    meta = json.loads(meta_path.read_text())
    meta["videos"]["vidB"]["expressions"]["0"]["anno_id"] = [999]
    meta_path.write_text(json.dumps(meta))
    ds = MeViSDataset(root)
    assert [e["sample_id"] for e in ds.errors] == ["vidB/0"]
    assert "anno_id 999" in ds.errors[0]["message"] and len(ds) == 9


def test_unknown_split_names_the_splits_present(fixture):
    with pytest.raises(DatasetFormatError, match=r"no split 'valid'.*\['valid_u'\]"):
        MeViSDataset(fixture[0], split="valid")


def test_the_documented_command_gives_the_printed_numbers(fixture, tmp_path):
    # rvt-bench +dataset=mevis dataset.root=... +model=precomputed model.root=... (docs/benchmarks/mevis.md)
    from hydra import compose, initialize_config_dir

    import run_bench  # noqa: F401  (registers the ${repo:} resolver)
    from rvt_bench.harness.runner import run

    conf = Path(__file__).resolve().parents[1] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose("config", overrides=["+dataset=mevis", f"dataset.root={fixture[0]}", "+model=precomputed",
                                           f"model.root={fixture[1]}", f"run.root={tmp_path / 'runs'}",
                                           f"leaderboard.dir={tmp_path / 'boards'}", "run.report=false"])
    body = run(cfg).metrics
    for key in ("J", "F", "J&F"):
        assert body["metrics"][key] == pytest.approx(PRINTED["printed"][key], abs=1e-9)
    assert body["n"] == 8 and body["schema_version"] == 4 and sum(body["excluded"].values()) == 2


def test_a_video_without_its_frame_folder_fails_each_of_its_expressions(fixture, tmp_path):
    import shutil

    root = tmp_path / "mevis"
    shutil.copytree(fixture[0], root)
    shutil.rmtree(root / "valid_u" / "JPEGImages" / "vidB")
    ds = MeViSDataset(root)
    assert [e["sample_id"] for e in ds.errors] == ["vidB/0", "vidB/1", "vidB/2"]
    assert all("frame directory" in e["message"] for e in ds.errors) and len(ds) == 7


def test_an_anno_id_repeated_in_an_expression_is_read_once_with_the_same_gt(fixture, tmp_path, monkeypatch):
    """issue 41: a 26 KB meta repeating an anno id took 175 s and 831 MB (12 s without): each listing
    re-checked and re-merged the same track. The reference's uint8 sum binarised is the union (the
    same below 256 listings), so repeats collapse: each (anno id, frame size) is checked once."""
    import shutil

    from rvt_bench.loaders import mevis as module

    root = tmp_path / "mevis"
    shutil.copytree(fixture[0], root)
    meta_path = root / "valid_u" / "meta_expressions.json"
    meta = json.loads(meta_path.read_text())
    ids = meta["videos"]["vidA"]["expressions"]["1"]["anno_id"]
    meta["videos"]["vidA"]["expressions"]["1"]["anno_id"] = [*ids, *[str(a) for a in ids]] * 200
    meta_path.write_text(json.dumps(meta))
    again = MeViSDataset(fixture[0])
    checked = []
    real = module.masks.rle_problem
    monkeypatch.setattr(module.masks, "rle_problem", lambda rle, size=None: checked.append(1) or real(rle, size))
    ds = MeViSDataset(root)
    assert ds.errors == again.errors == [] and [s.target.masks for s in ds] == [s.target.masks for s in again]
    annos = {(v, str(a)) for v, info in meta["videos"].items() for e in info["expressions"].values() for a in e["anno_id"]}
    frames = {v: len(info["frames"]) for v, info in meta["videos"].items()}
    assert len(checked) <= sum(frames[v] for v, _ in annos)  # at most one check per track frame, not per listing


def contract_samples(rng, node):
    """Synthetic samples of this benchmark's format for tests/test_protocol_contract.py."""
    from dataclasses import replace

    from tests.contract_samples import revos_samples

    return [replace(s, meta={"video": s.id, "exp_id": "0"}) for s in revos_samples(rng)]


def test_a_composite_with_a_mevis_part_leaves_its_dropped_expressions_out_of_n_named_by_part(fixture):
    from rvt_bench.metrics.protocols.composite import CompositeProtocol

    ds = MeViSDataset(fixture[0])
    protocol = CompositeProtocol({"video": MeViSProtocol(failed="reference")})
    pairs = list(zip(ds, predictions(ds, fixture[1])))
    out = protocol.aggregate([protocol.score(s, p) for s, p in pairs])
    assert out["n"] == 8 and [e["sample_id"] for e in out["excluded_samples"]] == PRINTED["dropped_by_reference"]
    assert all(e["reason"].startswith("video: dropped as eval_mevis.py") for e in out["excluded_samples"])
    assert protocol.variant_label() == "" and CompositeProtocol({"video": MeViSProtocol(failed="zero")}).variant_label() == \
        "video: failed=zero"
