"""Our Sa2VA port against Sa2VA's own code on the same tiny random-weight checkpoint.

Reference: tests/data/sa2va/sa2va_reference.json, printed by tests/data/sa2va/reference/run_sa2va.py,
which runs magic-research/Sa2VA d01bf3fa8ee239325a007e7b64ee2fd22578b045 (hf/models,
``Sa2VAChatModel.predict_forward``) under transformers 4.42.3 (CPU, float32; its docstring says how to
set up that environment) on two images of
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

Videos longer than five frames (sa2va_reference_video.json, the VIDEO_SEG_BOOSTS checkpoint): frames
5 onwards are tracked from SAM2's memory, four memory-attention layers over up to 11 frames' memories
and the object pointers, and both sides round each memory to bfloat16 before storing it (Sa2VA's
``maskmem_features.to(torch.bfloat16)``): a float32 difference of a few ulps moves a stored value by one
bfloat16 step (2^-8 relative) only where it lies at a rounding boundary. Measured: 5.2e-6 (twelve
frames), 6.0e-6 (eight) on logits up to 6.3, no larger on the tracked frames than on the prompted
ones; VIDEO_TOLERANCE = 1e-4 keeps the same margin, and the thresholded masks must be equal. The
'?' query and SAM2's input (sha256, float32 and the bfloat16 image of sa2va_reference_bf16.json) are
compared exactly.

bfloat16 (sa2va_reference_bf16_image.json, the first image): Sa2VA prepared in bfloat16, SAM2 under
``language_embd_inference``'s autocast with its device_type "cuda" mapped to "cpu" (run_sa2va.py
--cpu-autocast; ours: model.py opens the same region under CPU autocast for a bfloat16 model on the
CPU). Both sides round at the same places, so they agree far closer than bf16's unit roundoff
(measured: 5.7e-6 on logits up to 19.1, no pixel flipped); Sa2VA's own bf16 logits differ from its
float32 ones by 0.245 (6 of 3072 pixels flipped). BF16_TOLERANCE, one unit roundoff 2^-8 of the
largest |logit| (0.075 here), sits between the two: a port that rounds anywhere else than Sa2VA, or
runs SAM2 in float32, fails it. Token ids are compared exactly.
"""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.sa2va_tiny import MULTI_SEG_BOOSTS, REFERENCE_BOOSTS, VIDEO_SEG_BOOSTS, build_checkpoint

DATA = Path(__file__).parent / "data" / "sa2va"
LISA_IMAGES = Path(__file__).parent / "data" / "lisa" / "reasonseg" / "val"
REFERENCE = json.loads((DATA / "sa2va_reference.json").read_text())
MULTI = json.loads((DATA / "sa2va_reference_multiseg.json").read_text())
TOLERANCE = 1e-4  # max |logit difference|, float32 on CPU (module docstring)
VIDEO_TOLERANCE = 1e-4  # the same, on frames tracked from SAM2 memory (module docstring)


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
    sam_frames = [sam_pixels(preprocess.sam_frame(f), net.dtype, image=not video) for f in frames]
    out = net.run(token_ids, pixels, sam_frames, frames[0].shape[:2],
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
    video = [c for c in json.loads((DATA / "sa2va_reference_video.json").read_text())["cases"] if "error" not in c]
    assert any(len(c["files"]) > 5 and len(c["logits"]) == 1 for c in video)  # a [SEG] tracked past frame 4


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


VIDEO = json.loads((DATA / "sa2va_reference_video.json").read_text())
VIDEO_CASES = pytest.mark.parametrize("case", [c for c in VIDEO["cases"] if "error" not in c],
                                      ids=lambda c: f"{c['kind']}-{len(c['files'])}")


@pytest.fixture(scope="module")
def video_adapter(tmp_path_factory):
    from rvt_bench.adapters.sa2va.adapter import Sa2VAAdapter

    path = build_checkpoint(tmp_path_factory.mktemp("tiny_sa2va_video"), 0, **VIDEO_SEG_BOOSTS)
    adapter = Sa2VAAdapter(str(path), device="cpu", max_new_tokens=VIDEO["max_new_tokens"])
    adapter._load()
    return adapter


@VIDEO_CASES
def test_video_longer_than_five_frames_is_tracked_from_sam2_memory_as_sa2va(video_adapter, case):
    """sa2va_reference_video.json: twelve and eight frames, one [SEG] from the first five; Sa2VA
    prompts frames 0-4 with it and tracks frames 5.. from SAM2's memory (propagate_in_video).
    Tolerance: VIDEO_TOLERANCE (module docstring)."""
    out = run_case(video_adapter, case)
    assert out.token_ids == case["input_ids"] and out.generated == case["output_ids"]
    expected = torch.tensor(case["logits"])
    assert len(expected) == 1 and out.logits.shape == expected.shape == (1, len(case["files"]), 30, 40)
    foreground = (expected[0] > 0).float().mean(dim=(1, 2))
    assert 0 < foreground.min() and foreground.max() < 1 and len(set(foreground.tolist())) > 3  # not degenerate
    assert float((out.logits - expected).abs().max()) <= VIDEO_TOLERANCE
    assert np.array_equal(out.logits.numpy() > 0, expected.numpy() > 0)


def test_a_video_query_holding_a_question_mark_fails_as_in_sa2va(video_adapter):
    """sa2va_reference_video.json, "which hand holds the coin?": refVOS.py passes the query alone (no
    <image>), so Sa2VA's generate fails its assert on the image tokens; the sample fails here with
    that reason (question_prompt="refvos", the default), and question_prompt="template" prompts it."""
    from rvt_bench.adapters.sa2va import prompts
    from rvt_bench.adapters.sa2va.adapter import Sa2VAAdapter
    from rvt_bench.core.types import AdapterError, Sample, Target

    (case,) = [c for c in VIDEO["cases"] if "error" in c]
    assert "?" in case["query"] and case["error"].startswith("AssertionError") and "selected.sum() != 0" in case["error"]
    sample = Sample(id="q", dataset="fixture", split="val", modality="video", frames=[str(DATA / f) for f in case["files"]],
                    frame_ids=[str(i) for i in range(len(case["files"]))], query=case["query"], task="segmentation",
                    target=Target())
    assert video_adapter.prompt(sample) == case["prompt"] == case["query"]
    _, tokenizer, _, config = video_adapter._loaded
    instruction = prompts.template(config.template)["INSTRUCTION"].format(input=case["prompt"], round=1, bot_name="BOT")
    assert tokenizer.encode(instruction) == case["input_ids"]  # what Sa2VA fed its generate
    with pytest.raises(AdapterError, match=r"assert selected.sum\(\) != 0"):
        video_adapter.predict(sample)
    variant = Sa2VAAdapter(video_adapter.checkpoint, device="cpu", max_new_tokens=4, question_prompt="template")
    assert variant.prompt(sample) == "<image>\nPlease segment which hand holds the coin?."


BF16 = json.loads((DATA / "sa2va_reference_bf16.json").read_text())


def sam_input_digest(frames_1024: list, dtype, image: bool) -> dict:
    """sha256 of our SAM2 input's raw bytes, as run_sa2va.py ``sam_input`` hashes Sa2VA's."""
    import hashlib

    from rvt_bench.adapters.sa2va.sam import sam_pixels

    g = torch.stack([sam_pixels(f, dtype, image=image) for f in frames_1024])
    raw = g.contiguous().view(torch.int16) if g.dtype == torch.bfloat16 else g.contiguous()
    return {"dtype": str(g.dtype).replace("torch.", ""), "shape": list(g.shape), "sha256": hashlib.sha256(raw.numpy().tobytes()).hexdigest()}


@pytest.mark.parametrize("case", [*VIDEO["cases"], *BF16["cases"]], ids=lambda c: f"{c['kind']}-{len(c['files'])}-{c['dtype']}")
def test_sam2_input_is_sa2va_bit_for_bit(case):
    """SAM2's normalised input (``preprocess_image`` in ``predict_forward``): a video frame in float32
    then cast; an image cast to the model's dtype first, so in bfloat16 (sa2va_reference_bf16.json,
    the model prepared in bfloat16 as the authors' evaluation runs it) every step rounds to bfloat16."""
    from rvt_bench.adapters.sa2va import preprocess
    from rvt_bench.core.frames import read_frame

    video = case["kind"] == "video"
    frames = [preprocess.sam_frame(read_frame(str((DATA if video else LISA_IMAGES) / f))) for f in case["files"]]
    expected = {k: case["sam_input"][k] for k in ("dtype", "shape", "sha256")}
    assert sam_input_digest(frames, getattr(torch, case["dtype"]), image=not video) == expected
    if not video and case["dtype"] == "bfloat16":  # normalising in float32 and then casting differs
        assert sam_input_digest(frames, torch.bfloat16, image=False)["sha256"] != expected["sha256"]


BF16_IMAGE = json.loads((DATA / "sa2va_reference_bf16_image.json").read_text())
BF16_TOLERANCE = 2.0 ** -8  # of max |reference logit|: one bfloat16 unit roundoff (module docstring)


def bf16_adapter(checkpoint: str, max_new_tokens: int):
    """The adapter with its network built and loaded in bfloat16 on the CPU (the adapter itself refuses
    half precision on the CPU; run_sa2va.py --bfloat16 --cpu-autocast is the authors' side)."""
    from rvt_bench.adapters.sa2va import model as sa2va_model
    from rvt_bench.adapters.sa2va.adapter import Sa2VAAdapter
    from rvt_bench.adapters.sa2va.weights import load_into

    adapter = Sa2VAAdapter(checkpoint, device="cpu", max_new_tokens=max_new_tokens)
    _, tokenizer, ids, config = adapter._load()
    net = sa2va_model.build(config, "cpu", torch.bfloat16)
    load_into(net, Path(checkpoint))
    adapter._loaded = (net, tokenizer, ids, config)
    return adapter


def test_bf16_image_matches_sa2va_bf16(adapter):
    """sa2va_reference_bf16_image.json: Sa2VA in bfloat16 (``preparing_for_generation(torch_dtype=
    bfloat16)``), SAM2 under its autocast mapped from CUDA to the CPU; ours the same (model.py)."""
    (case,) = BF16_IMAGE["cases"]
    assert BF16_IMAGE["cpu_autocast"] and case["dtype"] == "bfloat16"
    out = run_case(bf16_adapter(adapter.checkpoint, BF16_IMAGE["max_new_tokens"]), case)
    assert out.token_ids == case["input_ids"] and out.generated == case["output_ids"]
    expected = torch.tensor(case["logits"])
    assert out.logits.shape == expected.shape == (1, 1, 48, 64)
    bound = BF16_TOLERANCE * float(expected.abs().max())
    assert float((out.logits - expected).abs().max()) <= bound
    flipped = (out.logits > 0) != (expected > 0)
    assert bool((expected[flipped].abs() <= bound).all())


def test_bf16_bound_is_below_sa2va_own_bf16_spread():
    """The bound tells bfloat16 from float32: Sa2VA's own bf16 logits differ from its float32 ones
    (sa2va_reference.json, same case) by more than it admits, so a port running SAM2 in float32 fails."""
    (bf16,) = BF16_IMAGE["cases"]
    (fp32,) = [c for c in REFERENCE["cases"] if c["files"] == bf16["files"] and c["query"] == bf16["query"]]
    assert fp32["output_ids"] == bf16["output_ids"]
    a, b = torch.tensor(fp32["logits"]), torch.tensor(bf16["logits"])
    assert float((a - b).abs().max()) > 2 * BF16_TOLERANCE * float(b.abs().max())

