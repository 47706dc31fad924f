"""Print LISA's own outputs on a tiny checkpoint, for tests/data/lisa/lisa_reference.json.

Runs dvlab-research/LISA at 3cb2d4301f1af4691bd4f3938335ef06e76f155a OUTSIDE this repository, on
CPU, under its pinned transformers 4.31.0 (torch 2.13 CPU). Shims, none touching the math:
- torch .cuda() is the identity and Module.to(device=<int>) stays on CPU (LISA hard-codes CUDA);
- torchvision (no wheel matching the local torch loads) is replaced by its PIL path of
  ``resize`` / ``to_pil_image`` (what ResizeLongestSide.apply_image calls);
- model.LISA.build_sam_vit_h builds build_sam.py's ``_build_sam`` with the image-encoder sizes of
  the checkpoint's ``sam_vision_config`` (LISA's real one is ViT-H; decoder sizes unchanged).

Paths exercised, both in LISA's own code:
- eval: utils/dataset.py ValDataset("ReasonSeg|val") -> collate_fn(conv_type="llava_v1") ->
  LISAForCausalLM.forward -> model_forward(inference=True), as train_ds.py validate runs it
  (default_conversation = conv_templates["llava_v1"], as train_ds.py main sets it).
- generate: chat.py main() with --precision fp32, the prompt and image path fed to its input()
  calls; LISAForCausalLM.evaluate's outputs (output_ids, pred_masks) recorded.

usage (from the LISA checkout, with the shim dir first on PYTHONPATH; cwd = the checkpoint dir so
that config.vision_tower "clip" resolves):
    python run_lisa.py CHECKPOINT_DIR REASONSEG_DIR CHAT_PROMPTS.json OUT.json
CHAT_PROMPTS.json maps each image file name to the text typed at chat.py's prompt.
"""
import builtins
import json
import os
import sys
import tempfile

import torch

torch.Tensor.cuda = lambda self, *a, **k: self
torch.nn.Module.cuda = lambda self, *a, **k: self
_to = torch.nn.Module.to


def _cpu_to(self, *args, **kwargs):
    if isinstance(kwargs.get("device"), int):
        kwargs.pop("device")
    args = tuple(a for a in args if not isinstance(a, int))
    return _to(self, *args, **kwargs)


torch.nn.Module.to = _cpu_to

ckpt, reasonseg, chat_prompts, out_path = sys.argv[1:5]
chat_prompts = json.load(open(chat_prompts))
ckpt = os.path.abspath(ckpt)
sam_cfg = json.load(open(os.path.join(ckpt, "config.json")))["sam_vision_config"]

import model.LISA as lisa_module  # noqa: E402
from model.segment_anything.build_sam import _build_sam  # noqa: E402

lisa_module.build_sam_vit_h = lambda checkpoint=None: _build_sam(
    encoder_embed_dim=sam_cfg["hidden_size"], encoder_depth=sam_cfg["num_hidden_layers"],
    encoder_num_heads=sam_cfg["num_attention_heads"], encoder_global_attn_indexes=sam_cfg["global_attn_indexes"],
    checkpoint=checkpoint)

from transformers import AutoTokenizer  # noqa: E402

from model.LISA import LISAForCausalLM  # noqa: E402
from model.llava import conversation as conversation_lib  # noqa: E402


def floats(t):
    return [[[float("%.7g" % v) for v in row] for row in m] for m in t.float().numpy()]


cases = []
os.chdir(ckpt)

# --- eval path (train_ds.py validate) ---
tokenizer = AutoTokenizer.from_pretrained(ckpt, model_max_length=512, padding_side="right", use_fast=False)
tokenizer.pad_token = tokenizer.unk_token
seg = tokenizer("[SEG]", add_special_tokens=False).input_ids[0]
model, info = LISAForCausalLM.from_pretrained(ckpt, torch_dtype=torch.float32, low_cpu_mem_usage=True,
                                              vision_tower="clip", seg_token_idx=seg, output_loading_info=True)
missing = [k for k in info["missing_keys"] if "vision_tower" not in k]
assert not missing and not info["unexpected_keys"], info
model.get_model().initialize_vision_modules(model.get_model().config)
model.eval()
from safetensors.torch import load_file  # noqa: E402

clip_file = load_file(os.path.join(ckpt, "clip", "model.safetensors"))
tower = model.get_model().get_vision_tower().vision_tower
assert all(torch.equal(v, clip_file["vision_model." + k]) for k, v in tower.vision_model.state_dict().items()
           if not k.endswith("position_ids")), "CLIP weights were not loaded"
conversation_lib.default_conversation = conversation_lib.conv_templates["llava_v1"]
from utils.dataset import ValDataset, collate_fn  # noqa: E402

base = tempfile.mkdtemp()
os.makedirs(os.path.join(base, "reason_seg", "ReasonSeg"))
os.symlink(os.path.abspath(os.path.join(reasonseg, "val")), os.path.join(base, "reason_seg", "ReasonSeg", "val"))
val = ValDataset(base, tokenizer, "clip", "ReasonSeg|val", 1024)
for i in range(len(val)):
    batch = collate_fn([val[i]], tokenizer=tokenizer, conv_type="llava_v1", use_mm_start_end=True, local_rank=0)
    batch["images"], batch["images_clip"] = batch["images"].float(), batch["images_clip"].float()
    with torch.no_grad():
        out = model(**batch)
    logits = out["pred_masks"][0]
    cases.append({"mode": "eval", "image": os.path.basename(batch["image_paths"][0]), "prompt": batch["conversation_list"][0],
                  "input_ids": batch["input_ids"][0].tolist(), "seg_token_idx": seg, "logits": floats(logits)})
    print("eval", cases[-1]["image"], tuple(logits.shape), float(logits.abs().max()))

# --- generate path (chat.py) ---
import chat  # noqa: E402

records = []
_evaluate = LISAForCausalLM.evaluate


def recording_evaluate(self, *args, **kwargs):
    output_ids, pred_masks = _evaluate(self, *args, **kwargs)
    records.append((output_ids[0].tolist(), pred_masks[0]))
    return output_ids, pred_masks


LISAForCausalLM.evaluate = recording_evaluate
images = sorted(f for f in os.listdir(os.path.join(reasonseg, "val")) if f.endswith(".jpg"))
feed = []
for name in images:
    feed += [chat_prompts[name], os.path.abspath(os.path.join(reasonseg, "val", name))]
printed = []


class Done(Exception):
    pass


def fake_input(prompt=""):
    if not feed:
        raise Done
    return feed.pop(0)


builtins.input = fake_input
_print = builtins.print
builtins.print = lambda *a, **k: (printed.append(" ".join(map(str, a))), _print(*a, **k))
try:
    chat.main(["--version", ckpt, "--precision", "fp32", "--vision-tower", "clip", "--vis_save_path", tempfile.mkdtemp()])
except Done:
    pass
builtins.print = _print
texts = [p[len("text_output:  "):] for p in printed if p.startswith("text_output: ")]
for name, (ids, logits), text in zip(images, records, texts):
    cases.append({"mode": "generate", "image": name, "prompt": chat_prompts[name], "output_ids": ids, "text": text,
                  "logits": floats(logits)})
    print("generate", name, len(ids), tuple(logits.shape), text[-80:])

json.dump({"source": "dvlab-research/LISA@3cb2d4301f1af4691bd4f3938335ef06e76f155a: train_ds.py validate path "
           "(ValDataset + collate_fn + LISAForCausalLM.model_forward inference=True) and chat.py main "
           "(LISAForCausalLM.evaluate), transformers 4.31.0, torch 2.13 CPU, float32; tests/data/lisa/reference/run_lisa.py",
           "checkpoint": "tests/lisa_tiny.py build_checkpoint(dir, seed=0, **REFERENCE_BOOSTS)", "cases": cases},
          open(out_path, "w"))
