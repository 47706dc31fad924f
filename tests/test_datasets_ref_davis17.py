"""Ref-DAVIS17 as VISA's tools/eval_davis17.py scores it (rvt_bench.loaders.ref_davis17,
metrics/protocols/ref_davis17.py), on a fixture in its exact layout
(tests/data/ref_davis17_parity/make_fixture.py, regenerated into tmp_path).

Parity: tests/data/ref_davis17_parity/expected_visa.json is what VISA@ec158fd's script printed on
that fixture (J, F, J&F in percent, rounded to 2 decimals) and its eval_queue's unrounded per
expression J and F (tests/data/ref_davis17_parity/run_visa.py). The fixture's missing video scores
0, its missing expression folder, missing middle frame and wrong-size frame drop those expressions.
"""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from rvt_bench.adapters.precomputed import PrecomputedAdapter
from rvt_bench.core.store import read_jsonl
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction
from rvt_bench.loaders.ref_davis17 import RefDAVIS17Dataset
from rvt_bench.metrics.protocols.ref_davis17 import RefDAVIS17Protocol
from tests.precomputed_runs import load_script, run_precomputed

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "ref_davis17_parity"
EXPECTED = json.loads((DATA / "expected_visa.json").read_text())


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    module = load_script(DATA / "make_fixture.py", "ref_davis17_make_fixture")
    tmp = tmp_path_factory.mktemp("ref_davis17")
    root, pred = module.write_fixture(tmp)
    return tmp, root, pred, module


def _run(tmp, root, pred, *extra):
    return run_precomputed("ref_davis17", tmp, root, pred, *extra)


@pytest.fixture(scope="module")
def default_run(fixture):
    tmp, root, pred, _ = fixture
    return _run(tmp, root, pred)


def test_the_run_prints_visas_numbers(default_run):
    metrics = default_run.metrics
    assert {k: round(100 * metrics["metrics"][k], 2) for k in ("J", "F", "J&F")} == EXPECTED["printed"]
    assert metrics["failures"] == 5  # the missing video's 2 expressions and the 3 VISA drops


def test_every_expression_equals_visas_unrounded_j_and_f(default_run):
    scores = {r["sample_id"]: r["values"]["video_jf"] for r in read_jsonl(default_run.run_dir / "scores.jsonl")}
    for key, (j, f) in EXPECTED["expressions"].items():
        video, exp = key.rsplit("_", 1)
        assert abs(scores[f"{video}/{exp}"]["J"] - j) <= 1e-12 and abs(scores[f"{video}/{exp}"]["F"] - f) <= 1e-12, key


def test_missing_video_scores_zero_and_missing_expression_or_frame_is_dropped_and_named(default_run, fixture):
    missing = fixture[3].MISSING
    metrics = default_run.metrics
    dropped = sorted(["/".join(missing["expression"]), "/".join(missing["frame"]), "/".join(missing["wrong_size"])])
    assert metrics["dropped"] == dropped
    assert any(all(d in w for d in dropped) for w in metrics["warnings"])
    assert EXPECTED["expressions"][f"{missing['video']}_0"] == [0.0, 0.0]


def _aggregate(root, pred, failed):
    ds, adapter, protocol = RefDAVIS17Dataset(root), PrecomputedAdapter(pred, layout="ref_davis17"), RefDAVIS17Protocol(failed=failed)
    records = []
    for sample in ds:
        try:
            prediction = adapter.predict(sample)
        except AdapterError as exc:
            prediction = Prediction.failure(sample.id, exc.kind, str(exc))
        records.append(protocol.score_or_fail(sample, prediction)[0])
    return protocol.aggregate(records)


def test_the_default_counts_visas_twenty_expressions(fixture):
    metrics = _aggregate(fixture[1], fixture[2], "visa")
    assert metrics["n"] == len(EXPECTED["expressions"]) == 20
    # the three it drops are listed with their reason, and the corrected number is in the same run
    assert [e["sample_id"] for e in metrics["excluded_samples"]] == metrics["dropped"] and sum(metrics["excluded"].values()) == 3
    zero = _aggregate(fixture[1], fixture[2], "zero")["metrics"]["J&F[failed-zero]"]
    assert metrics["metrics"]["J&F[failed-zero]"] == zero < metrics["metrics"]["J&F"]


@pytest.mark.parametrize("failed", ["zero", "empty"])
def test_failed_variants_are_named_and_count_every_expression(fixture, failed):
    metrics = _aggregate(fixture[1], fixture[2], failed)
    assert metrics["n"] == 23 and metrics["dropped"] == [] and "excluded" not in metrics
    # the variant heads the run; VISA's number stands beside it under its own keys, unchanged
    assert list(metrics["metrics"]) == [f"J&F[failed-{failed}]", f"J[failed-{failed}]", f"F[failed-{failed}]", "J&F", "J", "F"]
    assert metrics["metrics"]["J&F"] == _aggregate(fixture[1], fixture[2], "visa")["metrics"]["J&F"]
    if failed == "zero":  # the three dropped expressions now count 0
        assert metrics["metrics"]["J[failed-zero]"] == pytest.approx(sum(j for j, _ in EXPECTED["expressions"].values()) / 23, abs=1e-12)


def test_visas_numbering_sorts_expression_ids_as_strings_and_keeps_stored_frame_order(fixture):
    _, root, _, _ = fixture
    ds = RefDAVIS17Dataset(root)
    ids = [s.id for s in ds]
    assert ids.index("blackswan/10") < ids.index("blackswan/2")
    assert [s.meta["anno_id"] for s in ds] == list(range(len(ds)))
    meta = json.loads((root / "meta_expressions" / "valid" / "meta_expressions.json").read_text())["videos"]
    fish = next(s for s in ds if s.meta["video"] == "gold-fish")
    assert fish.frame_ids == meta["gold-fish"]["frames"] != sorted(meta["gold-fish"]["frames"])


def test_a_mask_dict_that_runs_code_is_refused_and_runs_nothing(fixture, tmp_path):
    _, root, _, _ = fixture
    marker = tmp_path / "marker"

    class Touch:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    import shutil

    copy = tmp_path / "ref_davis17"
    shutil.copytree(root / "meta_expressions", copy / "meta_expressions")
    (copy / "valid").mkdir()
    (copy / "valid" / "mask_dict.pkl").write_bytes(pickle.dumps({"0": [Touch()]}, protocol=4))
    with pytest.raises(DatasetFormatError, match=r"mask_dict\.pkl: not a plain-data pickle") as err:
        RefDAVIS17Dataset(copy)
    assert "\n" not in str(err.value) and not marker.exists()


def test_an_expression_without_masks_is_a_data_error(fixture, tmp_path):
    _, root, _, _ = fixture
    import shutil

    copy = tmp_path / "ref_davis17"
    shutil.copytree(root, copy)
    path = copy / "valid" / "mask_dict.pkl"
    data = pickle.loads(path.read_bytes())
    del data["4"]
    path.write_bytes(pickle.dumps(data, protocol=2))
    ds = RefDAVIS17Dataset(copy)
    assert [e["sample_id"] for e in ds.errors] == ["blackswan/1"] and len(ds) == 22
    assert "no entry '4'" in ds.errors[0]["message"]


@pytest.mark.parametrize("edit, says", [("frame", "must be a relative path"), ("video", "leaves")])
def test_a_frame_or_video_name_out_of_its_folder_is_a_data_error(fixture, tmp_path, edit, says):
    """'..' and absolute names were joined to JPEGImages/ as they were: the frames of another folder
    (or of /etc) became the sample's."""
    import shutil

    _, root, _, _ = fixture
    copy = tmp_path / "ref_davis17"
    shutil.copytree(root, copy)
    path = copy / "meta_expressions" / "valid" / "meta_expressions.json"
    meta = json.loads(path.read_text())
    if edit == "frame":
        meta["videos"]["gold-fish"]["frames"][0] = "/etc/hostname"
        video = "gold-fish"
    else:  # sorts where gold-fish did: VISA's numbering of the other videos is unchanged
        video = "gold-fish/../../../../etc"
        meta["videos"][video] = meta["videos"].pop("gold-fish")
    path.write_text(json.dumps(meta))
    ds = RefDAVIS17Dataset(copy)
    assert sorted(e["sample_id"] for e in ds.errors) == sorted(f"{video}/{e}" for e in meta["videos"][video]["expressions"])
    assert all(says in e["message"] for e in ds.errors)
    assert len(ds) + len(ds.errors) == sum(len(v["expressions"]) for v in meta["videos"].values())


def contract_samples(rng, node):
    """Synthetic samples of this benchmark's format for tests/test_protocol_contract.py."""
    from tests.contract_samples import revos_samples

    return revos_samples(rng)


def test_a_deep_rle_or_a_self_referencing_mask_list_in_mask_dict_pkl_is_one_line_naming_it(fixture, tmp_path):
    import shutil

    _, root, _, _ = fixture
    copy = tmp_path / "ref_davis17"
    shutil.copytree(root, copy)
    path = copy / "valid" / "mask_dict.pkl"
    deep = b"\x80\x02}X\x01\x00\x00\x000]}X\x06\x00\x00\x00counts" + b"]" * 300_000 + b"a" * 299_999 + b"sas."
    loop = [None]
    loop.append(loop)
    for data, says in ((deep, "nested more than 64 levels"), (pickle.dumps({"0": loop}, protocol=2), "contains itself")):
        path.write_bytes(data)
        with pytest.raises(DatasetFormatError, match=rf"mask_dict\.pkl: not a plain-data pickle \(.*{says}") as err:
            RefDAVIS17Dataset(copy)
        assert "\n" not in str(err.value)
