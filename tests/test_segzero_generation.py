"""Seg-Zero's and VisionReasoner's generation side held to their authors' own code (issue 42 item 1):
the prompt, the chat messages, the 840 x 840 resize, the processor's inputs, the model's precision,
the generate arguments, the generated ids, the decoded reply and the scaling back to the frame.

tests/data/segzero/generation.json was written by tests/data/segzero/reference/run_segzero_generation.py
running Seg-Zero @42a3345 evaluation.py / evaluation_visionreasoner.py ``main`` and VisionReasoner
@a455092 ``VisionReasonerModel.segment_objects`` on the tiny random Qwen2.5-VL of
tests/data/segzero/reference/tiny_qwen25vl.py (bf16, as they load it) and three JPEG frames
(640 x 480, 333 x 500, grayscale 1000 x 562; a '?' query, a long quoted one). Here the port
(adapters/segzero through the hf backend, configured by conf/model/seg_zero.yaml / visionreasoner.yaml)
runs on the same checkpoint files and frames, wrapped by the same Recorder (new tokens capped at 40
on both sides; the budget each side asks is compared).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from rvt_bench.adapters.segzero.adapter import SegZeroAdapter
from rvt_bench.core.types import Sample, Target
from rvt_bench.harness.config import group_node
from tests.data.segzero.reference.run_segzero_generation import Recorder
from tests.data.segzero.reference.tiny_qwen25vl import build_checkpoint, weights_digest

DATA = Path(__file__).parent / "data" / "segzero"
REF = json.loads((DATA / "generation.json").read_text())
# what each published path is in the port: the config, and the overrides that select the path
PATHS = {"seg_zero": ("seg_zero", {}), "visionreasoner": ("visionreasoner", {}),
         "visionreasoner_model": ("visionreasoner", {"answer_format": "visionreasoner_model", "max_new_tokens": 2048,
                                                     "batch_size": 1})}
KEYS = ("name", "answer_format", "template", "example", "strip", "resize", "max_new_tokens", "dtype", "batch_size")


def samples(task="grounding"):
    return [Sample(id=case["file"][:-4], dataset="reasonseg", split="val", modality="image",
                   frames=[str(DATA / "generation" / case["file"])], frame_ids=[case["file"][:-4]], query=case["query"],
                   task=task, target=Target(boxes=[[[0.0, 0.0, 1.0, 1.0]]])) for case in REF["cases"]]


def adapter(path, checkpoint=None, **kwargs):
    name, overrides = PATHS[path]
    node = dict(OmegaConf.to_container(group_node("model", name), resolve=True), **overrides)
    args = {k: node[k] for k in KEYS}
    if checkpoint is None:
        return SegZeroAdapter(model="canned", **{k: v for k, v in args.items() if k not in ("dtype", "batch_size")}, **kwargs)
    return SegZeroAdapter(backend="hf", model=str(checkpoint), device="cpu", **dict(args, **kwargs))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from transformers import Qwen2_5_VLForConditionalGeneration

    path = build_checkpoint(tmp_path_factory.mktemp("segzero_qwen25vl"))
    assert weights_digest(Qwen2_5_VLForConditionalGeneration.from_pretrained(path)) == REF["weights_digest"]
    return path


def run_port(path, checkpoint, **kwargs):
    port = adapter(path, checkpoint, **kwargs)
    model, processor = port.backend.components()
    rec = Recorder(cap=REF["cap"])
    rec.model(model), rec.processor(processor)
    preds = port.predict_batch(samples())
    return port, rec, preds


@pytest.fixture(scope="module")
def ported(checkpoint):
    import torch

    torch.set_num_threads(2)
    return {path: run_port(path, checkpoint) for path in PATHS}


@pytest.mark.parametrize("path", list(PATHS))
def test_the_port_builds_the_authors_inputs(path, ported):
    theirs = REF[path]
    _, rec, _ = ported[path]
    assert len(rec.calls) == len(theirs["processor_calls"]) >= 1
    for mine, ref in zip(rec.calls, theirs["processor_calls"]):
        assert mine["text"] == ref["text"]  # template, query case / strip, chat template, system turn
        assert mine["images_sha256"] == ref["images_sha256"] and mine["images_size"] == [[840, 840]] * len(ref["text"])
        assert mine["input_ids"] == ref["input_ids"] and mine["attention_mask"] == ref["attention_mask"]
        assert mine["image_grid_thw"] == ref["image_grid_thw"]
        # the same uint8 images through the same processor: the same float32 arithmetic, so the same
        # bytes; the sum and sample are there to say by how much when a processor version moves it
        mp, rp = mine["pixel_values"], ref["pixel_values"]
        assert mp["shape"] == rp["shape"]
        assert np.allclose(mp["sample"], rp["sample"], rtol=0, atol=1e-6) and abs(mp["sum"] - rp["sum"]) < 1e-3
        assert mp["sha256"] == rp["sha256"]


@pytest.mark.parametrize("path", list(PATHS))
def test_the_port_generates_the_authors_ids_in_their_precision(path, ported):
    theirs = REF[path]
    port, rec, preds = ported[path]
    assert theirs["loaded"]["model"]["torch_dtype"] == "bfloat16"
    assert [g["model_dtype"] for g in rec.generates] == [theirs["loaded"]["model"]["torch_dtype"]] * len(rec.generates)
    for mine, ref in zip(rec.generates, theirs["generates"]):
        asked = dict(ref["asked"])
        assert asked.pop("use_cache") is True  # generate's default, which the port leaves
        assert mine["asked"] == asked  # max_new_tokens (1024 / 2048), do_sample False
        assert mine["generated"] == ref["generated"]
    generated = [row for g in theirs["generates"] for row in g["generated"]]
    assert all(len(set(row)) >= 15 for row in generated)  # not one repeated token
    assert [p.trace["reply"] for p in preds] == theirs["decoded"]


@pytest.mark.parametrize("path", list(PATHS))
def test_the_port_scales_a_readable_answer_back_as_the_authors(path):
    from tests.test_vlm_adapter import Canned

    theirs = REF[path]
    reply = REF["readable"]["seg_zero" if path == "seg_zero" else "visionreasoner"]
    port = adapter(path, backend=Canned(*[reply] * len(REF["cases"])))
    preds = port.predict_batch(samples())
    for pred, case, factors, scaled in zip(preds, REF["cases"], theirs["factors"], theirs["scaled"]):
        width, height = case["size"]
        assert factors == [width / 840, height / 840]
        if path == "seg_zero":
            assert pred.boxes == [[scaled[0]]] and pred.trace["points"] == [scaled[1]]
        else:
            assert pred.boxes == [scaled[0]] and pred.trace["points"] == [[p] for p in scaled[1]]


def test_the_hf_backend_keeps_the_float32_rotary_buffers_that_from_pretrained_keeps(checkpoint):
    # a float32 load cast afterwards with .to(bfloat16) rounds inv_freq too: the generated ids then
    # leave the authors' after 12-22 tokens on this checkpoint
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    from rvt_bench.adapters.vlm.hf import HFVLM

    model, _ = HFVLM(model=str(checkpoint), device="cpu", dtype="bfloat16").components()
    theirs = Qwen2_5_VLForConditionalGeneration.from_pretrained(checkpoint, torch_dtype=torch.bfloat16)
    mine = dict(model.named_buffers())
    assert model.dtype == torch.bfloat16 and mine
    for name, buf in theirs.named_buffers():
        assert mine[name].dtype == buf.dtype and torch.equal(mine[name], buf), name
