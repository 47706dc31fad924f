"""gRefCOCO by hub id (rvt_bench.loaders.grefcoco_hub), offline: the release's grefs(unc).json and
instances.json laid out as FudanCVL/gRefCOCO holds them (the repository's top level) in a local
Hugging Face cache, the train2014 images elsewhere. docs/benchmarks/grefcoco.md "Hub copies"."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from rvt_bench.adapters.precomputed import PrecomputedAdapter
from rvt_bench.core.types import DatasetFormatError
from rvt_bench.loaders import grefcoco_hub
from rvt_bench.loaders.grefcoco import GRefCOCODataset
from rvt_bench.metrics.protocols.grefcoco import GRefCOCOProtocol
from tests import hub_fixtures as fx
from tests.precomputed_runs import load_script

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "grefcoco_parity"
EXPECTED = json.loads((DATA / "reference" / "expected_rela.json").read_text())
HUB_ID = grefcoco_hub.HUB_ID
PERCENT = ("gIoU", "cIoU", "Pr@0.7", "Pr@0.8", "Pr@0.9")  # ReLA prints these x 100; metrics.json holds fractions


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """ReLA's datasets folder (root), predictions, and a hub cache holding its two JSONs as FudanCVL/gRefCOCO."""
    base = tmp_path_factory.mktemp("grefcoco_hub")
    make = load_script(DATA / "make_fixture.py", "grefcoco_make_fixture")
    root = make.write_fixture(base / "datasets")
    make.write_predictions(root, base / "pred")
    repo = base / "repo"
    repo.mkdir()
    for name in ("grefs(unc).json", "instances.json"):
        shutil.copy(root / "grefcoco" / name, repo)
    (repo / "README.md").write_text("---\nlicense: cc-by-nc-sa-4.0\n---\n# gRefCOCO\n")
    fx.hub_cache(base / "cache", HUB_ID, repo)
    return base


@pytest.fixture()
def cache(world, monkeypatch):
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(world / "cache"))
    monkeypatch.setattr(constants, "HF_HOME", str(world / "hf_home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return world


def _same(metrics, want, tol=1e-9):
    for key, value in want.items():
        assert metrics[key] == pytest.approx(value / 100 if key in PERCENT else value, abs=tol), key


@pytest.mark.parametrize("split", ["val", "testA"])
def test_the_hub_copy_is_read_as_the_release_with_relas_numbers_and_its_source(cache, split):
    images = cache / "datasets" / "images" / "train2014"
    release = GRefCOCODataset(cache / "datasets", split)
    copy = GRefCOCODataset(None, split, images=str(images), hf_dataset=HUB_ID)
    assert [(s.id, s.query, s.frames, s.target.masks, s.meta["eval_gt"]) for s in copy] == \
        [(s.id, s.query, s.frames, s.target.masks, s.meta["eval_gt"]) for s in release]
    assert copy.data_source == {"hf_dataset": HUB_ID, "revision": fx.SHA, "format": "grefcoco-json",
                                "official": None, "differences": [], "label": ""}
    adapter, protocol = PrecomputedAdapter(cache / "pred", layout="grefcoco"), GRefCOCOProtocol()
    out = protocol.aggregate([protocol.score_or_fail(s, adapter.predict(s))[0] for s in copy])
    _same(out["metrics"], EXPECTED[split]["results"]["grefcoco"])


def test_a_run_by_hub_id_without_root_gives_relas_numbers_and_records_the_source(cache):
    import run_bench  # noqa: F401  (registers the ${repo:} resolver the configs use)
    from rvt_bench.harness.runner import run

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[
            "+dataset=grefcoco", f"dataset.hf_dataset={HUB_ID}", "dataset.split=val",
            f"dataset.loader.images={cache / 'datasets' / 'images' / 'train2014'}", "+model=precomputed",
            f"model.root={cache / 'pred'}", f"run.root={cache / 'runs'}", f"leaderboard.dir={cache / 'boards'}"])
    metrics = run(cfg).metrics
    assert metrics["failures"] == 0 and metrics["data_source"]["revision"] == fx.SHA
    _same(metrics["metrics"], EXPECTED["val"]["results"]["grefcoco"])


def test_the_images_are_required_and_a_copy_without_the_files_stops_in_one_line(cache, tmp_path):
    with pytest.raises(DatasetFormatError, match="holds the annotations only: set dataset.loader.images"):
        GRefCOCODataset(None, "val", hf_dataset=HUB_ID)
    (tmp_path / "repo").mkdir()
    shutil.copy(cache / "datasets" / "grefcoco" / "instances.json", tmp_path / "repo")
    with pytest.raises(DatasetFormatError, match=r"has no grefs\(unc\)\.json and instances\.json at its top level") as err:
        GRefCOCODataset(None, "val", images=str(tmp_path), hf_dataset=str(tmp_path / "repo"))
    assert "\n" not in str(err.value)
    with pytest.raises(DatasetFormatError, match="set dataset.root .* or dataset.hf_dataset=FudanCVL/gRefCOCO"):
        GRefCOCODataset(None, "val")


def test_the_files_under_a_grefcoco_folder_are_found_too(cache, tmp_path):
    shutil.copytree(cache / "datasets" / "grefcoco", tmp_path / "repo" / "grefcoco")
    copy = GRefCOCODataset(None, "testB", images=str(cache / "datasets" / "images" / "train2014"),
                           hf_dataset=str(tmp_path / "repo"))
    assert [s.id for s in copy] == [s.id for s in GRefCOCODataset(cache / "datasets", "testB")]
    assert copy.data_source["revision"].startswith("local:")
