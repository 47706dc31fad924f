"""Our LISA port against LISA's own code on the same tiny random-weight checkpoint.

Reference: tests/data/lisa/lisa_reference.json, printed by tests/data/lisa/reference/run_lisa.py,
which runs dvlab-research/LISA 3cb2d4301f1af4691bd4f3938335ef06e76f155a under transformers 4.31.0
(CPU, float32): the eval path (ValDataset + collate_fn + model_forward(inference=True), as
train_ds.py validate) and the generate path (chat.py main -> LISAForCausalLM.evaluate), on the two
images of tests/data/lisa/reasonseg. The checkpoint is rebuilt here from the same seed.
"""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rvt_bench.adapters.lisa.adapter import LisaAdapter
from rvt_bench.adapters.lisa.preprocess import clip_input, sam_input
from rvt_bench.core.frames import read_frame
from tests.lisa_tiny import REFERENCE_BOOSTS, build_checkpoint

DATA = Path(__file__).parent / "data" / "lisa"
REFERENCE = json.loads((DATA / "lisa_reference.json").read_text())
TOLERANCE = 1e-5  # max |logit difference|, float32 on CPU


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    path = build_checkpoint(tmp_path_factory.mktemp("tiny_lisa"), 0, **REFERENCE_BOOSTS)
    return LisaAdapter(str(path), device="cpu")._load()


def run_case(loaded, case, token_ids, max_new_tokens=0):
    net, tokenizer, processor, seg_id, _ = loaded
    image = read_frame(str(DATA / "reasonseg" / "val" / case["image"]))
    sam_pixels, resized = sam_input(image)
    return net.run(token_ids, clip_input(image, processor), sam_pixels, resized, image.shape[:2], seg_id,
                   max_new_tokens=max_new_tokens, eos_id=tokenizer.eos_token_id)


def cases(mode):
    return pytest.mark.parametrize("case", [c for c in REFERENCE["cases"] if c["mode"] == mode], ids=lambda c: c["image"])


@cases("eval")
def test_eval_path_logits_match_lisa(loaded, case):
    out = run_case(loaded, case, case["input_ids"])
    expected = torch.tensor(case["logits"])
    assert out.logits.shape == expected.shape == (1, *read_frame(str(DATA / "reasonseg" / "val" / case["image"])).shape[:2])
    assert float((out.logits - expected).abs().max()) <= TOLERANCE


@cases("eval")
def test_eval_path_masks_equal_lisa(loaded, case):
    out = run_case(loaded, case, case["input_ids"])
    assert np.array_equal(out.logits.numpy() > 0, np.array(case["logits"]) > 0)


@cases("generate")
def test_generate_path_tokens_match_lisa(loaded, case):
    from rvt_bench.adapters.lisa import prompts

    tokenizer = loaded[1]
    ids = prompts.tokenize_with_image(prompts.generate_prompt(case["prompt"], "{query}"), tokenizer)
    out = run_case(loaded, case, ids, max_new_tokens=512)
    assert out.token_ids == case["output_ids"]


@cases("generate")
def test_generate_path_logits_match_lisa(loaded, case):
    from rvt_bench.adapters.lisa import prompts

    ids = prompts.tokenize_with_image(prompts.generate_prompt(case["prompt"], "{query}"), loaded[1])
    out = run_case(loaded, case, ids, max_new_tokens=512)
    expected = torch.tensor(case["logits"]).reshape(len(case["logits"]), *out.logits.shape[1:])
    assert out.logits.shape == expected.shape
    if len(expected):
        assert float((out.logits - expected).abs().max()) <= TOLERANCE


def test_reference_generate_cases_cover_no_seg_and_several_seg():
    counts = sorted(len(c["logits"]) for c in REFERENCE["cases"] if c["mode"] == "generate")
    assert counts[0] == 0 and counts[-1] >= 2
