"""The DT-R1 system prompt describes what the configured perception's twin holds (issue 43 item 4):
metric depth's unit (declared by the perception before any sample), the instance embeddings with
model.embeddings=true; the default prompt is word for word what it was."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from rvt_bench.adapters.dtr1 import prompt as prompts
from rvt_bench.adapters.dtr1.adapter import DTR1Adapter
from rvt_bench.adapters.policy.scripted import ScriptedPolicy
from rvt_bench.adapters.twin.backends.depth_anything import DepthAnythingBackend
from rvt_bench.adapters.twin.backends.depth_pro import DepthProBackend
from rvt_bench.adapters.twin.foundation import FoundationPerception
from rvt_bench.adapters.twin.oracle import OraclePerception
from rvt_bench.adapters.twin.registry import describe_tools
from rvt_bench.core.types import AdapterError, Sample, Target

RELATIVE = ("relative", "relative inverse depth, larger = nearer")
METRIC = ("m", "larger = farther")


def _system(perception, **kw) -> str:
    adapter = DTR1Adapter(policy=ScriptedPolicy([]), perception=perception, **kw)
    sample = Sample(id="s", dataset="toy", split="test", modality="image", frames=["f.jpg"], frame_ids=["0"],
                    query="q", task="segmentation", target=Target(masks=[None]))
    return adapter.prompt(sample)[0]["content"]


@pytest.mark.parametrize("style", ["full", "compact"])
def test_the_default_prompt_is_unchanged(style):
    before = prompts.system_prompt(describe_tools(), 10, style)  # the call every run before the option made
    assert prompts.system_prompt(describe_tools(), 10, style, RELATIVE) == before
    assert prompts.system_prompt(describe_tools(), 10, style, None, False) == before
    assert _system(OraclePerception(), twin_style=style) == before  # oracle declares no depth
    relative = FoundationPerception(depth=DepthAnythingBackend.tiny())
    assert _system(relative, twin_style=style) == before
    assert prompts.prompt_digest(describe_tools(), 10) == "7fe491fd90f4"  # pinned in test_twin_registry too


@pytest.mark.parametrize("style, words", [("full", "depth mean/std (metres, larger = farther)"),
                                          ("compact", "depth mean (metres, larger = farther),")])
@pytest.mark.parametrize("depth", [lambda: DepthAnythingBackend.tiny(max_depth=20),
                                   lambda: DepthAnythingBackend(model_id="depth-anything/Depth-Anything-V2-Metric-Indoor-Small-hf",
                                                                depth_estimation_type="metric"),
                                   lambda: DepthProBackend()])
def test_metric_depth_is_named_in_metres(style, words, depth):
    backend = depth()
    system = _system(FoundationPerception(depth=backend), twin_style=style)
    assert words in system and "unit and convention stated in the twin" not in system
    assert system != prompts.system_prompt(describe_tools(), 10, style)
    assert backend.model_id.startswith("tiny-random") or backend._components is None  # the hub ones loaded nothing


def test_a_metric_prompt_is_another_run_and_training_prompts_alike():
    relative = DTR1Adapter(policy=ScriptedPolicy([]), perception=FoundationPerception(depth=DepthAnythingBackend.tiny()))
    metric = DTR1Adapter(policy=ScriptedPolicy([]), perception=FoundationPerception(depth=DepthProBackend()))
    assert relative.fingerprint()["prompt"]["sha256"] == prompts.prompt_digest(describe_tools(), 10)
    assert metric.fingerprint()["prompt"]["sha256"] != relative.fingerprint()["prompt"]["sha256"]
    assert prompts.depth_of(metric.perception) == METRIC and prompts.depth_of(object()) is None


def test_disabled_depth_declares_nothing():
    perception = FoundationPerception(depth=DepthProBackend(), disable=["DepthAnything2"])
    assert perception.depth_convention() is None
    assert _system(perception) == prompts.system_prompt(describe_tools(), 10)


@pytest.mark.parametrize("style", ["full", "compact"])
def test_embeddings_list_dinov2_and_describe_similar_and_embedding(style):
    plain = _system(OraclePerception(), twin_style=style)
    system = _system(OraclePerception(), twin_style=style, embeddings=True)
    assert "- DINOv2 (requires: SAM2)" in system and "DINOv2" not in plain
    assert '"similar" {other id: cosine similarity' in system
    assert 'twin["instances"][k]["embedding"]' in system
    on = DTR1Adapter(policy=ScriptedPolicy([]), perception=OraclePerception(), embeddings=True)
    assert on.fingerprint()["prompt"]["sha256"] != DTR1Adapter(policy=ScriptedPolicy([]), perception=OraclePerception()).fingerprint()["prompt"]["sha256"]
    with pytest.raises(AdapterError, match="embeddings"):
        DTR1Adapter(policy=ScriptedPolicy([]), perception=OraclePerception(), embeddings="yes")


def test_the_fields_the_prompt_describes_are_the_twins(tmp_path):
    """What the prompt promises, on a twin built with tiny models: "similar" in <dt_rep> (both
    styles), "embedding" per instance in the code payload, depth_unit in metres."""
    from rvt_bench.adapters.twin.backends.dinov2 import Dinov2Backend
    from rvt_bench.adapters.twin.backends.sam2_hf import Sam2HFBackend
    from rvt_bench.adapters.twin.builder import build_twin

    rng = np.random.default_rng(0)
    paths = []
    for t in range(2):
        paths.append(str(tmp_path / f"{t}.png"))
        Image.fromarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)).save(paths[-1])
    sample = Sample(id="clip/0", dataset="toy", split="test", modality="video", frames=paths, frame_ids=["0", "1"],
                    query="the dog", task="segmentation", target=Target(masks=[None, None]))
    perception = FoundationPerception(sam2=Sam2HFBackend.tiny(device="cpu"), depth=DepthProBackend.tiny(device="cpu"),
                                      dinov2=Dinov2Backend.tiny(device="cpu"))
    twin = build_twin(sample, ["SAM2", "DepthAnything2", "DepthStats", "DINOv2"], perception)
    assert len(twin.instances) >= 2
    for style in ("full", "compact"):
        shown = json.loads(twin.to_llm_json(style=style))
        assert all("similar" in inst for inst in shown["instances"])
        assert shown["depth_unit"] == "m, larger = farther"
    code_twin = twin.to_code_payload()["variables"]["twin"]  # what <execute> sees as `twin`
    assert all(len(inst["embedding"]) > 0 for inst in code_twin["instances"])
    assert perception.depth_convention() == METRIC == (twin.instances[0].depth.unit, twin.instances[0].depth.convention)
