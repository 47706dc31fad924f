"""RefCOCO / RefCOCO+ / RefCOCOg as LISA validates them (rvt_bench.loaders.refcoco,
metrics/protocols/refcoco.py), on a fixture in the exact REFER layout
(tests/data/refcoco_parity/make_fixture.py, regenerated into tmp_path).

Parity: tests/data/refcoco_parity/expected_lisa.json is what LISA@3cb2d43's own ValDataset +
validate gave on that fixture (tests/data/refcoco_parity/run_lisa.py). gIoU and cIoU are identical
(float32 values widened): gIoU is accumulated image by image in LISA's image order.
"""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from rvt_bench.adapters.precomputed import PrecomputedAdapter
from rvt_bench.core.types import DatasetFormatError
from rvt_bench.harness.runner import run
from rvt_bench.loaders.refcoco import IMAGE_DIR, RefCOCODataset, lisa_gt, parse_split
from rvt_bench.metrics.protocols.refcoco import RefCOCOProtocol
from tests.precomputed_runs import load_script, run_precomputed

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "refcoco_parity"
EXPECTED = json.loads((DATA / "expected_lisa.json").read_text())["splits"]
OURS = {"refcoco|unc|val": "refcoco/val", "refcoco|unc|testA": "refcoco/testA", "refcoco|unc|testB": "refcoco/testB",
        "refcoco+|unc|val": "refcoco+/val", "refcoco+|unc|testA": "refcoco+/testA", "refcoco+|unc|testB": "refcoco+/testB",
        "refcocog|umd|val": "refcocog/val", "refcocog|umd|test": "refcocog/test",
        "refcocog|google|val": "refcocog/google/val", "refcoco|google|test": "refcoco/google/test"}


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    module = load_script(DATA / "make_fixture.py", "refcoco_make_fixture")
    tmp = tmp_path_factory.mktemp("refcoco")
    root, pred = module.write_fixture(tmp)
    return tmp, root, pred


def _run(tmp, root, pred, split, *extra):
    return run_precomputed("refcoco", tmp, root, pred, f"dataset.split={split}", *extra).metrics


def _adapter(pred):
    return PrecomputedAdapter(pred, layout="refcoco")  # conf/dataset/refcoco.yaml `predictions`


def _close_to_lisa(metrics, want):
    assert metrics["n"] == want["n_sentences"]
    assert metrics["metrics"]["cIoU"] == want["ciou"]
    assert metrics["metrics"]["gIoU"] == want["giou"]  # LISA's per-image float32 accumulation, in its image order


@pytest.mark.parametrize("lisa_split", sorted(EXPECTED))
def test_every_split_gives_lisas_printed_giou_and_ciou(fixture, lisa_split):
    _, root, pred = fixture
    ds = RefCOCODataset(root, OURS[lisa_split])
    adapter, protocol = _adapter(pred), RefCOCOProtocol()
    records = [protocol.score(s, adapter.predict(s)) for s in ds]
    _close_to_lisa(protocol.aggregate(records), EXPECTED[lisa_split])


@pytest.mark.parametrize("lisa_split", ["refcocog|google|val"])  # the suite test runs the other splits
def test_a_whole_run_from_the_config_gives_lisas_numbers(fixture, lisa_split):
    tmp, root, pred = fixture
    metrics = _run(tmp, root, pred, OURS[lisa_split])
    assert metrics["failures"] == 0 and metrics["protocol"] == "refcoco"
    _close_to_lisa(metrics, EXPECTED[lisa_split])


def test_union_gt_is_a_named_variant_that_moves_the_numbers(fixture):
    # the fixture has overlapping polygons: LISA's sum makes them 2 (neither object nor background)
    tmp, root, pred = fixture
    changed = 0
    for lisa_split, split in OURS.items():
        summed = RefCOCODataset(root, split)
        union = RefCOCODataset(root, split, gt="union")
        assert [s.id for s in summed] == [s.id for s in union]
        changed += sum(a.target.masks != b.target.masks for a, b in zip(summed, union))
    assert changed > 0
    metrics = _run(tmp, root, pred, "refcoco+/val", "dataset.loader.gt=union")
    assert metrics["metrics"]["cIoU"] != EXPECTED["refcoco+|unc|val"]["ciou"]


def test_every_sentence_of_every_ref_in_the_split(fixture):
    _, root, _ = fixture
    refs = pickle.loads((root / "refcocog" / "refs(umd).p").read_bytes())
    test_sents = [s for r in refs if "test" in r["split"] for s in r["sentences"]]
    ds = RefCOCODataset(root, "refcocog/test")
    assert sorted(s.id for s in ds) == sorted(str(s["sent_id"]) for s in test_sents)
    by_id = {str(s["sent_id"]): s["sent"] for s in test_sents}
    assert all(s.query == by_id[s.id].strip().lower() for s in ds)
    assert all(s.meta["is_sentence"] is False and str(s.meta["sent_id"]) == s.id for s in ds)


def test_summed_gt_counts_only_value_one_and_ignores_255():
    square = [0, 0, 6, 0, 6, 6, 0, 6]
    target, ignore = lisa_gt([square, [3, 3, 9, 3, 9, 9, 3, 9]], 10, 10)
    union, none = lisa_gt([square, [3, 3, 9, 3, 9, 9, 3, 9]], 10, 10, "union")
    assert none is None and ignore is None
    assert union.sum() > target.sum() and not (target & ~union).any()
    overlap = union & ~target
    assert overlap.sum() > 0  # covered twice: LISA's value 2
    one, _ = lisa_gt([square], 10, 10, "union")
    target, ignore = lisa_gt([square] * 255, 10, 10)
    assert not target.any() and (ignore == one).all()  # 255 polygons sum to LISA's ignore label
    empty, _ = lisa_gt([], 4, 5)
    assert empty.shape == (4, 5) and not empty.any()


@pytest.mark.parametrize("split", ["refcoco", "refcoco/trainval", "refcocox/val", "refcoco/../val", "a/b/c/d"])
def test_an_unknown_split_name_is_one_line_naming_the_forms(split):
    with pytest.raises(DatasetFormatError, match="refcoco/testA.*refcocog/google/val"):
        parse_split(split)


def test_split_names():
    assert parse_split("refcoco+/testA") == ("refcoco+", "unc", "testA")
    assert parse_split("refcocog/test") == ("refcocog", "umd", "test")
    assert parse_split("refcocog/google/val") == ("refcocog", "google", "val")


def test_a_refs_pickle_that_runs_code_is_refused_and_runs_nothing(fixture, tmp_path):
    _, root, _ = fixture
    marker = tmp_path / "marker"

    class Touch:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    bad = tmp_path / "refer_seg"
    (bad / "refcoco").mkdir(parents=True)
    (bad / "refcoco" / "instances.json").write_text((root / "refcoco" / "instances.json").read_text())
    (bad / "refcoco" / "refs(unc).p").write_bytes(pickle.dumps([{"split": "val", "x": Touch()}], protocol=2))
    with pytest.raises(DatasetFormatError, match=r"refs\(unc\)\.p: not a plain-data pickle") as err:
        RefCOCODataset(bad, "refcoco/val")
    assert "\n" not in str(err.value) and not marker.exists()


def test_a_bad_ref_is_a_data_error_for_each_of_its_sentences(fixture, tmp_path):
    _, root, _ = fixture
    import shutil

    copy = tmp_path / "refer_seg"
    shutil.copytree(root, copy)
    path = copy / "refcoco" / "refs(unc).p"
    refs = pickle.loads(path.read_bytes())
    victim = next(r for r in refs if r["split"] == "testB")
    victim["ann_id"] = 10 ** 9
    path.write_bytes(pickle.dumps(refs, protocol=2))
    ds = RefCOCODataset(copy, "refcoco/testB")
    assert sorted(e["sample_id"] for e in ds.errors) == sorted(str(s["sent_id"]) for s in victim["sentences"])
    assert all("annotation 1000000000 is not in instances.json" in e["message"] for e in ds.errors)
    assert len(ds) == EXPECTED["refcoco|unc|testB"]["n_sentences"] - len(victim["sentences"])


def test_the_hub_copy_is_refused_with_one_line_naming_the_variant_before_anything_is_downloaded(monkeypatch):
    from omegaconf import OmegaConf

    from rvt_bench.loaders import hub

    monkeypatch.setattr(hub, "resolve_revision", lambda *a: pytest.fail("the hub was asked"))
    node = OmegaConf.load(REPO / "conf" / "dataset" / "refcoco.yaml")
    node.hf_dataset = "lmms-lab/RefCOCO"
    for refuse in (lambda: hub.pin(node), lambda: RefCOCODataset(None, "refcoco/val", hf_dataset="lmms-lab/RefCOCO")):
        with pytest.raises(DatasetFormatError, match=r"not read as LISA's protocol.*REFER layout.*refs\(<splitBy>\).*"
                                                     r"named variant dataset\.loader\.gt=hub_polygon") as err:
            refuse()
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("split, says", [
    ("refcoco/val", r"val split is refused: its rows \(val 8811, test 5000\) do not match RefCOCO's refs"),
    ("refcoco/test", r"test split is refused: its rows .* do not match RefCOCO's refs"),
    ("refcoco+/testA", r"holds RefCOCO \(unc\) only, not refcoco\+"),
    ("refcoco/google/test", r"holds RefCOCO \(unc\) only"),
])
def test_the_hub_variant_reads_testa_and_testb_only_and_refuses_before_anything_is_downloaded(monkeypatch, split, says):
    from omegaconf import OmegaConf

    from rvt_bench.loaders import hub

    monkeypatch.setattr(hub, "resolve_revision", lambda *a: pytest.fail("the hub was asked"))
    node = OmegaConf.load(REPO / "conf" / "dataset" / "refcoco.yaml")
    node.hf_dataset, node.split, node.loader.gt = "lmms-lab/RefCOCO", split, "hub_polygon"
    for refuse in (lambda: hub.pin(node),
                   lambda: RefCOCODataset(None, split, gt="hub_polygon", hf_dataset="lmms-lab/RefCOCO")):
        with pytest.raises(DatasetFormatError, match=says) as err:
            refuse()
        assert "\n" not in str(err.value)
    with pytest.raises(DatasetFormatError, match=r"gt=hub_polygon reads the hub copy: set dataset.hf_dataset"):
        RefCOCODataset(None, "refcoco/testA", gt="hub_polygon")


@pytest.fixture(scope="module")
def lmms_hub(fixture):
    """lmms-lab/RefCOCO's testA and testB in the hub's exact format (tests/hub_fixtures.py), made from
    the REFER fixture, as a repository folder and in a Hugging Face cache under its hub id."""
    from tests import hub_fixtures as fx

    tmp, root, _ = fixture
    repo = fx.lmms_refcoco_repo(root, tmp / "lmms_refcoco")
    fx.hub_cache(tmp / "hf_cache", "lmms-lab/RefCOCO", repo)
    return repo


def _hub_rows(repo, sub):
    import pyarrow.parquet as pq

    return pq.read_table(repo / "data" / f"{sub}-00000-of-00001.parquet").to_pylist()


def test_the_lmms_fixture_is_what_datasets_reads_from_the_hub_copy(lmms_hub):
    # the features of lmms-lab/RefCOCO's card (revision a5dff0b3194715fda69b2d6a0d2aaafb41eaa407)
    import datasets
    from datasets import Features, Image, Sequence, Value

    card = Features({"question_id": Value("string"), "image": Image(), "question": Value("string"),
                     "answer": Sequence(Value("string")), "segmentation": Sequence(Value("float32")),
                     "bbox": Sequence(Value("float32")), "iscrowd": Value("int8"), "file_name": Value("string")})
    for sub in ("testA", "testB"):
        ds = datasets.load_dataset(str(lmms_hub), split=sub)
        assert ds.features == card and ds.column_names == list(card)
        assert ds[0]["image"].size[0] > 0 and len(ds[0]["segmentation"]) % 2 == 0


def test_the_hub_variant_reads_every_sentence_of_every_row_with_its_one_polygon(fixture, lmms_hub, monkeypatch):
    from pycocotools import mask as coco_mask

    from rvt_bench.core.masks import decode
    from rvt_bench.loaders import refcoco_hub
    from tests import hub_fixtures as fx

    monkeypatch.setenv("HF_HOME", str(fixture[0] / "hf_home"))
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HOME", str(fixture[0] / "hf_home"))
    _, root, _ = fixture
    several = 0
    for sub in ("testA", "testB"):
        ds = RefCOCODataset(None, f"refcoco/{sub}", gt="hub_polygon", hf_dataset=str(lmms_hub))
        rows = {r["question_id"]: r for r in _hub_rows(lmms_hub, sub)}
        assert sorted(s.id for s in ds) == sorted(f"{q}_{j}" for q, r in rows.items() for j in range(len(r["answer"])))
        assert fx.LMMS_EXTRA_ID in {s.meta["question_id"] for s in ds}  # a row is read whether or not REFER has it
        for s in ds:
            row = rows[s.meta["question_id"]]
            h, w = decode(s.target.masks[0]).shape
            want = coco_mask.decode(coco_mask.frPyObjects([row["segmentation"]], h, w))[:, :, 0].astype(bool)
            assert s.query == row["answer"][s.meta["sent_index"]].strip().lower() and s.meta["sent_id"] == s.id
            assert np.array_equal(decode(s.target.masks[0]), want) and want.any() and s.target.ignore == [None]
        several += sum(len(r["answer"]) > 1 for r in rows.values())
        # the rows' one polygon is not LISA's GT of the same ref (the fixture's annotations have 2-3 polygons)
        lisa = {str(s.meta["ann_id"]): s for s in RefCOCODataset(root, f"refcoco/{sub}")}
        assert any(lisa[s.meta["ann_id"]].target.masks != s.target.masks for s in ds if s.meta["ann_id"] in lisa)
        assert ds.data_source["format"] == "lmms-parquet" and ds.data_source["official"] is False
        assert ds.data_source["label"] == refcoco_hub.LABEL
        assert len(ds.warnings) == 1 and "NOT LISA's protocol" in ds.warnings[0] and "\n" not in ds.warnings[0]
    assert several > 0


def test_a_hub_variant_run_from_the_config_scores_the_refcoco_protocol_and_says_it_is_not_lisas(
        fixture, lmms_hub, monkeypatch):
    import huggingface_hub.constants as constants
    from PIL import Image

    from rvt_bench.core.masks import decode
    from tests import hub_fixtures as fx

    tmp, root, _ = fixture
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp / "hf_cache"))
    monkeypatch.setattr(constants, "HF_HOME", str(tmp / "hf_home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ds = RefCOCODataset(None, "refcoco/testB", gt="hub_polygon", hf_dataset="lmms-lab/RefCOCO")
    pred = tmp / "hub_pred"
    pred.mkdir()
    for k, s in enumerate(ds):  # perfect, empty, or the GT shifted one pixel
        m = decode(s.target.masks[0])
        m = m if k % 3 == 0 else np.zeros_like(m) if k % 3 == 1 else np.roll(m, 1, 1)
        Image.fromarray(m.astype(np.uint8)).save(pred / f"{s.id}.png")
    adapter, protocol = _adapter(pred), RefCOCOProtocol()
    want = protocol.aggregate([protocol.score(s, adapter.predict(s)) for s in ds])["metrics"]
    result = run_precomputed("refcoco", tmp / "hub_run", root, pred, "dataset.split=refcoco/testB",
                             "dataset.hf_dataset=lmms-lab/RefCOCO", "dataset.loader.gt=hub_polygon", "run.report=false")
    metrics = result.metrics
    assert metrics["failures"] == 0 and metrics["n"] == len(ds) and metrics["protocol"] == "refcoco"
    assert metrics["metrics"]["cIoU"] == want["cIoU"] and metrics["metrics"]["gIoU"] == want["gIoU"]
    assert 0 < want["cIoU"] < 1
    assert metrics["data_source"]["revision"] == fx.SHA and metrics["data_source"]["label"] == "lmms-lab hub copy, one polygon"
    assert len(metrics["warnings"]) == 1 and "NOT LISA's protocol" in metrics["warnings"][0]
    assert "hf_revision: " + fx.SHA in (result.run_dir / "config.yaml").read_text()  # pinned before the fingerprint
    # marked not comparable in the paper table beside the published rows, in markdown and LaTeX
    from rvt_bench.leaderboards.paper import paper_rows
    from rvt_bench.leaderboards.tables import NOT_COMPARABLE, paper_table

    marked = metrics["not_comparable"]
    assert {"cIoU", "gIoU"} <= set(marked) and all("dataset.loader.gt=hub_polygon" in why for why in marked.values())
    assert metrics["data_source"]["not_comparable"] == marked["cIoU"]
    md = paper_table(metrics, "markdown", paper_rows("refcoco"))
    run_line = next(line for line in md.splitlines() if line.startswith("| precomputed"))
    assert NOT_COMPARABLE in run_line and "cIoU: dataset.loader.gt=hub_polygon" in md
    tex = paper_table(metrics, "latex", paper_rows("refcoco"))
    assert "$^\\ddagger$" in tex and "cIoU: dataset.loader.gt=hub\\_polygon" in tex
    lisa = _run(tmp / "lisa_run", root, fixture[2], "refcoco/testB", "run.report=false")
    assert "not_comparable" not in lisa and NOT_COMPARABLE not in paper_table(lisa, "markdown", paper_rows("refcoco"))


def test_the_measurement_script_counts_the_refs_on_each_side_and_scores_the_hub_mask_on_lisas_gt(
        fixture, lmms_hub, monkeypatch):
    # perf/measure_hub_refcoco.py on the fixtures: testB's RLE annotation has no hub row, the extra
    # row is no REFER ref; the hub's one polygon of 2-3 is not LISA's GT, so a prediction perfect on
    # the hub is not perfect on LISA's GT
    import huggingface_hub.constants as constants

    from tests import hub_fixtures as fx

    tmp, root, _ = fixture
    monkeypatch.setattr(constants, "HF_HOME", str(tmp / "hf_home"))
    measure = load_script(REPO / "perf" / "measure_hub_refcoco.py", "measure_hub_refcoco").measure
    rows = _hub_rows(lmms_hub, "testB")
    figures = measure(str(root), str(lmms_hub), None, "testB")
    lisa = RefCOCODataset(root, "refcoco/testB")
    assert figures["lisa_refs"] == len({s.meta["ref_id"] for s in lisa}) and figures["lisa_sentences"] == len(lisa)
    assert figures["hub_refs"] == len(rows) and figures["hub_sentences"] == sum(len(r["answer"]) for r in rows)
    assert figures["missing_on_hub"] == 1 and figures["missing_in_lisa"] == 1  # the RLE ref; fx.LMMS_EXTRA_ID
    assert figures["matched"] == len(rows) - 1 and figures["sentences_differ"] == 0 and figures["hub_shared_ids"] == 0
    assert figures["iou_below_1"] == figures["matched"] and 0 < figures["iou_min"] <= figures["iou_mean"] < 1
    assert figures["perfect_n"] == figures["lisa_sentences"] - 1 and 0 < figures["perfect_ciou"] < 1
    assert fx.LMMS_EXTRA_ID in {r["question_id"] for r in rows}


def test_the_referring_seg_suite_runs_lisas_eight_columns_in_one_table(fixture):
    # +suite=referring_seg composed as main.py does; every split of LISA's Table 2 is its own run
    from omegaconf import OmegaConf

    from rvt_bench.harness.suite import format_suite, run_suite

    tmp, root, pred = fixture
    suite = OmegaConf.load(REPO / "conf" / "suite" / "referring_seg.yaml")
    suite.datasets.refcoco.root = str(root)
    # LISA's Table 2 is the suite's RefCOCO runs (its gRefCOCO and GSEval runs: tests/test_suites.py)
    suite.benchmarks = [b for b in suite.benchmarks if b.dataset == "refcoco"]
    user = ["+model=precomputed", f"model.root={pred}", f"run.root={tmp / 'suite_runs'}",
            f"leaderboard.dir={tmp / 'suite_boards'}", "run.bootstrap.B=20", "run.report=false"]
    import run_bench  # noqa: F401

    def compose_(overrides):
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            return compose("config", overrides=overrides)

    outcomes = run_suite(suite, user, compose_, run)
    lisa = {"refcoco/val": "refcoco|unc|val", "refcoco/testA": "refcoco|unc|testA", "refcoco/testB": "refcoco|unc|testB",
            "refcoco+/val": "refcoco+|unc|val", "refcoco+/testA": "refcoco+|unc|testA",
            "refcoco+/testB": "refcoco+|unc|testB", "refcocog/val": "refcocog|umd|val", "refcocog/test": "refcocog|umd|test"}
    assert [o.split for o in outcomes] == list(lisa) and not any(o.error for o in outcomes)
    for o in outcomes:
        _close_to_lisa(o.metrics, EXPECTED[lisa[o.split]])
    table = format_suite("referring_seg", outcomes)
    assert "8 of 8 benchmarks ran" in table and table.count("| refcoco | refcoco+/testB | cIoU |") == 1
    # and LISA's Table 2 (conf/dataset/refcoco.yaml `paper`): one line for the model, across its 8 runs
    head = next(line for line in table.splitlines() if line.startswith("| method |"))
    assert head.split(" | ")[1:9] == ["refCOCO val", "refCOCO testA", "refCOCO testB", "refCOCO+ val", "refCOCO+ testA",
                                      "refCOCO+ testB", "refCOCOg val(U)", "refCOCOg test(U)"]
    line = next(line for line in table.splitlines() if line.startswith("| precomputed |"))
    cells = [c.split(" [")[0] for c in line.split(" | ")[1:9]]
    assert cells == [f"{100 * EXPECTED[lisa[split]]['ciou']:.1f}" for split in lisa]


def test_a_corrupt_rle_segmentation_is_a_data_error_not_a_crash():
    with pytest.raises(DatasetFormatError, match="segmentation RLE: compressed .counts. .* corrupt"):
        lisa_gt([{"size": [4, 5], "counts": "0a"}], 4, 5)
    with pytest.raises(DatasetFormatError, match="differs from the frame size"):
        lisa_gt([{"size": [5, 4], "counts": [20]}], 4, 5)
    with pytest.raises(DatasetFormatError, match="at least 6"):
        lisa_gt([[1, 2, 3, 4]], 4, 5)


def test_sentence_by_sentence_giou_is_only_a_float32_rounding_from_lisas(fixture):
    # without the order keys the protocol falls back to ReasonSeg's sentence-wise sum: the fixture's
    # splits where that rounding differs show that the per-image accumulation is what makes gIoU exact
    from dataclasses import replace

    _, root, pred = fixture
    differs = 0
    for lisa_split, split in OURS.items():
        protocol, adapter = RefCOCOProtocol(), _adapter(pred)
        samples = [replace(s, meta={k: v for k, v in s.meta.items() if k != "ref_index"}) for s in RefCOCODataset(root, split)]
        giou = protocol.aggregate([protocol.score(s, adapter.predict(s)) for s in samples])["metrics"]["gIoU"]
        want = EXPECTED[lisa_split]
        assert abs(giou - want["giou"]) <= 4 * want["n_sentences"] * 2.0 ** -24
        differs += giou != want["giou"]
    assert differs > 0
def contract_samples(rng, node):
    """Synthetic samples of this benchmark's format for tests/test_protocol_contract.py."""
    from tests.contract_samples import image_samples

    return image_samples(rng)


# --- hostile data: one sample fails with a reason, the run goes on ------------------------------

def _hostile_hub(lmms_hub, tmp_path, monkeypatch, extra):
    """A copy of the hub fixture's testA with the rows `extra` (dicts of column overrides on a copy
    of its first row) appended; RefCOCODataset of it, HF_HOME under tmp_path."""
    import shutil

    import huggingface_hub.constants as constants
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setattr(constants, "HF_HOME", str(tmp_path / "hf_home"))
    repo = tmp_path / "hostile_hub"
    (repo / "data").mkdir(parents=True)
    shutil.copy(lmms_hub / "README.md", repo / "README.md")
    src = lmms_hub / "data" / "testA-00000-of-00001.parquet"
    table = pq.read_table(src)
    rows = table.to_pylist()
    rows += [{**rows[0], **e} for e in extra]
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), repo / "data" / src.name)
    return RefCOCODataset(None, "refcoco/testA", gt="hub_polygon", hf_dataset=str(repo)), rows


def _png(h, w, seed):
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8)).save(buf, "PNG")
    return buf.getvalue()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 1e7, 1e12, 1e30, -1e38])
def test_a_polygon_with_a_non_finite_or_far_coordinate_is_a_data_error_before_pycocotools(bad):
    # NaN / inf segfault pycocotools' frPyObjects and a far coordinate costs memory with its size
    # (1e7: ~830 MB, 1e12: killed); run in a child so that a regression fails this test, not the session
    import subprocess
    import sys

    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
            "from rvt_bench.loaders.refcoco import lisa_gt\nfrom rvt_bench.core.types import DatasetFormatError\n"
            f"try:\n    lisa_gt([[1.0, 1.0, 5.0, 1.0, 5.0, 5.0], [{bad!r}, 1.0, 5.0, 1.0, 5.0, 5.0]], 24, 32)\n"
            "except DatasetFormatError as exc:\n    print('DFE', exc)\n")
    code = code.replace("nan,", "float('nan'),").replace("inf,", "float('inf'),")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "OPENBLAS_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("DFE polygon 1 has ") and ("non-finite" in done.stdout or "outside" in done.stdout)


def test_coordinates_near_the_image_are_filled_as_before_and_the_bound_is_4x_the_larger_side():
    from pycocotools import mask as coco_mask

    from rvt_bench.loaders.refcoco import POLYGON_MARGIN, POLYGON_SPAN

    bound = POLYGON_SPAN * 32 + POLYGON_MARGIN
    for poly in ([-3.0, -2.5, 35.0, 1.0, 33.5, 26.0, 2.0, 25.0], [-bound, 1.0, 5.0, 1.0, 5.0, float(bound)]):
        target, _ = lisa_gt([poly], 24, 32)
        assert np.array_equal(target, coco_mask.decode(coco_mask.frPyObjects([poly], 24, 32))[:, :, 0] == 1)
    with pytest.raises(DatasetFormatError, match="outside the 24x32 image"):
        lisa_gt([[-bound - 0.5, 1.0, 5.0, 1.0, 5.0, 5.0]], 24, 32)


def _edited_copy(root, tmp_path, edit):
    """A copy of the REFER fixture whose instances.json `edit(inst, victim)` changed, victim being
    the first testB ref; (copy, victim)."""
    import shutil

    copy = tmp_path / "refer_seg"
    shutil.copytree(root, copy)
    refs = pickle.loads((copy / "refcoco" / "refs(unc).p").read_bytes())
    victim = next(r for r in refs if r["split"] == "testB")
    inst_path = copy / "refcoco" / "instances.json"
    inst = json.loads(inst_path.read_text())
    edit(inst, victim)
    inst_path.write_text(json.dumps(inst))
    return copy, victim


def test_a_far_polygon_in_instances_json_is_a_data_error_for_each_sentence_of_its_ref(fixture, tmp_path):
    _, root, _ = fixture

    def far(inst, victim):
        ann = next(a for a in inst["annotations"] if a["id"] == victim["ann_id"])
        ann["segmentation"] = [[1e5, 1.0, 5.0, 1.0, 5.0, 5.0]]  # NaN (json accepts it) would crash pycocotools outright

    copy, victim = _edited_copy(root, tmp_path, far)
    ds = RefCOCODataset(copy, "refcoco/testB")
    assert sorted(e["sample_id"] for e in ds.errors) == sorted(str(s["sent_id"]) for s in victim["sentences"])
    assert all(f"annotation {victim['ann_id']}: polygon 0 has the coordinate 100000" in e["message"] for e in ds.errors)
    assert len(ds) == EXPECTED["refcoco|unc|testB"]["n_sentences"] - len(victim["sentences"])


def test_hub_rows_with_unwritable_names_or_far_polygons_fail_their_samples_and_the_rest_load(
        lmms_hub, tmp_path, monkeypatch):
    bad = {"900": ".", "901": "..", "902": "x" * 300 + ".jpg", "903": "a\x00b.jpg"}
    extra = [{"question_id": q, "file_name": name, "image": {"bytes": _png(20, 30, int(q)), "path": None}}
             for q, name in bad.items()]
    extra.append({"question_id": "904", "file_name": "COCO_train2014_000000000904.jpg", "segmentation": [1e5, 1.0, 5.0, 1.0, 5.0, 5.0]})
    ds, rows = _hostile_hub(lmms_hub, tmp_path, monkeypatch, extra)
    failed = {e["sample_id"].split("_")[0]: e["message"] for e in ds.errors}
    assert set(failed) == {*bad, "904"}
    for q, message in failed.items():
        assert f"(question_id {q})" in message and "testA-00000-of-00001.parquet:" in message
    assert "cannot name an image file" in failed["900"] and "cannot name an image file" in failed["903"]
    assert "cannot be written" in failed["902"] and "outside the" in failed["904"]
    assert len(ds) == sum(len(r["answer"]) for r in rows[:-len(extra)])


def test_hub_rows_sharing_a_file_name_keep_their_own_image_bytes(lmms_hub, tmp_path, monkeypatch):
    from rvt_bench.core.frames import frame_size

    name = "COCO_train2014_000000999999.png"
    small, other_size = _png(20, 30, 1), _png(26, 40, 2)
    same_size = _png(20, 30, 3)  # random pixels do not compress: every 20x30 PNG has one length
    assert len(same_size) == len(small) and same_size != small
    extra = [{"question_id": q, "file_name": name, "image": {"bytes": data, "path": None}}
             for q, data in (("910", small), ("911", other_size), ("912", same_size), ("913", small))]
    ds, _ = _hostile_hub(lmms_hub, tmp_path, monkeypatch, extra)
    assert not ds.errors
    frames = {s.meta["question_id"]: Path(s.frames[0]) for s in ds if s.meta["question_id"] in ("910", "911", "912", "913")}
    assert {q: f.read_bytes() for q, f in frames.items()} == {"910": small, "911": other_size, "912": same_size, "913": small}
    assert frames["910"] == frames["913"] and len({frames["910"], frames["911"], frames["912"]}) == 3
    assert frame_size(frames["911"]) == (26, 40)
    assert {s.frame_ids[0] for s in ds if s.meta["question_id"] == "911"} == {Path(name).stem}


@pytest.mark.parametrize("height, width", [(10**6, 10**6), (0, 640), (-5, 640)])
def test_an_image_size_no_image_has_in_instances_json_is_a_data_error_for_its_ref(fixture, tmp_path, height, width):
    """instances.json gives the GT canvas: a hostile 10^6 x 10^6 had the masks allocate 10^12 bytes."""
    _, root, _ = fixture

    def resize(inst, victim):
        image = next(i for i in inst["images"] if i["id"] == victim["image_id"])
        image["height"], image["width"] = height, width

    copy, victim = _edited_copy(root, tmp_path, resize)
    ds = RefCOCODataset(copy, "refcoco/testB")
    failed = {e["sample_id"] for e in ds.errors}
    assert {str(s["sent_id"]) for s in victim["sentences"]} <= failed
    assert all(f"the image size {height}x{width} is not one a readable image has" in e["message"] for e in ds.errors)


def test_a_memo_amplified_refs_file_is_one_line_in_bounded_time_and_memory(fixture, tmp_path):
    # 1000 references to one memoized ref holding 1000 references to one sentence: ~4 KB that the
    # standard unpickler turns into a million samples; here one line naming the file, under 500 MB
    import subprocess
    import sys
    import time

    _, root, _ = fixture
    bad = tmp_path / "refer_seg"
    (bad / "refcoco").mkdir(parents=True)
    (bad / "refcoco" / "instances.json").write_text((root / "refcoco" / "instances.json").read_text())
    sent = {"sent": "man left", "sent_id": 9, "tokens": ["man", "left"], "raw": "man left"}
    ref = {"ref_id": 3, "ann_id": 1007, "image_id": 1, "split": "val", "sentences": [sent] * 1000, "sent_ids": [9]}
    (bad / "refcoco" / "refs(unc).p").write_bytes(pickle.dumps([ref] * 1000, protocol=2))
    assert (bad / "refcoco" / "refs(unc).p").stat().st_size < 5000
    code = ("import resource\nresource.setrlimit(resource.RLIMIT_AS, (500 << 20, 500 << 20))\n"
            "from rvt_bench.loaders.refcoco import RefCOCODataset\nfrom rvt_bench.core.types import DatasetFormatError\n"
            f"try:\n    RefCOCODataset({str(bad)!r}, 'refcoco/val')\nexcept DatasetFormatError as exc:\n    print('DFE', exc)\n")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "OPENBLAS_NUM_THREADS": "1"})
    seconds = time.monotonic() - start
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"DFE {bad}/refcoco/refs(unc).p: not a plain-data pickle (its data, every memo "
                                  f"reference expanded") and done.stdout.count("\n") == 1
    assert seconds < 5


@pytest.mark.parametrize("name, says", [("../../../../../refcoco/instances.json", "leaves"), ("ABSOLUTE", "relative path")])
def test_a_file_name_out_of_the_image_folder_is_a_data_error_for_its_ref(fixture, tmp_path, name, says):
    """file_name was joined as it was: a '..' or absolute name read any file as the image."""
    _, root, _ = fixture

    def rename(inst, victim):
        image = next(i for i in inst["images"] if i["id"] == victim["image_id"])
        image["file_name"] = str(root.joinpath(*IMAGE_DIR, image["file_name"])) if name == "ABSOLUTE" else name

    copy, victim = _edited_copy(root, tmp_path, rename)
    ds = RefCOCODataset(copy, "refcoco/testB")
    assert {str(s["sent_id"]) for s in victim["sentences"]} <= {e["sample_id"] for e in ds.errors}
    assert all("file_name" in e["message"] and says in e["message"] for e in ds.errors)


_BOUNDED_LOAD = """
import json, resource, sys, time
from rvt_bench.loaders.refcoco import RefCOCODataset
with open("/proc/self/status") as fh:  # the address space the imports took, plus 500 MB for the work
    vm = next(int(line.split()[1]) << 10 for line in fh if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm + (500 << 20), vm + (500 << 20)))
start = time.monotonic()
ds = RefCOCODataset(sys.argv[1], "refcoco/testB")
print(json.dumps({"seconds": time.monotonic() - start, "n": len(ds), "errors": ds.errors}))
"""


@pytest.mark.parametrize("declared", ["13000x13000", "the image's"])
def test_400_polygons_on_a_large_canvas_cost_what_the_image_holds_under_an_address_space_limit(fixture, tmp_path, declared):
    """issue 41: a 17.7 KB instances.json with 400 polygons on a declared 13000 x 13000 canvas segfaulted
    pycocotools (10 polygons peaked at 3.3 GB). The canvas is the image's real size (its header):
    a declared larger one is the ref's data error; on a real 4000 x 4000 image the 400 polygons
    are summed from their runs, not decoded one layer each (400 x 16 MB). Each in < 5 s and < 500 MB."""
    import subprocess
    import sys

    from tests.test_guarded_reads import blank_png

    side = 13000 if declared == "13000x13000" else 4000
    rng = np.random.default_rng(41)
    polygons = [[round(float(v), 1) for v in rng.uniform(0, side, 6)] for _ in range(400)]

    def hostile(inst, victim):
        image = next(i for i in inst["images"] if i["id"] == victim["image_id"])
        image["height"] = image["width"] = side
        next(a for a in inst["annotations"] if a["id"] == victim["ann_id"])["segmentation"] = polygons
        for a in inst["annotations"]:  # the image's other annotations: polygons on their own canvas still
            if a["image_id"] == victim["image_id"] and a["id"] != victim["ann_id"]:
                a["segmentation"] = [[1.0, 1.0, 9.0, 1.0, 9.0, 9.0]]
        return image["file_name"]

    names = []
    copy, victim = _edited_copy(fixture[1], tmp_path, lambda inst, v: names.append(hostile(inst, v)))
    assert (copy / "refcoco" / "instances.json").stat().st_size < 40_000
    if declared != "13000x13000":
        copy.joinpath(*IMAGE_DIR, names[0]).write_bytes(blank_png(side, side))  # the real image: 4000 x 4000
    done = subprocess.run([sys.executable, "-c", _BOUNDED_LOAD, str(copy)], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    print(f"{declared}: {out['seconds']:.2f} s")
    assert out["seconds"] < 5, out["seconds"]
    sentences = {str(s["sent_id"]) for s in victim["sentences"]}
    failed = {e["sample_id"]: e["message"] for e in out["errors"]}
    if declared == "13000x13000":  # every ref of the image fails, one line each naming both sizes
        assert sentences <= set(failed) and len(failed) == len(out["errors"])
        assert all("the size 13000x13000 (H x W), its file " in m and "never on a larger canvas" in m and "\n" not in m
                   for m in failed.values())
    else:
        assert not failed and out["n"] == EXPECTED["refcoco|unc|testB"]["n_sentences"]
