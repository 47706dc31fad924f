"""Print LISA's own outputs on a tiny checkpoint, for tests/data/lisa/lisa_reference.json.

Runs dvlab-research/LISA at 3cb2d4301f1af4691bd4f3938335ef06e76f155a OUTSIDE this repository, on
CPU, under its pinned transformers 4.31.0, once per precision (default: fp32 then bf16). Shims, none
touching the math:
- torch .cuda() is the identity and Module.to(device=<int>) stays on CPU (LISA hard-codes CUDA);
- model.LISA.build_sam_vit_h builds build_sam.py's ``_build_sam`` with the image-encoder sizes of
  the checkpoint's ``sam_vision_config`` (LISA's real one is ViT-H; decoder sizes unchanged).

Paths exercised, both in LISA's own code:
- eval: train_ds.py main with --eval_only (LISAForCausalLM.from_pretrained(torch_dtype=...), the
  vision tower cast to that dtype; under bf16 ``model.bfloat16()``, which is what deepspeed's engine
  does with ``"bf16": {"enabled": True}``), then validate's inputs: utils/dataset.py
  ValDataset("ReasonSeg|val") -> collate_fn(conv_type="llava_v1") -> images / images_clip cast to
  the dtype -> LISAForCausalLM.forward -> model_forward(inference=True). Left out: train_ds.py's
  LoRA wrapper (lora_B is zero-initialised, so its output adds exactly 0) and gradient checkpointing
  (inactive in eval).
- generate: chat.py main() with --precision fp32 / bf16 (chat.py itself does ``model.bfloat16()``
  and ``.bfloat16()`` on both images), the prompt and image path fed to its input() calls;
  LISAForCausalLM.evaluate's outputs (output_ids, pred_masks) recorded.

Environment (about a minute of installs; torch, torchvision, numpy, opencv, pycocotools,
sentencepiece, safetensors and Pillow are taken from this project's venv, which LISA's code runs
under unchanged; only the transformers stack is pinned to LISA's):

    python3.11 -m venv /tmp/lisa_env
    echo /ABS/PATH/TO/rvt-bench/.venv/lib/python3.11/site-packages \
        > /tmp/lisa_env/lib/python3.11/site-packages/zz_project_venv.pth    # searched after its own
    /tmp/lisa_env/bin/python -m pip install transformers==4.31.0 tokenizers==0.13.3 \
        huggingface_hub==0.16.4 einops==0.4.1
    mkdir /tmp/lisa_src && git -C LISA_CLONE archive 3cb2d4301f1af4691bd4f3938335ef06e76f155a | tar -x -C /tmp/lisa_src

Last run: transformers 4.31.0, tokenizers 0.13.3, torch 2.14.1 (CPU), torchvision 0.29.1, numpy 2.4.6.
Then, from this repository's root:

    .venv/bin/python -c "from tests.lisa_tiny import build_checkpoint, PARITY_CHECKPOINT; \
        build_checkpoint('/tmp/tiny_lisa', 0, **PARITY_CHECKPOINT)"
    (cd /tmp/tiny_lisa && PYTHONPATH=/tmp/lisa_src /tmp/lisa_env/bin/python $OLDPWD/tests/data/lisa/reference/run_lisa.py \
        /tmp/tiny_lisa $OLDPWD/tests/data/lisa/reasonseg $OLDPWD/tests/data/lisa/reference/chat_prompts.json \
        $OLDPWD/tests/data/lisa/lisa_reference.json)

usage: python run_lisa.py CHECKPOINT_DIR REASONSEG_DIR CHAT_PROMPTS.json OUT.json [fp32,bf16]
(cwd = the checkpoint dir, so that config.vision_tower "clip" resolves; LISA's checkout on
PYTHONPATH). CHAT_PROMPTS.json (reference/chat_prompts.json) maps each image file name to the text
typed at chat.py's prompt.
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
precisions = sys.argv[5].split(",") if len(sys.argv) > 5 else ["fp32", "bf16"]
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
tokenizer = AutoTokenizer.from_pretrained(ckpt, model_max_length=512, padding_side="right", use_fast=False)
tokenizer.pad_token = tokenizer.unk_token
seg = tokenizer("[SEG]", add_special_tokens=False).input_ids[0]
conversation_lib.default_conversation = conversation_lib.conv_templates["llava_v1"]
from safetensors.torch import load_file  # noqa: E402

from utils.dataset import ValDataset, collate_fn  # noqa: E402

clip_file = load_file(os.path.join(ckpt, "clip", "model.safetensors"))
base = tempfile.mkdtemp()
os.makedirs(os.path.join(base, "reason_seg", "ReasonSeg"))
os.symlink(os.path.abspath(os.path.join(reasonseg, "val")), os.path.join(base, "reason_seg", "ReasonSeg", "val"))


# --- eval path (train_ds.py main with --eval_only, then validate) ---
def eval_path(precision):
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
    model, info = LISAForCausalLM.from_pretrained(ckpt, torch_dtype=dtype, low_cpu_mem_usage=True, vision_tower="clip",
                                                  seg_token_idx=seg, output_loading_info=True)
    missing = [k for k in info["missing_keys"] if "vision_tower" not in k]
    assert not missing and not info["unexpected_keys"], info
    model.get_model().initialize_vision_modules(model.get_model().config)
    tower = model.get_model().get_vision_tower()
    tower.to(dtype=dtype)  # train_ds.py: vision_tower.to(dtype=torch_dtype, device=args.local_rank)
    if precision == "bf16":
        model = model.bfloat16()  # what deepspeed.initialize does with "bf16": {"enabled": True}
    model.eval()
    assert all(torch.equal(v, clip_file["vision_model." + k].to(dtype)) for k, v in tower.vision_tower.vision_model.state_dict().items()
               if not k.endswith("position_ids")), "CLIP weights were not loaded"
    val = ValDataset(base, tokenizer, "clip", "ReasonSeg|val", 1024)
    for i in range(len(val)):
        batch = collate_fn([val[i]], tokenizer=tokenizer, conv_type="llava_v1", use_mm_start_end=True, local_rank=0)
        # train_ds.py validate: images / images_clip .bfloat16() under bf16, .float() under fp32
        batch["images"], batch["images_clip"] = batch["images"].to(dtype), batch["images_clip"].to(dtype)
        with torch.no_grad():
            out = model(**batch)
        logits = out["pred_masks"][0]
        cases.append({"mode": "eval", "precision": precision, "image": os.path.basename(batch["image_paths"][0]),
                      "prompt": batch["conversation_list"][0], "input_ids": batch["input_ids"][0].tolist(),
                      "seg_token_idx": seg, "logits": floats(logits)})
        print("eval", precision, cases[-1]["image"], tuple(logits.shape), str(logits.dtype), float(logits.std()),
              float((logits > 0).float().mean()))


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


class Done(Exception):
    pass


def generate_path(precision):
    feed = []
    for name in images:
        feed += [chat_prompts[name], os.path.abspath(os.path.join(reasonseg, "val", name))]
    printed = []
    del records[:]

    def fake_input(prompt=""):
        if not feed:
            raise Done
        return feed.pop(0)

    builtins.input = fake_input
    _print = builtins.print
    builtins.print = lambda *a, **k: (printed.append(" ".join(map(str, a))), _print(*a, **k))
    try:
        chat.main(["--version", ckpt, "--precision", precision, "--vision-tower", "clip", "--vis_save_path", tempfile.mkdtemp()])
    except Done:
        pass
    finally:
        builtins.print = _print
    texts = [p[len("text_output:  "):] for p in printed if p.startswith("text_output: ")]
    for name, (ids, logits), text in zip(images, records, texts):
        cases.append({"mode": "generate", "precision": precision, "image": name, "prompt": chat_prompts[name],
                      "output_ids": ids, "text": text, "logits": floats(logits)})
        print("generate", precision, name, len(ids), tuple(logits.shape), str(logits.dtype), text[-80:])


for precision in precisions:
    eval_path(precision)
    generate_path(precision)

import transformers  # noqa: E402

json.dump({"source": "dvlab-research/LISA@3cb2d4301f1af4691bd4f3938335ef06e76f155a: train_ds.py validate path "
           "(ValDataset + collate_fn + LISAForCausalLM.model_forward inference=True) and chat.py main "
           f"(LISAForCausalLM.evaluate), transformers {transformers.__version__}, torch {torch.__version__} on CPU, "
           f"precisions {','.join(precisions)}; tests/data/lisa/reference/run_lisa.py",
           "checkpoint": "tests/lisa_tiny.py build_checkpoint(dir, 0, **PARITY_CHECKPOINT)", "cases": cases},
          open(out_path, "w"))
