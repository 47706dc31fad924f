"""gRefCOCO (GRES) as ReLA evaluates it: the release layout (tests/data/grefcoco_parity/make_fixture.py),
the numbers ReLA's own loader, test mapper and ReferEvaluator printed on it
(tests/data/grefcoco_parity/reference/), the precomputed predictions.json layout, the no-target
answer, and bad data."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rvt_bench.adapters.precomputed import PrecomputedAdapter
from rvt_bench.core import masks
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction
from rvt_bench.loaders.grefcoco import GRefCOCODataset, rela_gt
from rvt_bench.metrics.protocols.grefcoco import GRefCOCOProtocol, rela_aggregate, rela_counts
from tests.precomputed_runs import load_script, run_precomputed

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "grefcoco_parity"
EXPECTED = json.loads((DATA / "reference" / "expected_rela.json").read_text())
SPLITS = ("val", "testA", "testB")


def hostile_fixture(base: Path) -> Path:
    """The release written under `base` for the hostile-dataset kit (tests/hostile_kit.py)."""
    return load_script(DATA / "make_fixture.py", "grefcoco_make_fixture").write_fixture(base / "datasets")


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    module = load_script(DATA / "make_fixture.py", "grefcoco_make_fixture")
    tmp = tmp_path_factory.mktemp("grefcoco")
    root = module.write_fixture(tmp / "datasets")
    pred = module.write_predictions(root, tmp / "pred")
    return tmp, root, pred


def _scored(root, pred, split, **kw):
    ds, adapter, protocol = GRefCOCODataset(root, split), PrecomputedAdapter(pred, layout="grefcoco"), GRefCOCOProtocol(**kw)
    return protocol.aggregate([protocol.score_or_fail(s, adapter.predict(s))[0] for s in ds])


PERCENT = ("gIoU", "cIoU", "Pr@0.7", "Pr@0.8", "Pr@0.9")  # ReLA prints these x 100; metrics.json holds fractions


def _same(metrics, want, tol=1e-9):
    assert set(want) <= set(metrics)
    for key, value in want.items():
        assert metrics[key] == pytest.approx(value / 100 if key in PERCENT else value, abs=tol), key


@pytest.mark.parametrize("split", SPLITS)
def test_every_split_gives_relas_printed_numbers(fixture, split):
    _, root, pred = fixture
    out = _scored(root, pred, split)
    want = EXPECTED[split]
    assert out["n"] == want["n"] and out["counts"] == want["counts"]
    _same(out["metrics"], want["results"]["grefcoco"])


def test_the_fixture_meets_every_case_of_relas_evaluator():
    val = EXPECTED["val"]["counts"]
    assert all(val[k] > 0 for k in ("TP", "TN", "FP", "FN"))


def test_a_whole_run_from_the_config_gives_relas_numbers(fixture):
    tmp, root, pred = fixture
    result = run_precomputed("grefcoco", tmp, root, pred, "dataset.split=val")
    metrics = result.metrics
    assert metrics["failures"] == 0 and metrics["protocol"] == "grefcoco" and metrics["n"] == EXPECTED["val"]["n"]
    _same(metrics["metrics"], EXPECTED["val"]["results"]["grefcoco"])
    lines = [json.loads(x) for x in (Path(result.run_dir) / "predictions.jsonl").read_text().splitlines()]
    nt = [r for r in lines if r.get("no_target")]
    assert len(nt) == EXPECTED["val"]["counts"]["TP"] + EXPECTED["val"]["counts"]["FP"]
    assert all(r["masks"] is None and isinstance(r["no_target_score"], float) for r in nt)
    assert (Path(result.run_dir) / "report.html").is_file()  # 480 x 480 masks drawn over their images
    stages = {s["key"]: s["reached"] for s in metrics["adapter_report"]["stages"]}
    counts = EXPECTED["val"]["counts"]
    assert counts["TP"] <= stages["result_correct"] <= counts["TP"] + counts["TN"]  # TP, and TN with IoU > 0.5


def test_the_committed_numbers_are_reproduced_to_the_last_bits(fixture):
    _, root, pred = fixture
    for split in SPLITS:
        got = _scored(root, pred, split)["metrics"]
        for key, value in EXPECTED[split]["results"]["grefcoco"].items():
            ours = 100 * got[key] if key in PERCENT else got[key]
            assert abs(ours - value) <= 1e-13 * max(1.0, abs(value)), (split, key)


def test_a_reader_is_declared_by_a_dotted_class_name_and_one_that_cannot_be_built_fails_the_sample(fixture, tmp_path):
    from rvt_bench.core.benchmark import DeclarationError, prediction_layout

    with pytest.raises(DeclarationError, match="dotted class name"):
        prediction_layout("x", {"path": "p.json", "reader": "not a name"})
    _, root, pred = fixture
    adapter = PrecomputedAdapter(pred, layout="grefcoco")
    adapter.use_prediction_layouts({"grefcoco": prediction_layout("grefcoco", {"path": "predictions.json",
                                                                               "reader": "rvt_bench.nowhere.Reader"})})
    with pytest.raises(AdapterError, match="cannot be built"):
        adapter.predict(GRefCOCODataset(root, "testA")[0])


def test_a_no_target_answers_mask_still_counts_in_u_and_dropping_it_is_a_named_variant(fixture):
    _, root, pred = fixture
    kept, dropped = _scored(root, pred, "val"), _scored(root, pred, "val", nt_mask="dropped")
    assert kept["metrics"]["cIoU"] == pytest.approx(EXPECTED["val"]["results"]["grefcoco"]["cIoU"] / 100, abs=1e-9)
    assert dropped["metrics"]["cIoU"] > kept["metrics"]["cIoU"]  # the FP's mask no longer adds to U
    assert dropped["metrics"]["gIoU"] == kept["metrics"]["gIoU"]
    with pytest.raises(ValueError, match="nt_mask"):
        GRefCOCOProtocol(nt_mask="empty")


def test_relas_rules_for_each_case():
    gt, pred = np.zeros((4, 4), bool), np.zeros((4, 4), bool)
    gt[:2], pred[1:3] = True, True
    assert rela_counts(pred, gt, gt_nt=False, pred_nt=False) == (4, 12, 4 / 12)  # TN
    assert rela_counts(pred, gt, gt_nt=False, pred_nt=True) == (0, 12, 0.0)  # FP: I = 0, the mask stays in U
    empty = np.zeros((4, 4), bool)
    assert rela_counts(pred, empty, gt_nt=True, pred_nt=True) == (0, 0, 1.0)  # TP: IoU 1, nothing to cIoU
    assert rela_counts(pred, empty, gt_nt=True, pred_nt=False) == (0, 8, 0.0)  # FN: the mask's pixels in U
    assert rela_counts(empty, empty, gt_nt=True, pred_nt=False) == (0, 0, 0.0)  # FN with an empty mask: IoU 0 still
    out = rela_aggregate([(4, 12, 4 / 12, False, False), (0, 0, 1.0, True, True)])
    assert out["T_acc"] == 1 and out["N_acc"] == 1 and out["gIoU"] == pytest.approx((4 / 12 + 1) / 2)
    no_nt = rela_aggregate([(4, 12, 4 / 12, False, False)])
    assert no_nt["T_acc"] == 0 and no_nt["N_acc"] == 0  # ReLA prints 0 for both without a no-target sample
    assert type(no_nt["T_acc"]) is float and type(no_nt["N_acc"]) is float  # shown as fractions, not counts
    assert rela_aggregate([(0, 0, 1.0, True, True)])["cIoU"] is None  # ReLA: ZeroDivisionError


def test_a_tie_of_the_scores_is_a_target_answer(fixture):
    _, root, pred = fixture
    adapter = PrecomputedAdapter(pred, layout="grefcoco")
    entries = json.loads((pred / "predictions.json").read_text())
    tie = next(e for e in entries if e["nt_label"][0] == e["nt_label"][1])
    sample = next(s for s in GRefCOCODataset(root, "val") if s.id == str(tie["sent_id"]))
    got = adapter.predict(sample)
    assert not got.no_target and got.masks is not None


def test_gt_is_relas_at_480_from_rescaled_polygons_with_integer_coordinates_truncated(fixture):
    _, root, _ = fixture
    samples = {s.id: s for s in GRefCOCODataset(root, "val")}
    assert {tuple(s.meta["eval_size"]) for s in samples.values()} == {(480, 480)}
    assert all(masks.decode(s.meta["eval_gt"]).shape == (480, 480) for s in samples.values())
    assert all(masks.decode(s.target.masks[0]).shape == (s.meta["height"], s.meta["width"]) for s in samples.values())
    # image 3's first object has integer coordinates: numpy keeps the array integer, the scaled values truncate
    inst = json.loads((root / "grefcoco" / "instances.json").read_text())
    ann = next(a for a in inst["annotations"] if a["image_id"] == 3)
    assert all(isinstance(v, int) for v in ann["segmentation"][0])
    floated = dict(ann, segmentation=[[float(v) for v in p] for p in ann["segmentation"]])
    assert (rela_gt([ann], 500, 333) != rela_gt([floated], 500, 333)).any()
    # the image-size variant: the polygons as given, no rescaling
    native = GRefCOCODataset(root, "val", image_size=None)
    assert {tuple(s.meta["eval_size"]) for s in native} == {(s.meta["height"], s.meta["width"]) for s in native}


def test_relas_loader_drops_crowd_and_invalid_polygons_and_reads_no_target_refs(fixture):
    _, root, _ = fixture
    val = list(GRefCOCODataset(root, "val"))
    refs = json.loads((root / "grefcoco" / "grefs(unc).json").read_text())
    assert [s.id for s in val] == [str(x["sent_id"]) for r in refs if r["split"] == "val" for x in r["sentences"]]
    assert all(s.query == next(x["raw"] for r in refs for x in r["sentences"] if str(x["sent_id"]) == s.id) for s in val)
    nt = [s for s in val if s.meta["no_target"]]
    assert nt and all(masks.area(s.target.masks[0]) == 0 and s.meta["ann_ids"] == [-1] for s in nt)
    crowd = next(s for s in val if 999 in s.meta["ann_ids"])  # its crowd RLE annotation is dropped, not an error
    assert masks.area(crowd.target.masks[0]) > 0
    inst = json.loads((root / "grefcoco" / "instances.json").read_text())
    bad = next(a for a in inst["annotations"] if a["image_id"] == 4 and len(a["segmentation"]) == 3)
    only_valid = dict(bad, segmentation=[bad["segmentation"][1]])
    assert (rela_gt([bad], 480, 480) == rela_gt([only_valid], 480, 480)).all()


@pytest.mark.parametrize("split", ["val", "testA", "testB", "train"])
def test_split_selection_is_exact(fixture, split):
    _, root, _ = fixture
    refs = json.loads((root / "grefcoco" / "grefs(unc).json").read_text())
    assert len(GRefCOCODataset(root, split)) == sum(len(r["sentences"]) for r in refs if r["split"] == split)


def test_an_unknown_split_is_one_line():
    with pytest.raises(DatasetFormatError, match="not one of"):
        GRefCOCODataset("/nonexistent", "test")


@pytest.mark.parametrize("change, says", [
    (lambda refs, inst: refs[0].update(ann_id=[12345]), "not in instances.json"),
    (lambda refs, inst: refs[0].update(ann_id=[-1, refs[0]["ann_id"][0]]), "mixes -1"),
    (lambda refs, inst: inst["annotations"][0].update(segmentation=[[1.0, 2.0, 3.0, 4.0]]), "no valid polygon"),
    (lambda refs, inst: inst["annotations"][0].update(segmentation={"size": [1, 1], "counts": "1"}), "RLE segmentation"),
    (lambda refs, inst: inst["annotations"][0].update(iscrowd=1), "crowd"),
    (lambda refs, inst: inst["annotations"][0].update(segmentation=[[float("nan")] * 6]), "non-finite"),
    (lambda refs, inst: inst["images"][0].update(height=999), "instances.json says"),
    (lambda refs, inst: refs[0].update(image_id=[1]), "grefs[0] (ref 700): malformed ref: unhashable type"),
    (lambda refs, inst: refs[0].update(ann_id=[{"id": 1}]), "grefs[0] (ref 700): malformed ref: unhashable type"),
])
def test_a_bad_ref_is_a_data_error_for_each_of_its_sentences(fixture, tmp_path, change, says):
    _, root, _ = fixture
    copy = tmp_path / "datasets"
    shutil.copytree(root, copy)
    refs = json.loads((copy / "grefcoco" / "grefs(unc).json").read_text())
    inst = json.loads((copy / "grefcoco" / "instances.json").read_text())
    change(refs, inst)
    (copy / "grefcoco" / "grefs(unc).json").write_text(json.dumps(refs))
    (copy / "grefcoco" / "instances.json").write_text(json.dumps(inst, allow_nan=True))
    ds = GRefCOCODataset(copy, "val")
    first = [str(x["sent_id"]) for x in refs[0]["sentences"]]
    errors = {e["sample_id"]: e["message"] for e in ds.errors}
    assert all(sid in errors and says in errors[sid] for sid in first), errors
    assert len(ds) + len(errors) == EXPECTED["val"]["n"] and len(ds) > 0


def _with_segmentation(root, tmp_path, segmentation):
    copy = tmp_path / "datasets"
    shutil.copytree(root, copy)
    inst = json.loads((copy / "grefcoco" / "instances.json").read_text())
    inst["annotations"][0]["segmentation"] = segmentation
    (copy / "grefcoco" / "instances.json").write_text(json.dumps(inst))
    return copy


def test_an_annotations_polygons_are_bounded_as_refcocos(fixture, tmp_path):
    """dataset.limits.max_polygon_points applies to a gRefCOCO annotation as to RefCOCO's (a million
    points loaded and rasterized unchecked; 200,000 triangles had pycocotools allocate 480 x 480 x
    200,000 bytes and the run died of a segfault)."""
    from rvt_bench.core import files

    copy = _with_segmentation(fixture[1], tmp_path, [[10.0, 10.0, 60.0, 10.0, 60.0, 60.0]] * 20)  # 60 points
    with files.limits_in_force(files.ReadLimits(max_polygon_points=59)):
        errors = {e["sample_id"]: e["message"] for e in GRefCOCODataset(copy, "val").errors}
    assert errors and all("60 points, over the limit of 59 (dataset.limits.max_polygon_points)" in m
                          for m in errors.values()), errors
    assert not GRefCOCODataset(copy, "val").errors  # within the default limit


def test_an_annotations_polygons_are_decoded_as_one_mask_not_one_each(fixture, tmp_path):
    """The union of an annotation's polygons (ReLA's any over them) is merged as RLEs and decoded once:
    1,000 triangles no longer cost 1,000 decoded masks at 480 x 480 and at the image's size (~500 MB)."""
    import tracemalloc

    triangle = [10.0, 10.0, 60.0, 10.0, 60.0, 60.0]
    copy = _with_segmentation(fixture[1], tmp_path, [triangle] * 1000)
    tracemalloc.start()
    try:
        ds = GRefCOCODataset(copy, "val")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 60e6, f"{peak / 1e6:.0f} MB"
    one = GRefCOCODataset(_with_segmentation(fixture[1], tmp_path / "one", [triangle]), "val")
    assert [s.meta["eval_gt"] for s in ds][:2] == [s.meta["eval_gt"] for s in one][:2]  # the same union


def test_a_refs_pickle_is_read_first_and_only_as_plain_data(fixture, tmp_path):
    import pickle

    _, root, _ = fixture
    copy = tmp_path / "datasets"
    shutil.copytree(root, copy)
    refs = json.loads((copy / "grefcoco" / "grefs(unc).json").read_text())
    (copy / "grefcoco" / "grefs(unc).p").write_bytes(pickle.dumps(refs[:1], protocol=2))
    assert len(GRefCOCODataset(copy, "val")) == len(refs[0]["sentences"])

    class Boom:
        def __reduce__(self):
            return (print, ("ran",))

    (copy / "grefcoco" / "grefs(unc).p").write_bytes(pickle.dumps([Boom()]))
    with pytest.raises(DatasetFormatError):
        GRefCOCODataset(copy, "val")


# --- the precomputed layout ---------------------------------------------------------------------

def _edit_predictions(pred, tmp_path, edit):
    copy = tmp_path / "pred"
    shutil.copytree(pred, copy)
    entries = json.loads((copy / "predictions.json").read_text())
    edit(entries, copy)
    (copy / "predictions.json").write_text(json.dumps(entries))
    return PrecomputedAdapter(copy, layout="grefcoco")


@pytest.mark.parametrize("edit, says", [
    (lambda e, d: e.pop(0), "no entry with sent_id"),
    (lambda e, d: e[0].update(nt_label=[1.0]), "nt_label must be"),
    (lambda e, d: e[0].update(nt_label=[1.0, "x"]), "nt_label must be"),
    (lambda e, d: e[0].update(nt_label=[10**400, 0]), r"sent_id \d+: nt_label must be"),  # beyond float: no OverflowError
    (lambda e, d: e[0].update(mask="../../etc/passwd"), "leaves"),
    (lambda e, d: e[0].update(mask="masks/none.png"), "does not exist"),
    (lambda e, d: e.append(dict(e[0])), "repeats sent_id"),
    (lambda e, d: (d / e[0]["mask"]).write_bytes(b"not a png"), "cannot read"),
])
def test_a_bad_prediction_entry_fails_its_sample_with_the_reason(fixture, tmp_path, edit, says):
    _, root, pred = fixture
    adapter = _edit_predictions(pred, tmp_path, edit)
    sample = GRefCOCODataset(root, "val")[0]
    with pytest.raises(AdapterError, match=says):
        adapter.predict(sample)
    assert adapter.predict(GRefCOCODataset(root, "val")[1]).sample_id  # the others are read


def test_an_unreadable_index_fails_every_sample_with_one_reason(fixture, tmp_path):
    _, root, pred = fixture
    copy = tmp_path / "pred"
    shutil.copytree(pred, copy)
    (copy / "predictions.json").write_text("{not json")
    adapter = PrecomputedAdapter(copy, layout="grefcoco")
    for s in GRefCOCODataset(root, "testA"):
        with pytest.raises(AdapterError, match="cannot read"):
            adapter.predict(s)


def test_a_mask_at_image_size_is_resized_to_480_by_nearest(fixture):
    import cv2

    _, root, _ = fixture
    sample = next(s for s in GRefCOCODataset(root, "val") if not s.meta["no_target"] and s.meta["width"] != 480)
    h, w = sample.meta["height"], sample.meta["width"]
    full = np.zeros((h, w), bool)
    full[h // 4: h // 2, w // 3: w // 2] = True
    protocol = GRefCOCOProtocol()
    at_image = protocol.score(sample, Prediction(sample.id, task="segmentation", masks=[masks.encode(full)]))
    small = cv2.resize(full.astype(np.uint8), (480, 480), interpolation=cv2.INTER_NEAREST) > 0
    at_480 = protocol.score(sample, Prediction(sample.id, task="segmentation", masks=[masks.encode(small)]))
    assert at_image.values == at_480.values
    with pytest.raises(AdapterError, match="expected the evaluator's"):
        protocol.score(sample, Prediction(sample.id, task="segmentation", masks=[masks.encode(np.ones((7, 9), bool))]))


def test_a_failed_prediction_is_an_empty_target_answer(fixture):
    _, root, _ = fixture
    sample = next(s for s in GRefCOCODataset(root, "val") if s.meta["no_target"])
    record = GRefCOCOProtocol().score(sample, Prediction.failure(sample.id, "adapter", "boom"))
    assert record.failed and (record.values["grefcoco"].pred_nt, record.values["grefcoco"].term) == (False, 0.0)


def test_a_mask_of_a_third_size_is_the_models_failure_and_is_never_decoded(fixture):
    """A no-target answer's kept mask (or any predicted mask) of neither the evaluator's nor the image's
    size fails the prediction (the model's, kind adapter) before it is decoded: a 100000 x 100000 RLE
    in a precomputed record's trace was decoded (10 GB), and with the decode refused it was taken for
    a data error of the sample."""
    _, root, _ = fixture
    sample = GRefCOCODataset(root, "val")[0]
    huge = masks.compress({"size": [100000, 100000], "counts": [10**9] * 10})
    for pred in (Prediction(sample.id, task="segmentation", masks=[huge]),
                 Prediction.none_found(sample.id, 0.9, task="segmentation", trace={"masks": [huge]})):
        record, kept = GRefCOCOProtocol().score_or_fail(sample, pred)
        assert kept.error["kind"] == "adapter" and "predicted mask is [100000, 100000] (H, W)" in kept.error["message"]


# --- a VLM that answers that nothing matches -----------------------------------------------------

def test_a_vlm_answering_nothing_matches_is_a_no_target_prediction_on_grefcoco(fixture):
    from tests.vlm_server import ChatServer

    tmp, root, _ = fixture
    server = ChatServer(model="tiny-vlm", reply=lambda body: "[]")
    try:
        result = run_precomputed_vlm(tmp, root, server.url)
    finally:
        server.close()
    metrics = result.metrics
    preds = [json.loads(x) for x in (Path(result.run_dir) / "predictions.jsonl").read_text().splitlines()]
    assert metrics["failures"] == 0 and all(p["no_target"] and p["masks"] is None for p in preds)
    counts = EXPECTED["testA"]["counts"]
    n_nt = counts["TP"] + counts["FN"]
    assert metrics["metrics"]["N_acc"] == 1.0 and metrics["metrics"]["T_acc"] == 0.0
    assert metrics["metrics"]["gIoU"] == pytest.approx(n_nt / EXPECTED["testA"]["n"])


def run_precomputed_vlm(tmp, root, url):
    from hydra import compose, initialize_config_dir

    import run_bench  # noqa: F401
    from rvt_bench.harness.runner import run

    sam2 = ["model.sam2._target_=rvt_bench.adapters.twin.backends.sam2_hf.Sam2HFBackend.tiny", "~model.sam2.model_id",
            "~model.sam2.revision", "model.sam2.device=cpu"]
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[
            "+dataset=grefcoco", "+model=vlm", "dataset.split=testA", f"dataset.root={root}", "model.model=tiny-vlm",
            f"model.base_url={url}", *sam2, f"run.root={tmp / 'vlm_runs'}", f"leaderboard.dir={tmp / 'vlm_boards'}"])
    return run(cfg)


def contract_samples(rng, node):
    """Synthetic gRefCOCO samples for tests/test_protocol_contract.py: every third one names no
    object (an empty GT, meta no_target), the rest one image mask each."""
    from tests.contract_samples import image_samples

    out = []
    for i, s in enumerate(image_samples(rng, n=9)):
        h, w = masks.decode(s.target.masks[0]).shape
        nt = i % 3 == 0
        target = replace(s.target, masks=[masks.empty(h, w)]) if nt else s.target
        out.append(replace(s, target=target, meta={"no_target": nt, "eval_size": [h, w], "height": h, "width": w,
                                                    "ref_index": i, "sent_index": 0}))
    return out


def test_outside_a_run_auto_never_picks_the_keyless_index_layout_for_another_benchmarks_sample(fixture, tmp_path):
    from rvt_bench.core.types import Sample, Target

    _, _, pred = fixture
    sample = Sample(id="x", dataset="other", split="val", modality="image", frames=["x.jpg"], frame_ids=["x"],
                    query="q", task="segmentation", target=Target(masks=[None]), meta={"unknown_key": 1})
    with pytest.raises(AdapterError, match="cannot choose a PNG layout"):
        PrecomputedAdapter(pred, layout="auto").predict(sample)


def test_the_image_size_variant_scores_image_size_masks_against_the_unscaled_polygons(fixture):
    _, root, _ = fixture
    protocol = GRefCOCOProtocol()
    for s in GRefCOCODataset(root, "val", image_size=None):
        assert "eval_gt" not in s.meta
        gt = masks.decode(s.target.masks[0]).astype(bool)
        record = protocol.score(s, Prediction(s.id, task="segmentation", masks=[masks.encode(gt)]))
        v = record.values["grefcoco"]
        assert (v.I, v.U) == ((0, 0) if s.meta["no_target"] else (int(gt.sum()), int(gt.sum())))
