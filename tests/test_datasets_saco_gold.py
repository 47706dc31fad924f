"""SA-Co/Gold: the loader of the release's per-annotator files, SAM 3's cgF1 evaluator reproduced
(tests/data/saco_parity: a fixture in the exact format and the numbers the reference printed on it),
the precomputed reader of SAM 3's dumps, and a whole run from the command line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rvt_bench.adapters.precomputed import PrecomputedAdapter
from rvt_bench.core import masks
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction
from rvt_bench.loaders import saco_gold_predictions
from rvt_bench.loaders.saco_gold import SACoGoldDataset, gt_file, parse_annotators
from rvt_bench.metrics.protocols import saco_gold as proto
from rvt_bench.metrics.protocols.saco_gold import SACoGoldProtocol, evaluate_pair, select_best
from tests.precomputed_runs import load_script, run_precomputed

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "saco_parity"
EXPECTED = json.loads((DATA / "reference" / "expected_cgf1.json").read_text())
RUNS = ("abc", "a", "b", "c", "ba")


def hostile_fixture(base: Path) -> Path:
    """The release written under `base` for the hostile-dataset kit (tests/hostile_kit.py)."""
    root = base / "gt"
    load_script(DATA / "make_fixture.py", "saco_make_fixture").write_fixture(root)
    return root


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    module = load_script(DATA / "make_fixture.py", "saco_make_fixture")
    tmp = tmp_path_factory.mktemp("saco")
    module.write_fixture(tmp / "gt")
    module.write_predictions(tmp / "pred")
    return tmp, tmp / "gt", tmp / "pred"


def _scored(root, pred, annotators):
    ds = SACoGoldDataset(root, "metaclip_nps", annotators)
    adapter, protocol = PrecomputedAdapter(pred, layout="saco_gold"), SACoGoldProtocol()
    return protocol.aggregate([protocol.score_or_fail(s, adapter.predict(s))[0] for s in ds])


def _same(metrics, want, tol=1e-9):
    assert len(want) == 26 and set(want) <= set(metrics)
    for key, value in want.items():
        if value == -1:  # the reference's print for an undefined mean; None here
            assert metrics[key] is None, key
        else:
            assert metrics[key] == pytest.approx(value, abs=tol), key


@pytest.mark.parametrize("run", RUNS)
def test_each_annotator_choice_gives_the_reference_numbers(fixture, run):
    _, root, pred = fixture
    out = _scored(root, pred, list(run))
    assert out["n"] == EXPECTED[run]["n"]
    _same(out["metrics"], EXPECTED[run]["metrics"])


def test_no_prediction_at_all_gives_the_reference_numbers_and_minus_one_is_none(fixture, tmp_path):
    _, root, _ = fixture
    dump = tmp_path / "gold_metaclip_nps" / "dumps" / "gold_metaclip_nps"
    dump.mkdir(parents=True)
    (dump / "coco_predictions_segm.json").write_text("[]")
    out = _scored(root, tmp_path, list("abc"))
    _same(out["metrics"], EXPECTED["abc_empty"]["metrics"])
    assert EXPECTED["abc_empty"]["metrics"]["positive_macro_F1"] == -1
    assert any("positive_macro_F1" in w for w in out["warnings"])


def test_eval_sam3s_table_rounding_of_the_reproduced_numbers(fixture):
    _, root, pred = fixture
    m = _scored(root, pred, list("abc"))["metrics"]
    table = [round(m["cgF1"] * 100, 2), round(m["IL_MCC"], 2), round(m["positive_micro_F1"] * 100, 2)]
    assert table == EXPECTED["abc"]["table"]


def test_the_fixture_meets_every_case_of_the_evaluator():
    """Every image-level outcome under the oracle, annotators that disagree (the runs differ), an
    undefined mean, pairs left out as not exhaustive."""
    abc = EXPECTED["abc"]["metrics"]
    assert len({json.dumps(EXPECTED[r]["metrics"], sort_keys=True) for r in RUNS}) >= 4
    assert EXPECTED["a"]["n"] > EXPECTED["abc"]["n"] and EXPECTED["c"]["n"] == 16
    assert 0 < abc["IL_FPR"] < 1 and 0 < abc["IL_recall"] < 1 and abc["cgF1@0.5"] != abc["cgF1@0.75"]


def test_the_oracle_and_its_ties_are_the_references():
    tn, fn = {"IL": "TN", "num_dt": 0}, {"IL": "FN", "F1s": [0.0] * 10}
    good, half = {"F1s": [1.0] * 10}, {"F1s": [0.5] * 10}
    assert select_best([fn, tn]) == 1 and select_best([tn, fn]) == 0  # a true negative wins, a later one never loses it
    assert select_best([half, good]) == 1 and select_best([good, good]) == 0  # strictly better replaces
    assert select_best([tn, {"IL": "TN"}]) == 1


def test_the_score_threshold_is_inclusive_and_crowd_gt_is_ignored():
    box = np.zeros((10, 10), bool)
    box[2:6, 2:6] = True
    r = masks.encode(box)
    assert evaluate_pair([(r, 0.5)], [(r, False)])["IL"] == "TP"
    assert evaluate_pair([(r, 0.4999)], [(r, False)])["IL"] == "FN"
    only_crowd = evaluate_pair([(r, 0.9)], [(r, True)])
    assert only_crowd["IL"] == "FP" and only_crowd["TPs"] == [0] * 10 and not only_crowd["positive"]
    assert evaluate_pair([], [(r, True)]) == {"IL": "TN", "num_dt": 0}
    assert saco_gold_predictions.SCORE_THRESHOLD == proto.SCORE_THRESHOLD


def test_hungarian_matching_not_greedy():
    """Greedy by score would give the big prediction to the first GT and match one pair; the
    assignment maximizing the IoU sum matches both."""
    a, b, big = (np.zeros((10, 20), bool) for _ in range(3))
    a[0:10, 0:10] = True
    b[0:10, 10:20] = True
    big[0:10, 0:12] = True
    small = np.zeros((10, 20), bool)
    small[0:10, 12:20] = True
    out = evaluate_pair([(masks.encode(big), 0.9), (masks.encode(small), 0.8)],
                        [(masks.encode(a), False), (masks.encode(b), False)])
    assert out["TPs"][0] == 2


def test_a_prediction_of_another_size_never_matches(fixture):
    _, root, pred = fixture
    ds = SACoGoldDataset(root, "metaclip_nps")
    sample = next(s for s in ds if s.query == "saucer")
    p = PrecomputedAdapter(pred, layout="saco_gold").predict(sample)
    assert p.trace["instances"][0][0]["size"] != [sample.meta["height"], sample.meta["width"]]
    assert SACoGoldProtocol().score(sample, p).of(proto.SACoGoldValues).IL == "TP"
    assert SACoGoldProtocol().score(sample, p).of(proto.SACoGoldValues).TPs == [0] * 10


def test_a_pair_without_a_result_above_the_threshold_is_a_no_target_answer(fixture):
    _, root, pred = fixture
    ds = SACoGoldDataset(root, "metaclip_nps")
    adapter = PrecomputedAdapter(pred, layout="saco_gold")
    by_query = {s.query: s for s in ds}
    lamp = adapter.predict(by_query["lamp"])  # two results, both below 0.5
    assert lamp.no_target and lamp.masks is None and len(lamp.trace["instances"]) == 2
    assert adapter.predict(by_query["cat"]).no_target  # no result at all
    dog = adapter.predict(by_query["dog"])
    assert not dog.no_target and masks.area(dog.masks[0]) > 0
    # an adapter's no-target answer is the reference's "no prediction": a TN on a negative pair
    protocol = SACoGoldProtocol()
    assert protocol.score(by_query["cat"], Prediction.none_found("x")).of(proto.SACoGoldValues).IL == "TN"
    assert protocol.score(by_query["car"], Prediction.none_found("x")).of(proto.SACoGoldValues).IL == "FN"
    # dog: annotator c has only a crowd mask, so "no target" is its true negative and the oracle takes it
    assert protocol.score(by_query["dog"], Prediction.none_found("x")).of(proto.SACoGoldValues).IL == "TN"
    # a model without scores: its one mask is one instance
    gt = masks.union([r for r, c in by_query["tree"].meta["annotations"]["a"]], 30, 20)
    assert protocol.score(by_query["tree"], Prediction("x", masks=[gt])).of(proto.SACoGoldValues).correct()
    failed = Prediction.failure("x", "adapter", "boom", trace={"instances": [[gt, 0.9]]})
    assert protocol.score(by_query["tree"], failed).of(proto.SACoGoldValues).IL == "FN"
    for score in ("0.9", float("nan"), 10**400):  # an adapter's trace: the same reason (10**400 was numpy's TypeError)
        with pytest.raises(AdapterError, match="trace instance 0 must be"):
            protocol.score(by_query["tree"], Prediction("x", masks=[gt], trace={"instances": [[gt, score]]}))


def test_the_loader_keeps_what_the_evaluator_scores(fixture):
    _, root, _ = fixture
    ds = SACoGoldDataset(root, "metaclip_nps")
    queries = [s.query for s in ds]
    assert "person" not in queries and "hat" not in queries  # not exhaustive for a, for b
    assert "hat" in [s.query for s in SACoGoldDataset(root, "metaclip_nps", ["a"])]
    vase = next(s for s in ds if s.query == "vase")
    assert len(vase.meta["annotations"]["a"]) == 1  # the annotation of an unknown category is left out
    shoe = next(s for s in ds if s.query == "shoe")
    assert shoe.meta["annotations"]["a"][0][1] == 1 and not shoe.meta["no_target"]
    assert next(s for s in ds if s.query == "cat").meta["no_target"]
    assert ds[0].meta["dump"] == "gold_metaclip_nps" and Path(ds[0].frames[0]).is_file()


def test_subset_and_annotator_options_fail_in_one_line(fixture):
    _, root, _ = fixture
    assert gt_file("sa1b_nps", "b") == "gold_sa1b_merged_b_release_test.json"
    assert parse_annotators("ba") == ["b", "a"]
    for bad in (["a", "a"], ["d"], [], 3):
        with pytest.raises(ValueError, match="annotators"):
            parse_annotators(bad)
    with pytest.raises(DatasetFormatError, match="not one of"):
        SACoGoldDataset(root, "metaclip")
    with pytest.raises(DatasetFormatError, match="gold_crowded_merged_a_release_test.json"):
        SACoGoldDataset(root, "crowded")


@pytest.mark.parametrize("edit, says", [
    (lambda d: d["annotations"][0].pop("iscrowd"), "iscrowd"),
    (lambda d: d["annotations"][0]["segmentation"].update(counts="!!"), "corrupt"),
    (lambda d: d["annotations"][0]["segmentation"].update(counts=[24 * 32] + [0] * 2000), "runs of length 0"),
    (lambda d: d["images"][0].update(file_name="../../etc/passwd"), "leaves"),
    (lambda d: d["images"].pop(1), "not in gold_metaclip_merged_a"),
])
def test_a_bad_record_is_a_data_error_of_its_pair(fixture, tmp_path, edit, says):
    _, root, _ = fixture
    import shutil

    shutil.copytree(root, tmp_path / "gt", ignore=shutil.ignore_patterns("images"))
    name = tmp_path / "gt" / "gold_metaclip_merged_a_release_test.json"
    data = json.loads(name.read_text())
    edit(data)
    name.write_text(json.dumps(data))
    ds = SACoGoldDataset(tmp_path / "gt", "metaclip_nps", ["b", "a"] if "not in" in says else ["a", "b", "c"])
    assert len(ds.errors) == 1 and says in ds.errors[0]["message"]
    assert len(ds) == EXPECTED["abc"]["n"] - 1


def test_an_annotation_of_no_pair_that_can_be_told_refuses_the_file_in_one_line(fixture, tmp_path):
    """An annotation whose image_id is a list ended the loader with a bare TypeError (unhashable)."""
    _, root, _ = fixture
    import shutil

    shutil.copytree(root, tmp_path / "gt", ignore=shutil.ignore_patterns("images"))
    name = tmp_path / "gt" / "gold_metaclip_merged_b_release_test.json"
    data = json.loads(name.read_text())
    data["annotations"][2]["image_id"] = [data["annotations"][2]["image_id"]]
    name.write_text(json.dumps(data))
    with pytest.raises(DatasetFormatError, match=r"^gold_metaclip_merged_b_release_test.json annotations\[2\]: image_id "
                                                 r"must be a pair id \(an int or a string\), got \[\d+\]$"):
        SACoGoldDataset(tmp_path / "gt", "metaclip_nps")


def test_results_whose_pair_ids_are_integral_floats_are_the_same_pairs(fixture, tmp_path):
    """10000000.0 is pair 10000000 for the evaluator (Python's dict and set): every result was matched
    to no pair, each pair silently a "no prediction", cgF1 0."""
    _, root, pred = fixture
    name = "gold_metaclip_nps/dumps/gold_metaclip_nps/coco_predictions_segm.json"
    results = json.loads((pred / name).read_text())
    (tmp_path / name).parent.mkdir(parents=True)
    (tmp_path / name).write_text(json.dumps([dict(r, image_id=float(r["image_id"])) for r in results]))
    assert isinstance(json.loads((tmp_path / name).read_text())[0]["image_id"], float)
    _same(_scored(root, tmp_path, "abc")["metrics"], EXPECTED["abc"]["metrics"])


def test_a_bad_result_fails_its_pair_and_an_unreadable_file_every_pair(fixture, tmp_path):
    _, root, pred = fixture
    ds = SACoGoldDataset(root, "metaclip_nps")
    dump = tmp_path / "gold_metaclip_nps" / "dumps" / "gold_metaclip_nps"
    dump.mkdir(parents=True)
    results = json.loads((pred / "gold_metaclip_nps/dumps/gold_metaclip_nps/coco_predictions_segm.json").read_text())
    results[0]["score"] = "high"
    (dump / "coco_predictions_segm.json").write_text(json.dumps(results))
    adapter = PrecomputedAdapter(tmp_path, layout="saco_gold")
    with pytest.raises(AdapterError, match="score must be a finite number"):
        adapter.predict(ds[0])
    assert adapter.predict(ds[1]).no_target
    results[0]["score"] = 10**400  # an integer beyond float's range: the same reason, not an OverflowError
    (dump / "coco_predictions_segm.json").write_text(json.dumps(results))
    with pytest.raises(AdapterError, match=r"coco_predictions_segm.json result 0: score must be a finite number"):
        PrecomputedAdapter(tmp_path, layout="saco_gold").predict(ds[0])
    # runs of length 0 (their sum still H*W): more runs than H*W + 1, which pycocotools' merge copies into
    # a buffer of H*W + 1 (a heap corruption that killed the run: "double free or corruption")
    h, w = ds[0].meta["height"], ds[0].meta["width"]
    results[0].update(score=0.9, segmentation={"size": [h, w], "counts": [h * w] + [0] * (2 * h * w)})
    (dump / "coco_predictions_segm.json").write_text(json.dumps(results))
    with pytest.raises(AdapterError, match=rf"result 0: segmentation: 'counts' holds {2 * h * w + 1} runs, more than"):
        PrecomputedAdapter(tmp_path, layout="saco_gold").predict(ds[0])
    (dump / "coco_predictions_segm.json").write_text("{")
    with pytest.raises(AdapterError, match="cannot read"):
        PrecomputedAdapter(tmp_path, layout="saco_gold").predict(ds[1])


def test_a_whole_run_from_the_config_gives_the_reference_numbers(fixture):
    tmp, root, pred = fixture
    result = run_precomputed("saco_gold", tmp, root, pred, "dataset.subset=metaclip_nps", "dataset.annotators=[a]")
    metrics = result.metrics
    assert metrics["failures"] == 0 and metrics["protocol"] == "saco_gold" and metrics["n"] == EXPECTED["a"]["n"]
    _same(metrics["metrics"], EXPECTED["a"]["metrics"])
    assert (Path(result.run_dir) / "report.html").is_file()


def test_the_command_line_of_the_docs_runs_it(fixture):
    tmp, root, pred = fixture
    exe = Path(sys.executable).parent / "rvt-bench"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-c", "from rvt_bench.harness.main import console; console()"]
    runs = tmp / "cli_runs"
    done = subprocess.run([*cmd, "+dataset=saco_gold", f"dataset.root={root}", "dataset.subset=metaclip_nps",
                           "+model=precomputed", f"model.root={pred}", f"run.root={runs}",
                           f"leaderboard.dir={tmp / 'cli_boards'}"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "HYDRA_FULL_ERROR": "0"})
    assert done.returncode == 0, done.stderr[-2000:]
    found = list(runs.rglob("metrics.json"))
    assert len(found) == 1
    _same(json.loads(found[0].read_text())["metrics"], EXPECTED["abc"]["metrics"])


def contract_samples(rng, node):
    """Synthetic SA-Co/Gold pairs for tests/test_protocol_contract.py: each image's GT mask split
    into instances for two annotators (the second drops one instance), every third pair negative."""
    from tests.contract_samples import image_samples

    out = []
    for i, s in enumerate(image_samples(rng, n=9)):
        gt = masks.decode(s.target.masks[0]).astype(bool)
        h, w = gt.shape
        left, right = gt.copy(), gt.copy()
        left[:, w // 2:] = False
        right[:, :w // 2] = False
        inst = [[masks.encode(m), 0] for m in (left, right) if m.any()]
        if i % 3 == 0:
            inst = []
        out.append(replace(s, target=replace(s.target, masks=[masks.union([r for r, _ in inst], h, w)]),
                           meta={"annotations": {"a": inst, "b": inst[:1]}, "order": i, "height": h, "width": w,
                                 "no_target": not inst}))
    return out


def test_a_pair_excluded_as_not_exhaustive_may_be_missing_from_another_file(fixture, tmp_path):
    """The reference never looks at a pair another annotator marks not exhaustive: its absence from
    a third file is no error (it is one for a pair that is scored)."""
    _, root, _ = fixture
    import shutil

    shutil.copytree(root, tmp_path / "gt", ignore=shutil.ignore_patterns("images"))
    name = tmp_path / "gt" / "gold_metaclip_merged_c_release_test.json"
    data = json.loads(name.read_text())
    data["images"] = [im for im in data["images"] if im["text_input"] != "hat"]  # b marks "hat" not exhaustive
    name.write_text(json.dumps(data))
    ds = SACoGoldDataset(tmp_path / "gt", "metaclip_nps")
    assert ds.errors == [] and len(ds) == EXPECTED["abc"]["n"]
