"""Ref-DAVIS17 scored by ReferFormer's protocol (+dataset=ref_davis17_referformer:
rvt_bench.loaders.ref_davis17_referformer, metrics/protocols/ref_davis17_referformer.py) on a
fixture in its exact layouts (tests/data/ref_davis17_parity/make_fixture_referformer.py,
regenerated into tmp_path).

Parity: tests/data/ref_davis17_parity/expected_referformer.json is what
davisvideochallenge/davis2017-evaluation@ac7c43fc's `evaluation_method.py --task unsupervised`
printed on each annotator folder of that fixture, and its DAVISEvaluation's unrounded values
(tests/data/ref_davis17_parity/run_davis2017.py); the run must reproduce them to 1e-9.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rvt_bench.adapters.precomputed import PrecomputedAdapter
from rvt_bench.core import masks
from rvt_bench.core.types import AdapterError, InstanceAnnotation, Prediction, Target
from rvt_bench.loaders.ref_davis17_referformer import RefDAVIS17ReferFormerDataset
from rvt_bench.metrics.protocols.ref_davis17_referformer import RefDAVIS17ReferFormerProtocol
from tests.precomputed_runs import load_script, run_precomputed

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "ref_davis17_parity"
EXPECTED = json.loads((DATA / "expected_referformer.json").read_text())
TOL = 1e-9


def _module():
    return load_script(DATA / "make_fixture_referformer.py", "ref_davis17_make_fixture_referformer")


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    module = _module()
    tmp = tmp_path_factory.mktemp("ref_davis17_referformer")
    root, pred = module.write_fixture(tmp)
    return tmp, root, pred, module


def _run(tmp, root, pred, *extra):
    return run_precomputed("ref_davis17_referformer", tmp, root, pred, *extra)


@pytest.fixture(scope="module")
def default_run(fixture):
    tmp, root, pred, _ = fixture
    return _run(tmp, root, pred / "valid")  # model.root = ReferFormer's <output_dir>/valid


def _score(root, pred):
    """(protocol, records) of the fixture read by the precomputed adapter, failures as the runner records them."""
    ds, adapter, protocol = (RefDAVIS17ReferFormerDataset(root), PrecomputedAdapter(pred, layout="ref_davis17_referformer"),
                             RefDAVIS17ReferFormerProtocol())
    records = []
    for sample in ds:
        try:
            prediction = adapter.predict(sample)
        except AdapterError as exc:
            prediction = Prediction.failure(sample.id, exc.kind, str(exc))
        records.append(protocol.score_or_fail(sample, prediction)[0])
    return protocol, records


def test_the_run_reproduces_davis2017_evaluation_per_annotator_and_averaged(default_run):
    metrics = default_run.metrics
    for key in ("J", "F", "J&F"):
        assert abs(metrics["metrics"][key] - EXPECTED["mean_of_annotators"][key]) <= TOL, key
    for anno, ref in EXPECTED["unrounded"].items():
        ours = metrics["breakdown"]["annotator"][anno]
        assert abs(ours["J"] - ref["J-Mean"]) <= TOL and abs(ours["F"] - ref["F-Mean"]) <= TOL
        assert abs(ours["J&F"] - ref["J&F-Mean"]) <= TOL
        assert {k: round(ours[m], 3) for k, m in (("J&F-Mean", "J&F"), ("J-Mean", "J"), ("F-Mean", "F"))} \
            == EXPECTED["printed"][anno]  # what its CSV holds (3 decimals)
        assert ours["n"] == len(ref["objects"])
    assert metrics["failures"] == 0 and metrics["warnings"] == []


def test_every_matched_object_equals_davis2017s_in_its_order(fixture):
    _, root, pred, _ = fixture
    protocol, records = _score(root, pred / "valid")
    for anno, videos in protocol.matched(records).items():
        ours = [(video, j, f) for video, _, pairs in videos for j, f in pairs]
        ref = EXPECTED["unrounded"][anno]["objects"]
        assert len(ours) == len(ref)
        for (video, j, f), (name, rj, rf) in zip(ours, ref):
            assert name.rsplit("_", 1)[0] == video and abs(j - rj) <= TOL and abs(f - rf) <= TOL, (anno, name)


def test_referformers_numbering_and_davis2017s_gt_objects(fixture):
    _, root, _, module = fixture
    ds = RefDAVIS17ReferFormerDataset(root)
    assert len(ds) == 4 * sum(v[4] for v in module.VIDEOS.values()) and ds.errors == []
    by_id = {s.id: s for s in ds}
    s = by_id["cows/5"]  # expression obj * 4 + k: object 2 of annotator set anno_1
    assert (s.meta["annotator"], s.meta["object"], s.meta["objects"]) == (1, 2, 2)
    # cows: ids 1..3 in the first frame (2 absent from it: still an object), 4 appears later: not one
    assert [a.id for a in s.annotations] == ["1", "2", "3"]
    assert s.annotations[1].masks[0] is None and s.annotations[1].masks[1] is not None
    assert s.target.ignore[1] is not None and s.target.ignore[0] is None  # the void band of odd frames


def test_a_plain_gray_label_map_scores_as_the_palette_one(fixture, tmp_path):
    _, root, pred, _ = fixture
    gray = tmp_path / "gray"
    for path in sorted((pred / "valid").rglob("*.png")):
        out = gray / path.relative_to(pred / "valid")
        out.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.array(Image.open(path))).save(out)  # mode L: the label values themselves
    protocol, records = _score(root, gray)
    assert abs(protocol.aggregate(records)["metrics"]["J&F"] - EXPECTED["mean_of_annotators"]["J&F"]) <= TOL


def test_a_missing_folder_fails_its_expressions_only_and_is_named(fixture, tmp_path):
    _, root, pred, _ = fixture
    copy = tmp_path / "pred"
    shutil.copytree(pred / "valid", copy)
    shutil.rmtree(copy / "anno_0" / "dogs-jump")
    protocol, records = _score(root, copy)
    body = protocol.aggregate(records)
    failed = sorted(r.sample_id for r in records if r.failed)
    assert failed == ["dogs-jump/0", "dogs-jump/4", "dogs-jump/8"]
    assert any(all(f in w for f in failed) for w in body["warnings"])
    assert body["breakdown"]["annotator"]["anno_1"]["J"] == pytest.approx(EXPECTED["unrounded"]["anno_1"]["J-Mean"], abs=TOL)


def test_a_foreign_gray_value_fails_one_expression_with_the_reason(fixture, tmp_path):
    _, root, pred, _ = fixture
    copy = tmp_path / "pred"
    shutil.copytree(pred / "valid", copy)
    frame = copy / "anno_2" / "bike-packing" / "00001.png"
    Image.fromarray(np.full(np.array(Image.open(frame)).shape, 200, np.uint8)).save(frame)
    _, records = _score(root, copy)
    failed = [r for r in records if r.failed]
    assert sorted(r.sample_id for r in failed) == ["bike-packing/2", "bike-packing/6"]


def _gt_copy(root, tmp_path, edit_meta=None):
    """A copy of the fixture's root (meta edited by `edit_meta(meta)` when given)."""
    copy = tmp_path / "root"
    shutil.copytree(root, copy)
    if edit_meta is not None:
        path = copy / "meta_expressions" / "valid" / "meta_expressions.json"
        meta = json.loads(path.read_text())
        edit_meta(meta)
        path.write_text(json.dumps(meta))
    return copy


def _expressions(meta, video):
    return [f"{video}/{e}" for e in meta["videos"][video]["expressions"]]


def test_a_gt_png_that_is_a_fifo_fails_its_video_without_hanging(fixture, tmp_path):
    from tests.test_corrupt_files import fifo_at

    _, root, _, _ = fixture
    copy = _gt_copy(root, tmp_path)
    frame = copy / "valid" / "Annotations" / "cows" / "00001.png"
    frame.unlink()
    with fifo_at(frame):
        ds = RefDAVIS17ReferFormerDataset(copy)
    meta = json.loads((copy / "meta_expressions" / "valid" / "meta_expressions.json").read_text())
    assert sorted(e["sample_id"] for e in ds.errors) == sorted(_expressions(meta, "cows"))
    assert all("is not a regular file (a FIFO); refused" in e["message"] for e in ds.errors)
    assert {s.meta["video"] for s in ds} == {"bike-packing", "dogs-jump"}


def test_a_gt_png_over_the_pixel_limit_is_refused_before_any_decode(fixture):
    from rvt_bench.core import files

    _, root, _, _ = fixture
    with files.limits_in_force(files.ReadLimits(max_image_pixels=700)):  # bike-packing's frames are 24 x 32
        ds = RefDAVIS17ReferFormerDataset(root)
    assert {e["sample_id"].split("/")[0] for e in ds.errors} == {"bike-packing"}
    assert all("32 x 24 = 768 pixels, which exceeds the limit of 700 (dataset.limits.max_image_pixels); not decoded"
               in e["message"] for e in ds.errors)


def test_a_png_over_pils_own_limit_is_a_data_error_not_an_uncaught_decompression_bomb(tmp_path):
    """With dataset.limits.max_image_pixels above PIL's refusal (2 x Image.MAX_IMAGE_PIXELS), PIL's
    DecompressionBombError is the file's data error (it stopped the run)."""
    from rvt_bench.core import files
    from rvt_bench.core.types import DatasetFormatError

    path = tmp_path / "bomb.png"
    from tests.test_guarded_reads import blank_png

    path.write_bytes(blank_png(14_000, 14_000))  # 196M pixels, 20 KB
    with files.limits_in_force(files.ReadLimits(max_image_pixels=1 << 28)), \
            pytest.raises(DatasetFormatError, match="bomb.png is not a readable image: .*decompression bomb"):
        files.read_image(path, "GT PNG")


def test_a_gt_png_listed_many_times_is_decoded_once(fixture, tmp_path, monkeypatch):
    """A frame listed 20 times (a 172 KB PNG so listed decoded to 4.1 GB) is one file: read once, its
    masks shared; the expression still has the 20 frames the meta lists."""
    from rvt_bench.loaders import ref_davis17_referformer as module

    _, root, _, _ = fixture

    def repeat(meta):
        meta["videos"]["cows"]["frames"] = ["00000"] + ["00001"] * 20

    copy = _gt_copy(root, tmp_path, repeat)
    reads = []
    real = module.read_label_png
    monkeypatch.setattr(module, "read_label_png", lambda path: reads.append(f"{path.parent.name}/{path.name}") or real(path))
    ds = RefDAVIS17ReferFormerDataset(copy)
    assert ds.errors == [] and reads.count("cows/00001.png") == 1
    cows = next(s for s in ds if s.meta["video"] == "cows")
    assert cows.num_frames == 21 and len(set(map(str, cows.target.ignore[1:]))) == 1


def test_a_16_bit_first_frame_with_a_label_above_254_fails_its_video(fixture, tmp_path):
    """A label 60000 would be 60000 GT objects (davis2017 builds objects x frames x pixels masks)."""
    _, root, _, _ = fixture
    copy = _gt_copy(root, tmp_path)
    frame = copy / "valid" / "Annotations" / "cows" / "00000.png"
    Image.fromarray(np.full(np.array(Image.open(frame)).shape, 60000, np.uint16)).save(frame)
    ds = RefDAVIS17ReferFormerDataset(copy)
    assert {e["sample_id"].split("/")[0] for e in ds.errors} == {"cows"}
    assert all("the first frame holds label 60000; DAVIS label maps are 8-bit" in e["message"] for e in ds.errors)


@pytest.mark.parametrize("where, name, says", [
    ("video", "../valid/Annotations/cows", "leaves"), ("video", "/etc", "must be a relative path"),
    ("frame", "../../../meta_expressions/valid/x", "leaves"), ("frame", "/etc/passwd", "must be a relative path")])
def test_a_video_or_frame_name_out_of_its_folder_fails_that_video(fixture, tmp_path, where, name, says):
    _, root, _, _ = fixture

    def hostile(meta):
        if where == "video":
            meta["videos"][name] = meta["videos"].pop("cows")
        else:
            meta["videos"]["cows"]["frames"][1] = name

    copy = _gt_copy(root, tmp_path, hostile)
    ds = RefDAVIS17ReferFormerDataset(copy)
    video = name if where == "video" else "cows"
    assert {e["sample_id"].rsplit("/", 1)[0] for e in ds.errors} == {video}
    assert all(f"name {name!r}"[:-1] in e["message"] and says in e["message"] for e in ds.errors)
    assert {s.meta["video"] for s in ds} == {"bike-packing", "dogs-jump"}


def contract_samples(rng, node):
    """Synthetic samples of this benchmark's format for tests/test_protocol_contract.py: per video
    2 GT objects, void in some frames, 4 annotator sets x 2 expression objects."""
    from tests.contract_samples import H, W, rand_mask, video

    out = []
    for v in range(3):
        frames = 3
        objects = [[rand_mask(rng) for _ in range(frames)] for _ in range(2)]
        void = [masks.encode(np.pad(np.ones((1, W), bool), ((0, H - 1), (0, 0)))) if t == 1 else None for t in range(frames)]
        for obj in range(2):
            for anno in range(4):
                exp_id = str(obj * 4 + anno)
                s = video(f"v{v}/{exp_id}", frames, "segmentation", Target(masks=list(objects[obj]), ignore=void),
                          {"video": f"v{v}", "exp_id": exp_id, "annotator": anno, "object": obj + 1, "objects": 2,
                           "obj_id": str(obj + 1)})
                out.append(replace(s, annotations=[InstanceAnnotation(str(g + 1), "", list(m)) for g, m in enumerate(objects)]))
    return out


def test_the_empty_prediction_baseline_is_the_score_of_empty_proposals_and_n_counts_gt_objects(default_run, fixture, tmp_path):
    """The summary's "empty pred." column was blank for this protocol, and its n counted expressions
    while J, F and J&F are means over GT objects per annotator set. baseline_empty is now what the
    protocol gives when every proposal is empty (an empty prediction folder scored), and the n column
    counts the GT objects the means are over, saying so."""
    from rvt_bench.harness.summary import format_summary

    _, root, _, _ = fixture
    body = default_run.metrics
    empty = tmp_path / "empty"
    empty.mkdir()
    protocol, records = _score(root, empty)  # every expression fails: an empty proposal, as the protocol says
    assert all(r.failed for r in records)
    expected = protocol.aggregate(records)["metrics"]
    assert set(body["baseline_empty"]) == {"J&F", "J", "F"}
    for key in ("J&F", "J", "F"):
        assert body["baseline_empty"][key] == pytest.approx(expected[key], abs=1e-12) and 0 < expected[key] < body["metrics"][key]
    objects = sum(v["n"] for v in body["breakdown"]["annotator"].values())
    assert body["averages"] == {"metrics": ["J&F", "J", "F"], "n": objects,
                                "of": f"GT objects (7 in each of 4 annotator sets), not the {body['n']} expressions scored"}
    lines = format_summary(default_run).splitlines()
    row = next(line for line in lines if line.startswith("  J&F "))
    assert row.split()[-3:] == [f"{100 * body['baseline_empty']['J&F']:.2f}", "%", str(objects)]
    assert f"  n of J&F, J, F: {objects} GT objects (7 in each of 4 annotator sets), not the 28 expressions scored" in lines
    # fewer expressions than objects (an object's expression left out of anno_0): n falls, the objects stay
    _, scored = _score(root, fixture[2] / "valid")
    fewer = [r for r in scored if r.sample_id != "cows/0"]
    averages = protocol.aggregate(fewer)["averages"]
    assert len(fewer) == 27 and averages["n"] == 28 and averages["of"].endswith("not the 27 expressions scored")
