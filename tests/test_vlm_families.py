"""The VLM family presets (conf/model/qwen2_5_vl.yaml, qwen3_vl.yaml, internvl3.yaml;
adapters/vlm/families.py): each family's reply, written the way that family writes boxes, lands on
a known object of a non-square image the adapter resized; a convention that contradicts the family
stops before any sample; every prediction's trace records the convention it was read in."""
from __future__ import annotations

import copy
import dataclasses
import functools
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from rvt_bench.adapters.vlm.adapter import VLMAdapter
from rvt_bench.core import masks as mask_io
from rvt_bench.core.types import AdapterError
from rvt_bench.harness.config import group_node
from rvt_bench.loaders.demo import DemoDataset
from rvt_bench.metrics.boxes import box_iou
from tests.test_vlm_adapter import Canned

REPO = Path(__file__).resolve().parents[1]
SETTINGS = ("name", "model", "family", "coords", "frames", "generation", "think", "grounding_fill", "prompts")

# demo image/coffee_cup: a 600 x 400 (W x H) frame; the cup's mask spans x 174..408, y 17..307 (its bbox)
CUP = [174.0, 17.0, 408.0, 307.0]
REPLIES = {
    # absolute pixels of the input: smart_resize(400, 600, factor 28) = 392 x 588 (x and y * 0.98)
    "qwen2_5_vl": ('[{"bbox_2d": [171, 17, 400, 301], "point_2d": [285, 160], "label": "cup"}]', [392, 588]),
    # 0-1000 of the image: x / 600 * 1000, y / 400 * 1000; input smart_resize(400, 600, factor 32) = 384 x 608
    "qwen3_vl": ('```json\n[{"bbox_2d": [290, 43, 680, 768], "label": "cup"}]\n```', [384, 608]),
    # InternVL's grounding reply: the same 0-1000 numbers in <box>[[...]]</box>
    "internvl3": ("<ref>the container used for hot drinks</ref><box>[[290, 43, 680, 768]]</box>", [392, 588]),
}


@pytest.fixture(scope="module")
def cup():
    sample = next(s for s in DemoDataset(REPO / "demo", split="demo") if s.id == "image/coffee_cup")
    ys, xs = np.nonzero(mask_io.decode(sample.target.masks[0]))
    assert [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1] == CUP
    return dataclasses.replace(sample, task="grounding")


@functools.lru_cache(maxsize=None)
def _composed(name: str, overrides: tuple[str, ...]) -> dict:
    node = OmegaConf.to_container(group_node("model", name, list(overrides)), resolve=True)
    return {k: node[k] for k in SETTINGS}


def preset(name: str, overrides: list[str] | None = None) -> dict:
    return copy.deepcopy(_composed(name, tuple(overrides or ())))


def adapter(name: str, reply: str, overrides: list[str] | None = None) -> tuple[VLMAdapter, Canned]:
    backend = Canned(reply)
    return VLMAdapter(backend=backend, **preset(name, overrides)), backend


@pytest.mark.parametrize("family", sorted(REPLIES))
def test_each_familys_reply_lands_on_the_cup_of_the_resized_non_square_image(cup, family):
    reply, input_hw = REPLIES[family]
    model, _ = adapter(family, reply)
    pred = model.predict(cup)
    assert pred.trace["input_size"] == input_hw
    assert box_iou(pred.boxes[0][0], CUP) > 0.9


@pytest.mark.parametrize("family, wrong", [("qwen2_5_vl", "qwen3_vl"), ("qwen3_vl", "qwen2_5_vl"),
                                           ("internvl3", "qwen2_5_vl")])
def test_the_same_reply_read_in_another_convention_misses_the_cup(cup, family, wrong):
    # what a harness that picks the wrong convention would score: why the presets exist
    reply, _ = REPLIES[family]
    model, _ = adapter(wrong, reply)
    assert box_iou(model.predict(cup).boxes[0][0], CUP) < 0.6


@pytest.mark.parametrize("family, coords", [("qwen2_5_vl", "qwen2_5_vl"), ("qwen3_vl", "qwen3_vl"),
                                            ("internvl3", "internvl")])
def test_every_prediction_records_the_convention_and_family(cup, family, coords):
    model, _ = adapter(family, REPLIES[family][0])
    trace = model.predict(cup).trace
    assert (trace["coords"], trace["family"]) == (coords, family)
    assert model.fingerprint()["family"] == family


def test_the_prompts_ask_for_the_familys_own_coordinates(cup):
    texts = {}
    for name in REPLIES:
        model, backend = adapter(name, REPLIES[name][0])
        model.predict(cup)
        texts[name] = backend.requests[0].content[-1][1]
    assert "from 0 to 1000" in texts["qwen3_vl"] and "in pixels of the image as you see it" in texts["qwen2_5_vl"]
    assert "<ref>the container used for hot drinks</ref>" in texts["internvl3"]


@pytest.mark.parametrize("family, override", [("qwen3_vl", "model.coords=qwen2_5_vl"),
                                              ("qwen2_5_vl", "model.coords=qwen2_vl"),
                                              ("qwen3_vl", "model.frames.factor=28")])
def test_a_setting_that_contradicts_the_family_is_refused(family, override):
    with pytest.raises(AdapterError, match=f"contradicts model.family={family}"):
        adapter(family, "[]", [override])


def test_a_model_id_of_another_family_with_the_default_convention_is_refused():
    with pytest.raises(AdapterError, match=r"is a qwen3_vl model.*\+model=qwen3_vl"):
        adapter("vlm", "[]", ["model.model=Qwen/Qwen3-VL-8B-Instruct"])
    with pytest.raises(AdapterError, match="is a internvl3 model"):
        adapter("vlm", "[]", ["model.model=OpenGVLab/InternVL3-8B"])


def test_custom_keeps_the_convention_as_written():
    model, _ = adapter("vlm", "[]", ["model.model=Qwen/Qwen3-VL-8B-Instruct", "model.family=custom"])
    assert model.coords == "qwen2_5_vl" and model.family == "custom"


def test_an_unknown_family_is_refused():
    with pytest.raises(AdapterError, match="not a known family"):
        adapter("vlm", "[]", ["model.family=qwen9_vl"])
