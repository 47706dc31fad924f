"""Our Sa2VA port against Sa2VA's own code on the same tiny random-weight checkpoint.

Reference: tests/data/sa2va/sa2va_reference.json, printed by tests/data/sa2va/reference/run_sa2va.py,
which runs magic-research/Sa2VA d01bf3fa8ee239325a007e7b64ee2fd22578b045 (hf/models,
``Sa2VAChatModel.predict_forward``) under transformers 4.42.3 (CPU, float32) on two images of
tests/data/lisa/reasonseg and two clips of tests/data/sa2va/video (six frames: the LLM sees five;
two frames), and (sa2va_reference_multiseg.json) on the MULTI_SEG_BOOSTS checkpoint whose answer holds two
[SEG]. The checkpoints are rebuilt here from the same seed.

Tolerance: both sides run float32; the mask logits pass through two implementations of the same
layers (the LLM's hidden state from one uncached pass here, from cached decoding there; different
attention kernels), whose roundings differ by a few float32 ulps per op (~1e-7 relative) and
accumulate over the tiny model's layers and two bilinear resizes; the reference JSON keeps 7
significant digits (up to 5e-6 on the logits of up to ~20 seen here). Measured: 1.5e-5, 1.3e-5
(images), 1.9e-6 (two-frame video). 1e-4 bounds that with margin and is far below any change of a
mask (the thresholded masks must also be equal).
"""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.sa2va_tiny import MULTI_SEG_BOOSTS, REFERENCE_BOOSTS, build_checkpoint

DATA = Path(__file__).parent / "data" / "sa2va"
LISA_IMAGES = Path(__file__).parent / "data" / "lisa" / "reasonseg" / "val"
REFERENCE = json.loads((DATA / "sa2va_reference.json").read_text())
MULTI = json.loads((DATA / "sa2va_reference_multiseg.json").read_text())
TOLERANCE = 1e-4  # max |logit difference|, float32 on CPU (module docstring)


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    from rvt_bench.adapters.sa2va.adapter import Sa2VAAdapter

    path = build_checkpoint(tmp_path_factory.mktemp("tiny_sa2va"), 0, **REFERENCE_BOOSTS)
    adapter = Sa2VAAdapter(str(path), device="cpu", max_new_tokens=REFERENCE["max_new_tokens"])
    adapter._load()
    return adapter


def run_case(adapter, case):
    from rvt_bench.adapters.sa2va import preprocess, prompts
    from rvt_bench.adapters.sa2va.adapter import llm_text
    from rvt_bench.adapters.sa2va.sam import sam_pixels
    from rvt_bench.core.frames import read_frame

    net, tokenizer, ids, config = adapter._loaded
    video = case["kind"] == "video"
    frames = [read_frame(str((DATA if video else LISA_IMAGES) / f)) for f in case["files"]]
    pixels = preprocess.llm_pixels(frames, video=video)
    template = adapter.video_prompt if video else adapter.image_prompt
    text = template.replace("{query}", case["query"])
    assert text == case["prompt"]
    token_ids = tokenizer.encode(llm_text(text, config, pixels.shape[0], video))
    out = net.run(token_ids, pixels, [sam_pixels(preprocess.sam_frame(f)) for f in frames], frames[0].shape[:2],
                  seg_id=ids[prompts.SEG_TOKEN], img_context_id=ids[prompts.IMG_CONTEXT], eos_id=tokenizer.eos_token_id,
                  max_new_tokens=adapter.max_new_tokens, stop=adapter._stop(tokenizer, config))
    return out


CASES = pytest.mark.parametrize("case", REFERENCE["cases"], ids=lambda c: f"{c['kind']}-{len(c['files'])}-{c['files'][0]}")


@CASES
def test_token_ids_match_sa2va(adapter, case):
    out = run_case(adapter, case)
    assert out.token_ids == case["input_ids"]
    assert out.generated == case["output_ids"]


@CASES
def test_mask_logits_match_sa2va(adapter, case):
    out = run_case(adapter, case)
    expected = torch.tensor(case["logits"]) if case["logits"] else torch.zeros((0, *out.logits.shape[1:]))
    assert out.logits.shape == expected.shape and out.n_seg == len(expected)
    if len(expected):
        assert float((out.logits - expected).abs().max()) <= TOLERANCE
        assert np.array_equal(out.logits.numpy() > 0, expected.numpy() > 0)


def test_references_cover_no_seg_one_seg_two_seg_and_a_video_longer_than_five_frames():
    counts = sorted(len(c["logits"]) for c in REFERENCE["cases"])
    assert counts[0] == 0 and 1 in counts
    assert any(c["kind"] == "video" and len(c["files"]) > 5 for c in REFERENCE["cases"])
    assert any(c["kind"] == "video" and c["logits"] for c in REFERENCE["cases"])
    assert [len(c["logits"]) for c in MULTI["cases"]] == [2]


def test_two_seg_tokens_give_two_mask_stacks_as_sa2va(tmp_path):
    """sa2va_reference_multiseg.json: the MULTI_SEG_BOOSTS checkpoint answers "[SEG][SEG]<|im_end|>"."""
    from rvt_bench.adapters.sa2va.adapter import Sa2VAAdapter

    adapter = Sa2VAAdapter(str(build_checkpoint(tmp_path / "multi", 0, **MULTI_SEG_BOOSTS)), device="cpu",
                           max_new_tokens=MULTI["max_new_tokens"])
    adapter._load()
    (case,) = MULTI["cases"]
    out = run_case(adapter, case)
    expected = torch.tensor(case["logits"])
    assert out.generated == case["output_ids"] and out.n_seg == 2 == len(expected)
    assert out.logits.shape == expected.shape
    assert float((out.logits - expected).abs().max()) <= TOLERANCE
