"""conf/sweep/baselines.yaml: dtr1, jit and vlm in one multirun for a dataset, each point a run of
its own (its own fingerprint, so its own leaderboard row), the model group chosen by the preset."""
from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.utils import instantiate

from rvt_bench.harness import main as run_bench
from rvt_bench.harness.config import adapter_node
from rvt_bench.harness.manifest import fingerprint

CONF = Path(__file__).resolve().parents[1] / "conf"


def test_the_preset_chooses_the_model_group_so_no_demo_default_is_added():
    argv = run_bench.with_default_groups(["-m", "+sweep=baselines", "+dataset=revos", "dataset.root=/data"])
    assert not any(a.startswith("+model=") for a in argv)
    assert "+model=dtr1" in run_bench.with_default_groups(["+dataset=revos"])


def test_the_preset_sweeps_dtr1_jit_and_vlm():
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=["+dataset=demo", "+sweep=baselines"], return_hydra_config=True)
    (override,) = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in cfg.hydra.sweeper.params.items()])
    assert override.key_or_group == "model" and list(override.sweep_string_iterator()) == ["dtr1", "jit", "vlm"]


@pytest.fixture(scope="module")
def points():
    out = {}
    for model in ("dtr1", "jit", "vlm"):
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            out[model] = compose("config", overrides=["+dataset=demo", f"+model={model}", "+sweep=baselines"])
    return out


def test_every_point_builds_its_adapter_without_loading_a_model(points):
    from omegaconf import OmegaConf

    fps = set()
    for model, cfg in points.items():
        assert cfg.perception._target_ == "rvt_bench.adapters.twin.foundation.FoundationPerception"
        adapter = instantiate(adapter_node(cfg.model), _convert_="all")
        assert adapter.name == model
        fps.add(fingerprint(OmegaConf.to_container(cfg, resolve=True), adapter.fingerprint()))
    assert len(fps) == 3
