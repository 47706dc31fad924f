"""The VLM adapter's hf backend (adapters/vlm/hf.py) on a tiny random Qwen2.5-VL checkpoint saved
to disk (tests/tiny_vlm.py) and loaded through AutoModelForImageTextToText / AutoProcessor."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize as qwen_smart_resize

from rvt_bench.adapters.vlm.adapter import VLMAdapter
from rvt_bench.adapters.vlm.backend import VLMRequest
from rvt_bench.adapters.vlm.hf import HFVLM
from rvt_bench.loaders.demo import DemoDataset
from rvt_bench.core.types import AdapterError
from tests.tiny_vlm import build_tiny_vlm
from rvt_bench.harness.config import group_node

REPO = Path(__file__).resolve().parents[1]
# the composed `model` node (schema defaults + conf/model/vlm.yaml), unresolved: as run_bench.py builds it
CONF = OmegaConf.to_container(group_node("model", "vlm"), resolve=False)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return build_tiny_vlm(tmp_path_factory.mktemp("tiny_vlm"))


@pytest.fixture(scope="module")
def backend(checkpoint):
    return HFVLM(model=str(checkpoint), device="cpu", dtype="float32", batch_size=3)


def _frame(h, w, seed):
    return np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8)


REQUESTS = [VLMRequest(None, [("image", _frame(56, 84, 0)), ("text", "find the cup")], 6),
            VLMRequest("Be brief.", [("text", "Frame 0:"), ("image", _frame(56, 56, 1)), ("text", "Frame 4:"),
                                     ("image", _frame(56, 56, 2)), ("text", "what moves?")], 4),
            VLMRequest(None, [("image", _frame(84, 56, 3)), ("text", "a much longer question about the picture")], 5)]


def test_loads_through_the_auto_classes(backend):
    model, processor = backend.components()
    assert type(model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert type(processor).__name__ == "Qwen2_5_VLProcessor"


def test_a_batch_answers_like_one_request_at_a_time(backend):
    batched = backend.generate(REQUESTS)
    alone = [backend.generate([r])[0] for r in REQUESTS]
    assert [r.text for r in batched] == [r.text for r in alone]


def test_a_reply_that_fills_its_budget_ends_with_length(backend):
    replies = backend.generate(REQUESTS)
    for reply, request in zip(replies, REQUESTS):
        assert reply.finish_reason in ("stop", "length")
        assert reply.n_tokens <= request.max_new_tokens + 1
        if reply.finish_reason == "length":
            assert reply.n_tokens == request.max_new_tokens


def test_input_sizes_are_what_the_processor_made_of_each_image(backend):
    frame = _frame(168, 252, 4)  # above the tiny processor's 112 x 112 budget: it shrinks the image
    (reply,) = backend.generate([VLMRequest(None, [("image", frame), ("text", "x")], 2)])
    size = backend.components()[1].image_processor.size
    assert reply.input_sizes == [tuple(qwen_smart_resize(168, 252, factor=28, min_pixels=size["shortest_edge"],
                                                         max_pixels=size["longest_edge"]))]


def test_the_adapter_answers_a_demo_question_through_it(checkpoint):
    sample = next(s for s in DemoDataset(REPO / "demo") if s.id == "rvt/vqa/launch_pad")
    kw = {k: CONF[k] for k in ("coords", "think", "grounding_fill", "prompts")}
    adapter = VLMAdapter(backend="hf", model=str(checkpoint), device="cpu", dtype="float32",
                         frames=dict(CONF["frames"], num_frames=2, max_pixels=112 * 112),
                         generation=dict(CONF["generation"], max_new_tokens=4), **kw)
    try:
        pred = adapter.predict(sample)
        assert pred.text and pred.trace["n_tokens"] <= 5 and pred.trace["backend"].startswith("hf:")
    except AdapterError as exc:  # random weights may write nothing but whitespace
        assert getattr(exc, "reason", None) == "empty_answer"
    assert adapter.fingerprint()["backend"]["revision"].startswith("local-")


def test_a_missing_checkpoint_fails_preflight_naming_it(tmp_path):
    with pytest.raises(AdapterError, match="model.model"):
        HFVLM(model=str(tmp_path / "nothing"), device="cpu").preflight()


def test_seg_zeros_adapter_drives_the_same_backend_on_the_tiny_checkpoint(checkpoint):
    # adapters/segzero sends the 840 x 840 image through this backend; random weights write no
    # readable answer, which is the parse failure the authors' script scores 0
    from rvt_bench.adapters.segzero.adapter import SegZeroAdapter

    node = OmegaConf.to_container(group_node("model", "seg_zero"), resolve=True)
    keep = ("name", "answer_format", "template", "example", "strip", "resize")
    adapter = SegZeroAdapter(backend="hf", model=str(checkpoint), device="cpu", dtype="float32", max_new_tokens=4,
                             **{k: node[k] for k in keep})
    sample = next(s for s in DemoDataset(REPO / "demo") if s.id == "image/coffee_cup")
    with pytest.raises(AdapterError) as failure:
        adapter.predict(sample)
    assert failure.value.kind == "parse" and failure.value.trace["backend"].startswith("hf:")
    assert failure.value.trace["prompt"].startswith("Please find 'the container used for hot drinks'")
