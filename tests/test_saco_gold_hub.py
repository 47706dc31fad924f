"""SA-Co/Gold by hub id (rvt_bench.loaders.saco_gold_hub), offline: the release's JSONs laid out as
facebook/SACo-Gold's card declares them (top level, eval_sam3.py's names) in a local Hugging Face
cache; lmms-eval's parquet copy refused before any download. docs/benchmarks/saco_gold.md "Hub copies"."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from rvt_bench.adapters.precomputed import PrecomputedAdapter
from rvt_bench.core.types import DatasetFormatError
from rvt_bench.loaders import hub, saco_gold_hub
from rvt_bench.loaders.saco_gold import SACoGoldDataset, gt_file
from rvt_bench.metrics.protocols.saco_gold import SACoGoldProtocol
from tests import hub_fixtures as fx
from tests.precomputed_runs import load_script

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "saco_parity"
EXPECTED = json.loads((DATA / "reference" / "expected_cgf1.json").read_text())
HUB_ID = saco_gold_hub.HUB_ID
CARD = "---\nconfigs:\n- config_name: MetaCLIP\n  data_files:\n  - split: test\n    path:\n" + "".join(
    f"    - {gt_file('metaclip_nps', a)}\n" for a in "abc") + "---\n# SA-Co/Gold\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The release fixture (root), its predictions, and a hub cache holding it as facebook/SACo-Gold."""
    base = tmp_path_factory.mktemp("saco_hub")
    make = load_script(DATA / "make_fixture.py", "saco_make_fixture")
    make.write_fixture(base / "gt")
    make.write_predictions(base / "pred")
    repo = base / "repo"
    repo.mkdir()
    for a in "abc":
        shutil.copy(base / "gt" / gt_file("metaclip_nps", a), repo)
    (repo / "README.md").write_text(CARD)
    fx.hub_cache(base / "cache", HUB_ID, repo)
    return base


@pytest.fixture()
def cache(world, monkeypatch):
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(world / "cache"))
    monkeypatch.setattr(constants, "HF_HOME", str(world / "hf_home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return world


def _scored(ds, pred):
    adapter, protocol = PrecomputedAdapter(pred, layout="saco_gold"), SACoGoldProtocol()
    return protocol.aggregate([protocol.score_or_fail(s, adapter.predict(s))[0] for s in ds])


def test_the_hub_copy_is_read_as_the_release_with_the_same_numbers_and_its_source(cache):
    release = SACoGoldDataset(cache / "gt", "metaclip_nps")
    copy = SACoGoldDataset(None, "metaclip_nps", hf_dataset=HUB_ID)
    assert [(s.id, s.query, s.meta["annotations"]) for s in copy] == [(s.id, s.query, s.meta["annotations"])
                                                                      for s in release]
    assert copy.data_source == {"hf_dataset": HUB_ID, "revision": fx.SHA, "format": "saco-gold-json",
                                "official": None, "differences": [], "label": ""}
    assert not copy.warnings
    out = _scored(copy, cache / "pred")
    assert out["n"] == EXPECTED["abc"]["n"]
    for key, want in EXPECTED["abc"]["metrics"].items():
        assert (out["metrics"][key] is None) if want == -1 else out["metrics"][key] == pytest.approx(want, abs=1e-9)


def test_a_run_by_hub_id_without_root_gives_the_reference_numbers_and_records_the_source(cache):
    import run_bench  # noqa: F401  (registers the ${repo:} resolver the configs use)
    from rvt_bench.harness.runner import run

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[
            "+dataset=saco_gold", f"dataset.hf_dataset={HUB_ID}", "dataset.annotators=[a]",
            f"dataset.loader.images={cache / 'gt' / 'images'}", "+model=precomputed",
            f"model.root={cache / 'pred'}", f"run.root={cache / 'runs'}", f"leaderboard.dir={cache / 'boards'}"])
    metrics = run(cfg).metrics
    assert metrics["n"] == EXPECTED["a"]["n"] and metrics["failures"] == 0
    assert metrics["data_source"]["hf_dataset"] == HUB_ID and metrics["data_source"]["revision"] == fx.SHA
    for key, want in EXPECTED["a"]["metrics"].items():
        assert (metrics["metrics"][key] is None) if want == -1 else metrics["metrics"][key] == pytest.approx(want, abs=1e-9)


def test_a_copy_without_a_chosen_annotators_file_stops_in_one_line_naming_it(cache, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(cache / "gt" / gt_file("metaclip_nps", "a"), repo)
    with pytest.raises(DatasetFormatError, match=r"has no gold_metaclip_merged_b_release_test\.json, "
                                                  r"gold_metaclip_merged_c_release_test\.json at its top level") as err:
        SACoGoldDataset(None, "metaclip_nps", hf_dataset=str(repo))
    assert "\n" not in str(err.value)
    assert len(SACoGoldDataset(None, "metaclip_nps", ["a"], hf_dataset=str(repo))) == EXPECTED["a"]["n"]


def test_lmms_evals_parquet_copy_is_refused_before_anything_is_downloaded(cache):
    node = {"name": "saco_gold", "hf_dataset": "yasserDahou/saco-gold", "hf_revision": None,
            "loader": {"_target_": "rvt_bench.loaders.saco_gold.SACoGoldDataset"}}
    with pytest.raises(DatasetFormatError, match="lmms-eval's parquet copy.*not SA-Co/Gold's release"):
        hub.pin(node)  # offline and not in the cache: only the refusal can answer this
    with pytest.raises(DatasetFormatError, match="is not SA-Co/Gold's release"):
        SACoGoldDataset(None, "metaclip_nps", hf_dataset="yasserDahou/saco-gold")
    assert saco_gold_hub.refusal({"hf_dataset": HUB_ID}) is None


def test_neither_root_nor_hub_id_names_both_ways(tmp_path):
    with pytest.raises(DatasetFormatError, match="set dataset.root .* or dataset.hf_dataset=facebook/SACo-Gold"):
        SACoGoldDataset(None, "metaclip_nps")
