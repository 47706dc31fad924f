"""A new model-backed vision tool is its ToolSpec, one module with its model and its step, and a config
block (adapters/twin/registry.py "Adding a tool"): here all three live in this test module, and
foundation perception, built by Hydra from the config, runs, caches and ablates the tool with no
edit to adapters/twin/perception.py or foundation.py."""
from __future__ import annotations

import numpy as np
import pytest
from hydra.utils import instantiate
from PIL import Image

from rvt_bench.adapters.dtr1.grammar import plan_grammar
from rvt_bench.adapters.twin import registry
from rvt_bench.adapters.twin.backends.sam2_common import Track
from rvt_bench.adapters.twin.builder import build_twin
from rvt_bench.adapters.twin.dag import parse_dag, validate_dag
from rvt_bench.adapters.twin.foundation import FoundationPerception, crop_box
from rvt_bench.adapters.twin.oracle import OraclePerception
from rvt_bench.adapters.twin.registry import ToolSpec, register_tool
from rvt_bench.core.types import AdapterError, Sample, Target

T, H, W = 3, 8, 10
COLOURS = [(10, 20, 200), (40, 50, 60), (90, 0, 255)]
"""Frame t is filled with COLOURS[t], so a crop's mean colour names the frame it was cut from."""
PLAN = '{"SAM2": [], "Colour": ["SAM2"]}'

# --- the tool: what a backend module in adapters/twin/backends/ would hold ------------------------------


class ColourModel:
    """The "model": mean RGB of each crop. Counts its calls, so a cache hit shows as no call."""

    calls = 0

    def __init__(self, model_id: str = "colour-v1"):
        self.model_id = model_id

    def fingerprint(self) -> dict:
        return {"backend": "colour", "model_id": self.model_id, "revision": "0", "params": {}}

    def measure(self, crops: list[np.ndarray]) -> np.ndarray:
        ColourModel.calls += 1
        return np.array([c.reshape(-1, 3).mean(axis=0) for c in crops], dtype=np.float32)


def colour_step(perception, sample, twin) -> None:
    """Leave twin.artifacts["colour"] = {instance id: [r, g, b]} through foundation's public helpers."""
    backend = perception.backend("Colour", sample)
    crops = [crop_box(inst, twin.size) for inst in twin.instances]

    def compute() -> dict:
        frames = perception.frames(sample, twin)
        return {"rgb": backend.measure([frames[t][y1:y2, x1:x2] for t, (x1, y1, x2, y2) in crops])}

    rgb = perception.cached("Colour", sample, twin, {"crops": crops}, compute)["rgb"]
    twin.artifacts["colour"] = {inst.id: [float(v) for v in row] for inst, row in zip(twin.instances, rgb)}


COLOUR = ToolSpec("Colour", ("SAM2",), "twin.artifacts['colour']", "mean colour of each instance",
                  backend="colour", uses="Colour", step=f"{__name__}:colour_step")

# --- a fixed SAM2 so that the instances (and their crop frames) are known -------------------------------


def _box(r0, r1, c0, c1):
    m = np.zeros((H, W), bool)
    m[r0:r1, c0:c1] = True
    return m


class FixedSam2:
    """Instance 1 is largest on frame 0 (2 x 2 px), instance 2 on frame 2 (3 x 4 px)."""

    def fingerprint(self) -> dict:
        return {"backend": "fixed-sam2", "model_id": "fixed", "revision": "0", "params": {}}

    def segment(self, frames, key_frame, boxes=None, labels=None, scores=None):
        a = np.stack([_box(0, 2, 0, 2), _box(0, 1, 0, 3), np.zeros((H, W), bool)])
        b = np.stack([_box(5, 7, 6, 8), _box(5, 7, 6, 8), _box(5, 8, 6, 10)])
        return [Track(a, 0.9), Track(b, 0.8)]


def config(tmp_path, **overrides) -> dict:
    """conf/perception/foundation.yaml's shape, with the new tool's block under its backend key."""
    return {"_target_": "rvt_bench.adapters.twin.foundation.FoundationPerception",
            "cache": {"_target_": "rvt_bench.adapters.twin.cache.ToolCache", "root": str(tmp_path / "cache")},
            "sam2": {"_target_": f"{__name__}.FixedSam2"},
            "colour": {"_target_": f"{__name__}.ColourModel", "model_id": "colour-v1"},
            **overrides}


@pytest.fixture
def colour_tool():
    register_tool(COLOUR)
    ColourModel.calls = 0
    yield COLOUR
    registry.TOOLS.pop(COLOUR.name)


@pytest.fixture
def sample(tmp_path) -> Sample:
    paths = []
    for t, rgb in enumerate(COLOURS):
        p = tmp_path / "frames" / f"{t}.png"
        p.parent.mkdir(exist_ok=True)
        Image.fromarray(np.full((H, W, 3), rgb, np.uint8)).save(p)
        paths.append(str(p))
    return Sample(id="clip/0", dataset="toy", split="test", modality="video", frames=paths,
                  frame_ids=["0", "1", "2"], query="the dog", task="segmentation", target=Target(masks=[None] * T))


def test_a_plan_naming_the_tool_runs_its_step_and_fills_the_twin(colour_tool, sample, tmp_path):
    perception = instantiate(config(tmp_path), _convert_="all")
    twin = build_twin(sample, validate_dag(parse_dag(PLAN)), perception)
    assert twin.tools == ["SAM2", "Colour"]
    assert twin.artifacts["colour"] == {1: [10.0, 20.0, 200.0], 2: [90.0, 0.0, 255.0]}
    assert perception.fingerprint()["backends"]["Colour"]["model_id"] == "colour-v1"


def test_a_second_build_reads_the_tool_from_the_cache(colour_tool, sample, tmp_path):
    first = build_twin(sample, ["SAM2", "Colour"], instantiate(config(tmp_path), _convert_="all"))
    again = build_twin(sample, ["SAM2", "Colour"], instantiate(config(tmp_path), _convert_="all"))
    assert first.artifacts["cache"]["Colour"] == "miss" and again.artifacts["cache"]["Colour"] == "hit"
    assert ColourModel.calls == 1 and again.artifacts["colour"] == first.artifacts["colour"]


def test_the_tool_is_a_node_of_the_plan_grammar_and_the_validator(colour_tool):
    assert '\\"Colour\\": [\\"SAM2\\"]' in plan_grammar()
    with pytest.raises(AdapterError, match="requires \\['SAM2'\\]"):
        validate_dag(parse_dag('{"SAM2": [], "Colour": []}'))


def test_perception_disable_names_the_tool_and_skips_it(colour_tool, sample, tmp_path):
    perception = instantiate(config(tmp_path, disable=["Colour"]), _convert_="all")
    twin = build_twin(sample, ["SAM2", "Colour"], perception)
    assert twin.tools == ["SAM2"] and twin.artifacts["skipped"] == ["Colour"] and "colour" not in twin.artifacts
    assert ColourModel.calls == 0


def test_without_its_config_block_the_error_names_the_key(colour_tool, sample, tmp_path):
    cfg = config(tmp_path)
    del cfg["colour"]
    with pytest.raises(AdapterError, match="no backend configured for it \\(set perception.colour or disable it\\)"):
        build_twin(sample, ["SAM2", "Colour"], instantiate(cfg, _convert_="all"))


def test_a_perception_without_models_has_no_such_tool(colour_tool):
    from tests.test_twin_oracle import synthetic_sample

    with pytest.raises(AdapterError, match="perception 'oracle' has no tool 'Colour' \\(it needs a model"):
        build_twin(synthetic_sample(), ["SAM2", "Colour"], OraclePerception())


def test_a_tool_registered_after_the_perception_was_built_asks_for_its_config(sample, tmp_path):
    perception = FoundationPerception(sam2=FixedSam2(), cache=None)
    register_tool(COLOUR)
    try:
        with pytest.raises(AdapterError, match="set perception.colour or disable it"):
            build_twin(sample, ["SAM2", "Colour"], perception)
    finally:
        registry.TOOLS.pop(COLOUR.name)
