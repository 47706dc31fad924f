"""Data by hub id (`dataset.hf_dataset=ID`, rvt_bench.loaders.hub), offline: fixtures in each hub
copy's exact format (tests/hub_fixtures.py) put into a local Hugging Face cache, never the network."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from rvt_bench.core.masks import decode
from rvt_bench.core.types import DatasetFormatError
from rvt_bench.harness.runner import run
from rvt_bench.loaders import hub, revos_hub
from rvt_bench.loaders.llmseg40k import LLMSeg40KDataset
from rvt_bench.loaders.reasonseg import ReasonSegDataset
from rvt_bench.loaders.revos import ReVOSDataset
from tests import hub_fixtures as fx

REPO = Path(__file__).resolve().parents[1]
SEGZERO = "Ricky06662/ReasonSeg_val"
LISA_REPO = "a-lab/ReasonSeg-files"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """LISA's files, predictions, and a hub cache holding Seg-Zero's val copy and a zip of LISA's files."""
    base = tmp_path_factory.mktemp("hub")
    root = fx.write_lisa_reasonseg(base / "data")
    fx.reasonseg_predictions(root, "val", base / "pred")
    fx.segzero_parquet(root, "val", base / "segzero_val")
    fx.hub_cache(base / "cache", SEGZERO, base / "segzero_val")
    (base / "lisa_repo").mkdir()
    fx.zip_dir(root / "val", base / "lisa_repo" / "val.zip")  # LISA's release is zips of its split folders
    fx.hub_cache(base / "cache", LISA_REPO, base / "lisa_repo", sha="f" * 40)
    return base


@pytest.fixture()
def cache(world, monkeypatch):
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(world / "cache"))
    monkeypatch.setattr(constants, "HF_HOME", str(world / "hf_home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return world


def test_the_segzero_fixture_is_what_datasets_reads_from_the_hub_copy(world):
    """The parquet as push_to_hub wrote it: `datasets` finds the one split "test" and decodes the
    rows; the mask is LISA's label map at the stored size made boolean (ignore pixels are target)."""
    import datasets

    from rvt_bench.core.masks import rasterize_labelme

    ds = datasets.load_dataset(str(world / "segzero_val"), split="test")
    assert ds.column_names == ["image", "text", "mask", "image_id", "ann_id", "img_height", "img_width"]
    row = ds.with_format("numpy", columns=["mask", "image_id"])[0]
    anno = json.loads((world / "data" / "ReasonSeg" / "val" / f"{row['image_id']}.json").read_text())
    labels = rasterize_labelme(anno["shapes"], *row["mask"].shape)
    assert (labels == 255).any() and np.array_equal(row["mask"], labels != 0)


def test_segzero_copy_by_hub_id_reads_its_rows_warns_and_records_the_source(cache):
    ds = ReasonSegDataset(None, "val", hf_dataset=SEGZERO)
    official = {s.id: s for s in ReasonSegDataset(cache / "data" / "ReasonSeg", "val")}
    assert [s.id for s in ds] == ["100637969_a7173095de_o", "100706138_4dd951b10b_o", "106484289_d257ea9e9d_o"]
    rotated = ds.errors[0]
    assert rotated["sample_id"] == "101677526_e9a3ba3ae1_o" and "EXIF-oriented image is 32 x 24" in rotated["message"]
    for s in ds:  # same image and text[0]; the target is LISA's target plus its ignore region
        lisa = official[s.id]
        assert s.query == lisa.query and "is_sentence" not in s.meta and s.target.ignore == [None]
        ignore = decode(lisa.target.ignore[0]) if lisa.target.ignore[0] is not None else False
        assert np.array_equal(decode(s.target.masks[0]), decode(lisa.target.masks[0]) | ignore)
    assert ds.data_source == {"hf_dataset": SEGZERO, "revision": fx.SHA, "format": "segzero-parquet", "official": False,
                              "differences": ds.data_source["differences"], "label": "Seg-Zero hub copy"}
    assert "(1 such rows left out)" in ds.data_source["differences"][1]
    assert len(ds.warnings) == 1 and "not LISA's release" in ds.warnings[0] and "ignore regions" in ds.warnings[0]


def test_segzero_copy_refuses_what_it_cannot_give(cache):
    with pytest.raises(DatasetFormatError, match="no is_sentence field: query_length must be 'all'"):
        ReasonSegDataset(None, "val", query_length="long", hf_dataset=SEGZERO)
    with pytest.raises(DatasetFormatError, match="holds the val split, not 'test': set dataset.split=val"):
        ReasonSegDataset(None, "test", hf_dataset=SEGZERO)


def test_a_hub_id_not_in_the_cache_offline_is_one_line_naming_it_and_hf_hub_offline(cache):
    with pytest.raises(DatasetFormatError) as err:
        LLMSeg40KDataset(None, hf_dataset="someone/LLM-Seg40K")
    assert "'someone/LLM-Seg40K'" in str(err.value) and "HF_HUB_OFFLINE is set" in str(err.value)
    assert "\n" not in str(err.value)


def test_pin_resolves_a_branch_to_its_commit_from_the_cache(cache):
    node = {"name": "reasonseg", "hf_dataset": SEGZERO, "hf_revision": None}
    hub.pin(node)
    assert node["hf_revision"] == fx.SHA


def _compose(*overrides):
    import run_bench  # noqa: F401  (registers the ${repo:} resolver)

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=["+model=precomputed", *overrides])


def test_a_run_by_hub_id_records_the_source_in_manifest_metrics_row_and_fingerprint(cache, tmp_path):
    common = [f"model.root={cache / 'pred'}", f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}",
              "run.bootstrap.B=50", "run.report=false"]
    files = run(_compose("+dataset=reasonseg", f"dataset.root={cache / 'data' / 'ReasonSeg'}", *common))
    copy = run(_compose("+dataset=reasonseg", f"dataset.hf_dataset={SEGZERO}", *common))
    assert copy.run_dir != files.run_dir  # the source is part of what the run computes
    manifest = json.loads((copy.run_dir / "manifest.json").read_text())
    assert manifest["data_source"]["revision"] == fx.SHA and manifest["data_source"]["official"] is False
    assert copy.metrics["data_source"]["hf_dataset"] == SEGZERO and "not LISA's release" in copy.metrics["warnings"][0]
    assert "hf_revision: " + fx.SHA in (copy.run_dir / "config.yaml").read_text()  # pinned before the fingerprint
    import pandas as pd

    board = pd.read_csv(tmp_path / "boards" / "reasonseg.csv", dtype={"fingerprint": str})
    sources = {r.run_name: json.loads(r.data_source) for r in board.itertuples()}
    assert sources[files.run_dir.name] == {} and sources[copy.run_dir.name]["revision"] == fx.SHA
    # LISA's own files in a hub repository (zipped) give exactly the numbers of dataset.root, no warning
    lisa = run(_compose("+dataset=reasonseg", f"dataset.hf_dataset={LISA_REPO}", *common))
    assert lisa.metrics["metrics"] == files.metrics["metrics"] and not lisa.metrics.get("warnings")
    assert lisa.metrics["data_source"]["format"] == "lisa-files"


def test_the_command_line_offline_without_the_copy_stops_with_one_line(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty"), "HF_HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "+dataset=reasonseg", "+model=precomputed",
                          f"dataset.hf_dataset={SEGZERO}", f"model.root={tmp_path}", f"run.root={tmp_path / 'runs'}"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and SEGZERO in lines[0] and "HF_HUB_OFFLINE is set" in lines[0], out.stderr[-2000:]


def _revos_release(base: Path) -> Path:
    sys.path.insert(0, str(REPO / "tests" / "data" / "visa_parity"))
    try:
        from make_fixture_raw import write_fixture
    finally:
        sys.path.pop(0)
    root, _ = write_fixture(base)
    return root


def test_revos_from_a_zip_in_sa2vas_layout_equals_the_release_and_warns_when_sums_differ(cache, tmp_path):
    root = _revos_release(tmp_path / "release")
    import shutil

    sa2va = tmp_path / "revos"  # Sa2VA's layout: frames at <root>/<video>/, no JPEGImages/
    shutil.copytree(root / "JPEGImages", sa2va)
    for item in root.glob("*.json"):
        shutil.copy(item, sa2va / item.name)
    (tmp_path / "repo").mkdir()
    fx.zip_dir(sa2va, tmp_path / "repo" / "revos.zip")
    release, copy = ReVOSDataset(root), ReVOSDataset(None, hf_dataset=str(tmp_path / "repo"))
    assert [(s.id, s.target.masks, s.frame_ids) for s in copy] == [(s.id, s.target.masks, s.frame_ids) for s in release]
    assert copy.data_source["format"] == "sa2va-files" and copy.data_source["official"] is False
    assert "not VISA's release" in copy.warnings[0] and "mask_dict.json: sha256 differs" in copy.warnings[0]


def test_revos_files_whose_sums_are_the_releases_are_official_without_warning(cache, tmp_path, monkeypatch):
    root = _revos_release(tmp_path / "release")
    monkeypatch.setattr(revos_hub, "RELEASE_SHA256", {n: hub.sha256_file(root / n) for n in
                                                     ("mask_dict.json", "mask_dict_foreground.json", "meta_expressions_valid_.json")})
    ds = ReVOSDataset(None, hf_dataset=str(root.parent))
    assert ds.data_source["official"] is True and ds.warnings == [] and ds.data_source["format"] == "visa-files"


def test_llmseg40k_hub_copy_without_the_authors_files_points_to_the_official_download(cache, tmp_path):
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "README.md").write_text("not the data")
    with pytest.raises(DatasetFormatError, match="no hub copy of LLM-Seg40K is known: download it from https://github.com/wangjunchi/LLMSeg"):
        LLMSeg40KDataset(None, hf_dataset=str(tmp_path / "repo"))


def test_a_failed_download_says_how_to_work_without_network(monkeypatch):
    """A newcomer offline waited out the hub's retries and got the connection error alone."""
    import huggingface_hub

    from rvt_bench.loaders import hub

    def refuse(*args, **kwargs):
        raise ConnectionError("[Errno -2] Name or service not known")

    monkeypatch.setattr(hub, "resolve_revision", lambda *a, **k: "0" * 40)
    monkeypatch.setattr(hub, "offline", lambda: False)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)
    with pytest.raises(DatasetFormatError) as failed:
        hub.snapshot("refcoco", "lmms-lab/RefCOCO", None)
    said = str(failed.value)
    assert "\n" not in said and "ConnectionError: [Errno -2] Name or service not known" in said
    assert "huggingface-cli download --repo-type dataset lmms-lab/RefCOCO" in said and "HF_HUB_OFFLINE=1" in said


@pytest.mark.parametrize("given", ["..", "a/..", "x\x00.jpg"])
def test_a_segzero_row_whose_image_path_cannot_name_a_file_fails_that_row(cache, tmp_path, given):
    """The row's image is written under its path's last part: '..' named the images folder's parent
    (an uncaught IsADirectoryError stopped the load)."""
    import shutil

    import pyarrow.parquet as pq

    copy = tmp_path / "segzero_val"
    shutil.copytree(cache / "segzero_val", copy)
    path = copy / "data" / "test-00000-of-00001.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    rows[0]["image"]["path"] = given
    pq.write_table(type(table).from_pylist(rows, schema=table.schema), path)
    ds = ReasonSegDataset(None, "val", hf_dataset=str(copy))
    failed = {e["sample_id"]: e["message"] for e in ds.errors}
    assert "cannot name an image file" in failed[rows[0]["image_id"]] and len(ds) == 2
