"""The dataset node (bench/loaders/config.py): every conf/dataset/*.yaml fits the DatasetConfig schema,
its loader arguments are read as the runner reads them, older flat nodes still load, and the
fingerprint hashes the same flat shape as before the split (old run directories resume)."""
from __future__ import annotations

from pathlib import Path

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError

from rvt_bench.core.types import DatasetFormatError
from rvt_bench.harness.manifest import fingerprint
from rvt_bench.loaders.config import DatasetConfig, flat, is_split, loader_kwargs

REPO = Path(__file__).resolve().parent.parent
CONFIGS = sorted((REPO / "conf" / "dataset").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_dataset_config_fits_the_schema_and_names_itself(path):
    node = OmegaConf.load(path)
    merged = OmegaConf.merge(OmegaConf.structured(DatasetConfig), node)
    assert merged.name == path.stem and is_split(node)
    assert merged.loader._target_.startswith("rvt_bench.loaders.") and merged.protocol._target_.startswith("rvt_bench.metrics.protocols.")
    # root and split reach the loader by interpolation: `dataset.root=DIR` is all a user sets
    raw = OmegaConf.to_container(node)["loader"]
    assert raw["root"] == "${..root}" and raw["split"] == "${..split}"


def test_schema_is_in_the_config_store_and_rejects_unknown_keys():
    assert "dataset.yaml" in ConfigStore.instance().list("schema")
    with pytest.raises(ConfigKeyError):
        OmegaConf.merge(OmegaConf.structured(DatasetConfig), {"name": "x", "query_length": "all"})


def test_loader_kwargs_resolve_the_interpolated_root_and_take_a_moved_root():
    node = OmegaConf.load(REPO / "conf" / "dataset" / "revos.yaml")
    node.root = "/data/ReVOS"
    kwargs = loader_kwargs(node)
    assert kwargs["_target_"] == "rvt_bench.loaders.revos.ReVOSDataset" and kwargs["root"] == "/data/ReVOS"
    assert kwargs["split"] == "valid" and "protocol" not in kwargs and "name" not in kwargs
    assert loader_kwargs(node, root="/mnt/ReVOS")["root"] == "/mnt/ReVOS"


def test_a_flat_node_of_an_older_run_still_loads_and_a_stray_key_is_named():
    old = {"name": "revos", "_target_": "rvt_bench.loaders.revos.ReVOSDataset", "root": "/d", "split": "valid",
           "protocol": {"_target_": "rvt_bench.metrics.protocols.revos.ReVOSProtocol"}}
    assert loader_kwargs(old) == {"_target_": "rvt_bench.loaders.revos.ReVOSDataset", "root": "/d", "split": "valid"}
    node = OmegaConf.load(REPO / "conf" / "dataset" / "revos.yaml")
    node.root = "/d"
    node.query_length = "all"  # a loader argument put beside name
    with pytest.raises(DatasetFormatError, match=r"unknown keys \['query_length'\].*dataset.loader"):
        loader_kwargs(node)


def test_fingerprint_of_the_split_node_equals_the_flat_node_it_replaces():
    node = OmegaConf.load(REPO / "conf" / "dataset" / "revos.yaml")
    node.root = "/data/ReVOS"
    split = OmegaConf.to_container(node, resolve=True)
    old = {"name": "revos", "_target_": "rvt_bench.loaders.revos.ReVOSDataset", "root": "/elsewhere", "split": "valid",
           "on_length_mismatch": "warn", "foreground": None, "protocol": split["protocol"]}
    model = {"name": "m", "_target_": "x"}
    assert flat(split) == {**old, "root": "/data/ReVOS"}
    assert fingerprint({"dataset": split, "model": model}) == fingerprint({"dataset": old, "model": model})
    moved = {**split, "root": "/mnt", "loader": {**split["loader"], "root": "/mnt"}}
    assert fingerprint({"dataset": moved, "model": model}) == fingerprint({"dataset": split, "model": model})
    other = {**split, "split": "train", "loader": {**split["loader"], "split": "train"}}
    assert fingerprint({"dataset": other, "model": model}) != fingerprint({"dataset": split, "model": model})
