"""Print LISA's legacy (v0) code's outputs on a tiny v0-layout checkpoint, for tests/data/lisa/lisa_v0_reference.json.

Runs dvlab-research/LISA at 0e26916 (the "legacy version repo" LISA's README @3cb2d43 line 246 names
for the v0 models) OUTSIDE this repository, on CPU, under its pinned transformers 4.31.0, once per
precision (default: fp32 then bf16). Shims, none touching the math:
- torch .cuda() is the identity and Module.to(device=<int or "cuda">) stays on CPU (LISA hard-codes CUDA);
- model.LISA.build_sam_vit_h builds build_sam.py's ``_build_sam`` with the image-encoder sizes of
  the checkpoint's ``sam_vision_config`` (LISA's real one is ViT-H; decoder sizes unchanged);
- ``peft`` is a stub module (model/LISA.py imports LoraConfig and get_peft_model; chat.py's default
  --lora-r -1 never calls them).

Paths exercised, both in LISA's own code at 0e26916:
- generate: chat.py main() with --precision fp32 / bf16 (its tokenizer + add_tokens("[SEG]"), LISA(...),
  the two extra files loaded with load_state_dict(strict=False), ``model.float()`` / ``model.bfloat16()``,
  the vicuna prompt with <image> expanded to 256 <im_patch>, both images cast), the prompt and image
  path fed to its input() calls; LISA.evaluate's outputs (output_ids, pred_masks) recorded.
- eval: the model built and loaded exactly as chat.py builds it (train_ds.py @0e26916 loads a full
  state dict with --weight instead, which the v0 hub layout is not; chat.py's loading is the one
  that reads it), ``model.eval()`` as validate's ``model_engine.eval()``, then validate's inputs:
  utils/dataset.py ValDataset("ReasonSeg|val") -> collate_fn (vicuna, truncation to 512) -> images /
  images_clip cast to the precision -> LISA.forward(inference=True).

Environment (a minute of installs; torch, torchvision, numpy, opencv, pycocotools, sentencepiece,
safetensors, accelerate and Pillow come from this project's venv, which LISA's code runs under
unchanged; only the transformers stack is pinned to LISA's requirements.txt):

    python3.11 -m venv /tmp/lisav0_env
    echo /ABS/PATH/TO/rvt-bench/.venv/lib/python3.11/site-packages \\
        > /tmp/lisav0_env/lib/python3.11/site-packages/zz_project_venv.pth    # searched after its own
    /tmp/lisav0_env/bin/python -m pip install transformers==4.31.0 tokenizers==0.13.3 \\
        huggingface_hub==0.16.4 einops==0.4.1
    mkdir /tmp/lisav0_src && git -C LISA_CLONE archive 0e26916 | tar -x -C /tmp/lisav0_src

Then, from this repository's root:

    .venv/bin/python -c "from tests.lisa_tiny import build_v0_checkpoint, V0_SEED, V0_PARITY_CHECKPOINT; \\
        build_v0_checkpoint('/tmp/tiny_lisa_v0', V0_SEED, **V0_PARITY_CHECKPOINT)"
    (cd /tmp/tiny_lisa_v0 && PYTHONPATH=/tmp/lisav0_src /tmp/lisav0_env/bin/python $OLDPWD/tests/data/lisa/reference/run_lisa_v0.py \\
        /tmp/tiny_lisa_v0 $OLDPWD/tests/data/lisa/reasonseg $OLDPWD/tests/data/lisa/reference/chat_prompts.json \\
        $OLDPWD/tests/data/lisa/lisa_v0_reference.json)

usage: python run_lisa_v0.py CHECKPOINT_DIR REASONSEG_DIR CHAT_PROMPTS.json OUT.json [fp32,bf16]
(cwd = the checkpoint dir, so that config.mm_vision_tower "clip" resolves; LISA's 0e26916 tree on PYTHONPATH).
"""
import builtins
import json
import os
import sys
import tempfile
import types

import torch

torch.Tensor.cuda = lambda self, *a, **k: self
torch.nn.Module.cuda = lambda self, *a, **k: self
_to = torch.nn.Module.to


def _cpu_to(self, *args, **kwargs):
    if isinstance(kwargs.get("device"), int) or kwargs.get("device") == "cuda":
        kwargs.pop("device")
    args = tuple(a for a in args if not isinstance(a, int) and a != "cuda")
    return _to(self, *args, **kwargs)


torch.nn.Module.to = _cpu_to
import transformers  # noqa: E402  (before the stub: transformers probes the real peft's spec)

peft = types.ModuleType("peft")
peft.LoraConfig = peft.get_peft_model = None
sys.modules["peft"] = peft

ckpt, reasonseg, chat_prompts, out_path = sys.argv[1:5]
precisions = sys.argv[5].split(",") if len(sys.argv) > 5 else ["fp32", "bf16"]
chat_prompts = json.load(open(chat_prompts))
ckpt = os.path.abspath(ckpt)
reasonseg = os.path.abspath(reasonseg)
sam_cfg = json.load(open(os.path.join(ckpt, "config.json")))["sam_vision_config"]

import model.LISA as lisa_module  # noqa: E402
from model.segment_anything.build_sam import _build_sam  # noqa: E402

lisa_module.build_sam_vit_h = lambda checkpoint=None: _build_sam(
    encoder_embed_dim=sam_cfg["hidden_size"], encoder_depth=sam_cfg["num_hidden_layers"],
    encoder_num_heads=sam_cfg["num_attention_heads"], encoder_global_attn_indexes=sam_cfg["global_attn_indexes"],
    checkpoint=checkpoint)

from model.LISA import LISA  # noqa: E402
from utils.dataset import ValDataset, collate_fn  # noqa: E402


def floats(t):
    return [[[float("%.7g" % v) for v in row] for row in m] for m in t.float().numpy()]


cases = []
os.chdir(ckpt)
# LISA.__init__ reads CLIPImageProcessor from its default vision_tower "openai/clip-vit-large-patch14": the
# tiny tower answers that name too (a relative directory, found before the hub)
os.makedirs("openai", exist_ok=True)
if not os.path.exists("openai/clip-vit-large-patch14"):
    os.symlink(os.path.join(ckpt, "clip"), "openai/clip-vit-large-patch14")
base = tempfile.mkdtemp()
os.makedirs(os.path.join(base, "reason_seg", "ReasonSeg"))
os.symlink(os.path.join(reasonseg, "val"), os.path.join(base, "reason_seg", "ReasonSeg", "val"))


# --- eval path: the model as chat.py builds and loads it, then validate's forward ---
def eval_path(precision):
    tokenizer = transformers.AutoTokenizer.from_pretrained(ckpt, cache_dir=None, model_max_length=512,
                                                           padding_side="right", use_fast=False)
    tokenizer.pad_token = tokenizer.unk_token
    tokenizer.add_tokens("[SEG]")
    seg = tokenizer("[SEG]", add_special_tokens=False).input_ids[0]
    model = LISA(0, seg, tokenizer, ckpt, -1, precision)
    weight = {}
    weight.update(torch.load(os.path.join(ckpt, "pytorch_model-visual_model.bin")))
    weight.update(torch.load(os.path.join(ckpt, "pytorch_model-text_hidden_fcs.bin")))
    missing, unexpected = model.load_state_dict(weight, strict=False)
    assert not unexpected and not [k for k in missing if not k.startswith("lm.")], (missing, unexpected)
    model = model.bfloat16() if precision == "bf16" else model.float()
    model.eval()  # validate: model_engine.eval()
    val = ValDataset(base, tokenizer, "clip", "ReasonSeg|val", 1024)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
    for i in sorted(range(len(val)), key=lambda i: val.images[i]):
        batch = collate_fn([val[i]], tokenizer=tokenizer)
        batch["images"], batch["images_clip"] = batch["images"].to(dtype), batch["images_clip"].to(dtype)
        with torch.no_grad():
            out = model(**batch)
        logits = out["pred_masks"][0]
        cases.append({"mode": "eval", "precision": precision, "image": os.path.basename(batch["image_paths"][0]),
                      "prompt": batch["conversation_list"][0], "input_ids": batch["input_ids"][0].tolist(),
                      "seg_token_idx": seg, "logits": floats(logits)})
        print("eval", precision, cases[-1]["image"], tuple(logits.shape), str(logits.dtype), float(logits.float().std()),
              float((logits > 0).float().mean()))


# --- generate path (chat.py) ---
import chat  # noqa: E402

records = []
_evaluate = LISA.evaluate


def recording_evaluate(self, *args, **kwargs):
    output_ids, pred_masks = _evaluate(self, *args, **kwargs)
    records.append((output_ids[0].tolist(), pred_masks[0]))
    return output_ids, pred_masks


LISA.evaluate = recording_evaluate
images = sorted(f for f in os.listdir(os.path.join(reasonseg, "val")) if f.endswith(".jpg"))


class Done(Exception):
    pass


def generate_path(precision):
    feed = []
    for name in images:
        feed += [chat_prompts[name], os.path.join(reasonseg, "val", name)]
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

json.dump({"source": "dvlab-research/LISA@0e26916: chat.py main (LISA.evaluate) and, on the model chat.py builds and "
           "loads, train_ds.py validate's inputs (ValDataset + collate_fn + LISA.forward inference=True), "
           f"transformers {transformers.__version__}, torch {torch.__version__} on CPU, precisions {','.join(precisions)}; "
           "tests/data/lisa/reference/run_lisa_v0.py",
           "checkpoint": "tests/lisa_tiny.py build_v0_checkpoint(dir, V0_SEED, **V0_PARITY_CHECKPOINT)", "cases": cases},
          open(out_path, "w"))
