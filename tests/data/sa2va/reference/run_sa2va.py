"""Print Sa2VA's own outputs on a tiny checkpoint, for tests/test_sa2va_equivalence.py.

Runs the authors' code, magic-research/Sa2VA d01bf3fa8ee239325a007e7b64ee2fd22578b045,
projects/llava_sam2/hf/models/ (``Sa2VAChatModel.predict_forward``, image and video), imported from a
checkout outside this repository, under transformers 4.42.3 (Sa2VA's requirements.txt), timm 1.0.9,
peft 0.11.1, CPU, float32:

    python -m tests.sa2va_tiny /tmp/tiny_sa2va --reference
    python tests/data/sa2va/reference/run_sa2va.py /tmp/tiny_sa2va SA2VA_CHECKOUT/projects/llava_sam2/hf \
        tests/data/sa2va/sa2va_reference.json
    # two [SEG]: the MULTI_SEG_BOOSTS checkpoint, 4 new tokens, the first image
    python -c "from tests.sa2va_tiny import *; build_checkpoint('/tmp/tiny_sa2va_multi', 0, **MULTI_SEG_BOOSTS)"
    python tests/data/sa2va/reference/run_sa2va.py /tmp/tiny_sa2va_multi SA2VA_CHECKOUT/projects/llava_sam2/hf \
        tests/data/sa2va/sa2va_reference_multiseg.json 4 0

What is shimmed (none of it touches the math):
- ``torch.Tensor.cuda`` returns the tensor itself (predict_forward and SAM2VideoPredictor move
  inputs with ``.cuda()``; there is no GPU), and ``SAM2VideoPredictor.init_state`` records the CPU as
  its ``device`` / ``storage_device`` (it hard-codes ``torch.device("cuda")``).
- ``SAM2.build_image_encoder`` builds the Hiera trunk with the checkpoint's ``rvt_bench_sam2_trunk``
  sizes (the authors' code always builds Hiera-L; the tiny checkpoint's trunk is 8 wide), the same
  Hiera / FpnNeck / ImageEncoder classes and every other argument as the authors'.
- flash-attn is absent: the authors' code falls back to its own eager attention (its try/except).

Weights: the safetensors file is loaded into ``Sa2VAChatModel`` with ``load_state_dict(strict=True)``
(every released name present, none unknown). ``preparing_for_generation(tokenizer, max_new_tokens,
torch_dtype=torch.float32)`` is called first (the authors' API; predict_forward would otherwise call
it with bfloat16 and 2048 tokens). Printed per case: the prompt, its token ids, the generated ids and
text, and the mask logits of each [SEG]: ``language_embd_inference``'s output interpolated to the
frame size exactly as predict_forward does it (checked here against predict_forward's own boolean
masks), 7 significant digits.
"""
from __future__ import annotations

import json
import sys
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
]
MAX_NEW_TOKENS = 32


def main(checkpoint: str, hf_dir: str, out: str, max_new_tokens: str = str(MAX_NEW_TOKENS), *case_indices: str) -> None:
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
    model.preparing_for_generation(tokenizer, max_new_tokens=budget, torch_dtype=torch.float32)

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

    cases = []
    for case in chosen:
        seen["sam"] = []
        if case["kind"] == "image":
            image = Image.open(LISA_IMAGES / case["files"][0]).convert("RGB")
            text = IMAGE_PROMPT.format(case["query"])
            result = model.predict_forward(image=image, text=text, tokenizer=tokenizer)
            w, h = image.size
        else:
            video = [Image.open(DATA / f).convert("RGB") for f in case["files"]]
            text = VIDEO_PROMPT.format(case["query"])
            result = model.predict_forward(video=video, text=text, tokenizer=tokenizer)
            w, h = video[0].size
        logits = []
        for pred, expected in zip(seen["sam"], result["prediction_masks"]):
            masks = F.interpolate(pred, size=(h, w), mode="bilinear", align_corners=False)[:, 0]  # as predict_forward
            assert np.array_equal(masks.numpy() > 0, expected), "logits > 0 differ from predict_forward's masks"
            logits.append([[[float(f"{v:.7g}") for v in row] for row in frame] for frame in masks.tolist()])
        cases.append({**case, "prompt": text, "input_ids": seen["input_ids"], "output_ids": seen["sequences"],
                      "prediction": result["prediction"], "logits": logits})
        print(case["kind"], case["files"][0], "generated", len(seen["sequences"]), "n_seg", len(logits), repr(result["prediction"][:80]))
    Path(out).write_text(json.dumps({"source": "magic-research/Sa2VA@d01bf3fa8ee239325a007e7b64ee2fd22578b045",
                                     "transformers": __import__("transformers").__version__, "torch": torch.__version__,
                                     "max_new_tokens": budget, "cases": cases}) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
