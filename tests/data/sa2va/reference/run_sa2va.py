"""Print Sa2VA's own outputs on a tiny checkpoint, for tests/test_sa2va_equivalence.py.

Runs the authors' code, magic-research/Sa2VA d01bf3fa8ee239325a007e7b64ee2fd22578b045,
projects/llava_sam2/hf/models/ (``Sa2VAChatModel.predict_forward``, image and video), imported from a
checkout outside this repository, under transformers 4.42.3 (Sa2VA's requirements.txt), timm 1.0.9,
peft 0.11.1, CPU, float32 (``--bfloat16``: the model prepared in bfloat16, as the authors' evaluation
runs it).

Environment (outside the repository, never committed): a virtual environment that sees the project's
torch but has its own pinned packages first, and the authors' hf/ directory:

    /work/main/.venv/bin/python -m venv --without-pip /tmp/sa2va_ref
    echo /work/main/.venv/lib/python3.11/site-packages \
        > /tmp/sa2va_ref/lib/python3.11/site-packages/zz_main.pth     # torch, safetensors, PIL, ...
    .venv/bin/python -m pip --python /tmp/sa2va_ref/bin/python install --no-deps transformers==4.42.3 \
        timm==1.0.9 peft==0.11.1 "tokenizers>=0.19,<0.20" huggingface_hub==0.24.7 numpy==1.26.4 einops==0.8.0
    git -C SA2VA_CLONE archive d01bf3fa8ee239325a007e7b64ee2fd22578b045 projects/llava_sam2/hf | tar -x -C /tmp/sa2va_src
    # SA2VA_CHECKOUT below = /tmp/sa2va_src; run from a directory without a sam2.py (e.g. /tmp)

Commands (python = /tmp/sa2va_ref/bin/python):

    python -m tests.sa2va_tiny /tmp/tiny_sa2va --reference
    python tests/data/sa2va/reference/run_sa2va.py /tmp/tiny_sa2va SA2VA_CHECKOUT/projects/llava_sam2/hf \
        tests/data/sa2va/sa2va_reference.json 32 0 1 2 3
    # two [SEG]: the MULTI_SEG_BOOSTS checkpoint, 4 new tokens, the first image
    python -c "from tests.sa2va_tiny import *; build_checkpoint('/tmp/tiny_sa2va_multi', 0, **MULTI_SEG_BOOSTS)"
    python tests/data/sa2va/reference/run_sa2va.py /tmp/tiny_sa2va_multi SA2VA_CHECKOUT/projects/llava_sam2/hf \
        tests/data/sa2va/sa2va_reference_multiseg.json 4 0
    # videos longer than five frames and a '?' query: the VIDEO_SEG_BOOSTS checkpoint, cases 4-6
    python -c "from tests.sa2va_tiny import *; build_checkpoint('/tmp/tiny_sa2va_video', 0, **VIDEO_SEG_BOOSTS)"
    python tests/data/sa2va/reference/run_sa2va.py /tmp/tiny_sa2va_video SA2VA_CHECKOUT/projects/llava_sam2/hf \
        tests/data/sa2va/sa2va_reference_video.json 32 4 5 6
    # the image path in bfloat16 (case 7; the reference checkpoint)
    python tests/data/sa2va/reference/run_sa2va.py /tmp/tiny_sa2va SA2VA_CHECKOUT/projects/llava_sam2/hf \
        tests/data/sa2va/sa2va_reference_bf16.json 32 7 --bfloat16

    # bfloat16 with SAM2's autocast on the CPU (--cpu-autocast, a shim: see below): the first image
    # (reference checkpoint) and the eight-frame clip (VIDEO_SEG_BOOSTS checkpoint)
    python tests/data/sa2va/reference/run_sa2va.py /tmp/tiny_sa2va SA2VA_CHECKOUT/projects/llava_sam2/hf \
        tests/data/sa2va/sa2va_reference_bf16_image.json 32 0 --bfloat16 --cpu-autocast
    python tests/data/sa2va/reference/run_sa2va.py /tmp/tiny_sa2va_video SA2VA_CHECKOUT/projects/llava_sam2/hf \
        tests/data/sa2va/sa2va_reference_bf16_video.json 32 5 --bfloat16 --cpu-autocast

A case whose ``predict_forward`` raises is recorded with ``error`` (the exception, file:line, code,
message) and what was seen before it: the '?' query (refVOS.py passes it without SEG_PROMPT, so the
prompt has no image tokens and ``generate``'s ``assert selected.sum() != 0`` fails), and the bfloat16
image (its SAM2 memory encoder gets a float32 mask for bfloat16 weights on a CPU, where the CUDA
autocast is off: ``RuntimeError`` in conv2d; SAM2's input is recorded before that).

What is shimmed (none of it touches the math):
- ``torch.Tensor.cuda`` returns the tensor itself (predict_forward and SAM2VideoPredictor move
  inputs with ``.cuda()``; there is no GPU), and ``SAM2VideoPredictor.init_state`` records the CPU as
  its ``device`` / ``storage_device`` (it hard-codes ``torch.device("cuda")``).
- ``SAM2.build_image_encoder`` builds the Hiera trunk with the checkpoint's ``rvt_bench_sam2_trunk``
  sizes (the authors' code always builds Hiera-L; the tiny checkpoint's trunk is 8 wide), the same
  Hiera / FpnNeck / ImageEncoder classes and every other argument as the authors'.
- ``--cpu-autocast`` only: ``torch.autocast`` maps device_type "cuda" to "cpu" (Sa2VA's one autocast,
  sam2.py:336 ``language_embd_inference``: ``torch.autocast(device_type="cuda", dtype=torch.bfloat16)``,
  inert on a CPU). CPU autocast's op lists are not CUDA's (CUDA's runs layer_norm in float32, the
  CPU's does not): the eight-frame clip stops at frame 5, the first tracked from memory
  (``RuntimeError`` in layer_norm, recorded); the image runs through.
- flash-attn is absent: the authors' code falls back to its own eager attention (its try/except).

Weights: the safetensors file is loaded into ``Sa2VAChatModel`` with ``load_state_dict(strict=True)``
(every released name present, none unknown). ``preparing_for_generation(tokenizer, max_new_tokens,
torch_dtype=torch.float32)`` (bfloat16 with ``--bfloat16``) is called first (the authors' API; predict_forward would otherwise call
it with bfloat16 and 2048 tokens). Printed per case: the prompt, its token ids, the generated ids and
text, the mask logits of each [SEG] (``language_embd_inference``'s output, every frame: the first
five prompted, the rest tracked by ``propagate_in_video``, interpolated to the frame size exactly as
predict_forward does it, checked here against predict_forward's own boolean masks, 7 significant
digits), and SAM2's input as ``preprocess_image`` returned it (dtype, shape, sha256 of its bytes).
"""
from __future__ import annotations

import hashlib
import json
import sys
import traceback
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

HERE = Path(__file__).resolve().parent
DATA = HERE.parent
LISA_IMAGES = DATA.parent / "lisa" / "reasonseg" / "val"
IMAGE_PROMPT = "<image>\n Please segment {} in this image."   # evaluation/dataset/RES.py
VIDEO_PROMPT = "<image>\nPlease segment {}."                  # evaluation/dataset/refVOS.py SEG_PROMPT
CASES = [
    {"kind": "image", "files": ["bench_by_the_door.jpg"], "query": "the bench by the door"},
    {"kind": "image", "files": ["red_mug.jpg"], "query": "the thing you would drink coffee from"},
    {"kind": "video", "files": [f"video/{i:05d}.png" for i in range(6)], "query": "the coin entering the frame"},
    {"kind": "video", "files": [f"video/{i:05d}.png" for i in range(2)], "query": "the hand holding the coin"},
    # 4-6: on the VIDEO_SEG_BOOSTS checkpoint (sa2va_reference_video.json). Twelve frames (the six
    # fixture frames forth and back): the LLM sees the first five, SAM2 tracks frames 5-11 from memory
    {"kind": "video", "files": [f"video/{i:05d}.png" for i in (0, 1, 2, 3, 4, 5, 4, 3, 2, 1, 0, 1)],
     "query": "the hand holding the coin"},
    {"kind": "video", "files": [f"video/{i:05d}.png" for i in (0, 1, 2, 3, 4, 5, 4, 3)], "query": "the coin entering the frame"},
    # a query holding '?': refVOS.py passes it as the whole prompt, without SEG_PROMPT (no <image>)
    {"kind": "video", "files": [f"video/{i:05d}.png" for i in (0, 1, 2, 3, 4, 5, 4, 3)], "query": "which hand holds the coin?"},
    # 7: the image path with the model in bfloat16 (run with --bfloat16): only the SAM2 input is compared
    {"kind": "image", "files": ["bench_by_the_door.jpg"], "query": "the bench by the door"},
]
MAX_NEW_TOKENS = 32


def video_prompt(query: str) -> str:
    """refVOS.py ``RefVOSDataset.__getitem__``: ``SEG_PROMPT.format(exp) if '?' not in exp else exp``."""
    return VIDEO_PROMPT.format(query) if "?" not in query else query


def sam_input(seen: dict) -> dict | None:
    """The frames ``preprocess_image`` returned (SAM2's input before predict_forward's ``.to(torch_dtype)``,
    a no-op where they already hold it): dtype, shape, sha256 of the raw bytes, every 100003rd value."""
    if "g_pixel_values" not in seen:
        return None
    g = torch.stack(seen["g_pixel_values"])
    raw = g.contiguous().view(torch.int16) if g.dtype == torch.bfloat16 else g.contiguous()
    return {"dtype": str(g.dtype).replace("torch.", ""), "shape": list(g.shape),
            "sha256": hashlib.sha256(raw.numpy().tobytes()).hexdigest(),
            "sample": [float(v) for v in g.float().flatten()[::100003].tolist()]}


def main(checkpoint: str, hf_dir: str, out: str, max_new_tokens: str = str(MAX_NEW_TOKENS), *case_indices: str) -> None:
    dtype = torch.float32
    cpu_autocast = "--cpu-autocast" in case_indices
    if cpu_autocast:
        case_indices = tuple(i for i in case_indices if i != "--cpu-autocast")
    if case_indices and case_indices[-1] == "--bfloat16":
        dtype, case_indices = torch.bfloat16, case_indices[:-1]
    budget = int(max_new_tokens)
    chosen = [CASES[int(i)] for i in case_indices] if case_indices else CASES
    sys.path.insert(0, hf_dir)
    from models import sam2 as sam2_mod  # noqa: the authors' package (hf/models, relative imports)
    from models.configuration_sa2va_chat import Sa2VAChatConfig
    from models.modeling_sa2va_chat import Sa2VAChatModel
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    raw = json.loads((Path(checkpoint) / "config.json").read_text())
    trunk = raw["rvt_bench_sam2_trunk"]

    torch.Tensor.cuda = lambda self, *a, **k: self
    if cpu_autocast:  # sam2.py:336 language_embd_inference: autocast("cuda", bfloat16) -> "cpu" (a shim)
        cuda_autocast = torch.autocast

        class cpu_for_cuda_autocast(cuda_autocast):
            def __init__(self, device_type, *a, **k):
                super().__init__("cpu" if device_type == "cuda" else device_type, *a, **k)
        torch.autocast = cpu_for_cuda_autocast
    init_state = sam2_mod.SAM2VideoPredictor.init_state

    def cpu_init_state(self, images):
        state = init_state(self, images)
        state["device"] = state["storage_device"] = torch.device("cpu")
        return state
    sam2_mod.SAM2VideoPredictor.init_state = cpu_init_state

    def tiny_image_encoder(self):
        d = int(trunk["embed_dim"])
        neck = sam2_mod.FpnNeck(d_model=256, position_encoding=sam2_mod.PositionEmbeddingSine(
            num_pos_feats=256, normalize=True, scale=None, temperature=10000),
            backbone_channel_list=[d * 8, d * 4, d * 2, d], fpn_top_down_levels=[2, 3], fpn_interp_model="nearest")
        return sam2_mod.ImageEncoder(scalp=1, trunk=sam2_mod.Hiera(**trunk), neck=neck)
    sam2_mod.SAM2.build_image_encoder = tiny_image_encoder

    config = Sa2VAChatConfig(**{k: v for k, v in raw.items() if k != "rvt_bench_sam2_trunk"})
    model = Sa2VAChatModel(config, use_flash_attn=False).eval()
    model.load_state_dict(load_file(str(Path(checkpoint) / "model.safetensors")), strict=True)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model.preparing_for_generation(tokenizer, max_new_tokens=budget, torch_dtype=dtype)

    seen = {}
    generate = model.generate

    def recording_generate(**kw):
        seen["input_ids"] = kw["input_ids"][0].tolist()
        result = generate(**kw)
        seen["sequences"] = result.sequences[0].tolist()
        return result
    model.generate = recording_generate
    embd = model.grounding_encoder.language_embd_inference
    seen["sam"] = []

    def recording_embd(state, language_embd):
        result = embd(state, language_embd)
        seen["sam"].append(result.detach().clone())
        return result
    model.grounding_encoder.language_embd_inference = recording_embd

    preprocess_image = model.grounding_encoder.preprocess_image

    def recording_preprocess_image(image, *a, **k):  # SAM2's input, before generate
        result = preprocess_image(image, *a, **k)
        seen.setdefault("g_pixel_values", []).append(result.detach().clone())
        return result
    model.grounding_encoder.preprocess_image = recording_preprocess_image

    cases = []
    for case in chosen:
        seen.clear()
        seen["sam"] = []
        if case["kind"] == "image":
            image = Image.open(LISA_IMAGES / case["files"][0]).convert("RGB")
            text = IMAGE_PROMPT.format(case["query"])
            inputs = {"image": image}
            w, h = image.size
        else:
            video = [Image.open(DATA / f).convert("RGB") for f in case["files"]]
            text = video_prompt(case["query"])
            inputs = {"video": video}
            w, h = video[0].size
        try:
            result = model.predict_forward(text=text, tokenizer=tokenizer, **inputs)
        except Exception as exc:  # recorded: what the authors' code does with this input
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            error = f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno} {frame.line}: {str(exc)[:300]}"
            cases.append({**case, "prompt": text, "input_ids": seen.get("input_ids"), "error": error,
                          "dtype": str(dtype).replace("torch.", ""), "sam_input": sam_input(seen)})
            print(case["kind"], case["files"][0], "raised", error)
            continue
        logits = []
        for pred, expected in zip(seen["sam"], result["prediction_masks"]):
            masks = F.interpolate(pred, size=(h, w), mode="bilinear", align_corners=False)[:, 0]  # as predict_forward
            assert np.array_equal(masks.numpy() > 0, expected), "logits > 0 differ from predict_forward's masks"
            logits.append([[[float(f"{v:.7g}") for v in row] for row in frame] for frame in masks.float().tolist()])
        cases.append({**case, "prompt": text, "input_ids": seen["input_ids"], "output_ids": seen["sequences"],
                      "prediction": result["prediction"], "logits": logits, "dtype": str(dtype).replace("torch.", ""),
                      "sam_input": sam_input(seen)})
        print(case["kind"], case["files"][0], "generated", len(seen["sequences"]), "n_seg", len(logits), repr(result["prediction"][:80]))
    Path(out).write_text(json.dumps({"source": "magic-research/Sa2VA@d01bf3fa8ee239325a007e7b64ee2fd22578b045",
                                     "cpu_autocast": cpu_autocast,
                                     "transformers": __import__("transformers").__version__, "torch": torch.__version__,
                                     "max_new_tokens": budget, "cases": cases}) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
