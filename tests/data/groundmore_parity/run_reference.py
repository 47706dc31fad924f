"""Run GroundMoRe's own evaluation code on the fixture and keep what it printed (expected.json).

    python tests/data/groundmore_parity/run_reference.py <GroundMoRe checkout> <work dir>

<GroundMoRe checkout>: dengandong/GroundMoRe at a79cc28. Its scoring is inline in
`evaluate_groundmore.py::main`, around MoRA's inference; there is no file-based evaluator. This
script runs that `main` unchanged (the file executed as __main__ with its `davis2017/` package) in
a child process where the model-side imports (transformers, model.*, utils.utils) are stand-ins:
the model's `evaluate` returns, for the question being asked, the prediction PNGs of
<work>/pred/<video>/<exp_id>/ at the 20 indices the code samples, as mask logits (1 / -1), and
`.cuda()` is the identity. Everything that decides a number - the frame sampling, the action
window, the GT read as `convert("P") == obj_id`, davis2017's J and F, db_statistics, the means per
question type - is the reference's own code. expected.json keeps its per-question lines
(mora-zs-7b.txt: video, exp_id, JF, JM, FM at full precision) and its printed 4-decimal finals.
Nothing of GroundMoRe's code is kept.
"""
from __future__ import annotations

import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMMIT = "a79cc28"


def _stand_ins(work: Path) -> None:
    import numpy as np
    import torch
    from PIL import Image

    torch.Tensor.cuda = lambda self, *a, **k: self
    questions = {}
    meta = json.loads((work / "groundmore_test.json").read_text())["videos"]
    for video, rec in meta.items():
        for exp_id, q in rec["questions"].items():
            questions[q["question"]] = (video, exp_id)
    state = {}

    def module(name, **attrs):
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        sys.modules[name] = mod
        return mod

    class Obj:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    class Tokenizer(Obj):
        def __call__(self, text, add_special_tokens=True):
            return Obj(input_ids=[32000])

        def decode(self, ids, skip_special_tokens=False):
            return ""

    class Model(Obj):
        def bfloat16(self):
            return self

        def cuda(self):
            return self

        def float(self):
            return self

        def eval(self):
            return self

        def get_model(self):
            return Obj(config=None, initialize_vision_modules=lambda cfg: None,
                       get_vision_tower=lambda: Obj(to=lambda *a, **k: None))

        def evaluate(self, image_clip, image, input_ids, resize_list, original_size_list, **kw):
            video, exp_id = next(v for q, v in questions.items() if q in state["prompt"])
            names = sorted(os.listdir(work / "groundmore_videos" / video / "images"))
            idx = np.linspace(0, len(names) - 1, num=20, dtype=int)
            out = []
            for i in idx:
                png = work / "pred" / video / exp_id / (Path(names[i]).stem + ".png")
                m = np.asarray(Image.open(png).convert("L")) > 0
                out.append(torch.from_numpy(np.where(m, 1.0, -1.0)[None].astype(np.float32)))
            return torch.tensor([[1, 2]]), out

    def from_pretrained(*a, **k):
        return Model(config=Obj(vision_tower="clip", eos_token_id=0, bos_token_id=1, pad_token_id=0))

    class Conv(Obj):
        def copy(self):
            return Conv(messages=[], roles=("USER", "ASSISTANT"))

        def append_message(self, role, text):
            self.messages.append((role, text))

        def get_prompt(self):
            return " ".join(f"{r}: {t}" for r, t in self.messages)

    def tokenizer_image_token(prompt, tokenizer, return_tensors=None):
        state["prompt"] = prompt
        return torch.tensor([1, 2])

    module("transformers", AutoTokenizer=Obj(from_pretrained=lambda *a, **k: Tokenizer(unk_token="<unk>", eos_token_id=2, bos_token_id=1, pad_token_id=0)),
           BitsAndBytesConfig=lambda **k: None,
           CLIPImageProcessor=Obj(from_pretrained=lambda *a, **k: Obj(
               preprocess=lambda img, return_tensors=None: {"pixel_values": torch.zeros(1, 3, 2, 2)})))
    module("model")
    module("model.MoRA", VideoLISAForCausalLM=Obj(from_pretrained=from_pretrained),
           PooledVideoLISAForCausalLM=Obj(from_pretrained=from_pretrained))
    module("model.llava", conversation=module("model.llava.conversation", conv_templates={"llava_v1": Conv()}))
    module("model.llava.mm_utils", tokenizer_image_token=tokenizer_image_token)
    module("model.segment_anything")
    module("model.segment_anything.utils")
    module("model.segment_anything.utils.transforms", ResizeLongestSide=lambda size: Obj(apply_image=lambda img: img))
    module("utils")
    module("utils.utils", DEFAULT_IM_END_TOKEN="<im_end>", DEFAULT_IM_START_TOKEN="<im_start>", LONG_QUESTION_LIST=[],
           DEFAULT_IMAGE_TOKEN="<image>", IMAGE_TOKEN_INDEX=-200, REASONING_LONG_QUESTION_LIST=[])


def inner(checkout: str, work: str) -> None:
    work_path = Path(work).resolve()
    os.chdir(work_path)
    _stand_ins(work_path)
    sys.path.insert(0, str(work_path / "ref"))
    sys.argv = ["evaluate_groundmore.py"]
    runpy.run_path(str(work_path / "ref" / "evaluate_groundmore.py"), run_name="__main__")


def main(checkout: str, work: str) -> None:
    sys.path.insert(0, str(HERE))
    from make_fixture import write_fixture

    out = Path(work)
    root, pred = write_fixture(out)
    ref = root / "ref"
    (ref / "davis2017").mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(checkout) / "evaluate_groundmore.py", ref)
    for f in (Path(checkout) / "davis2017").glob("*.py"):
        shutil.copy(f, ref / "davis2017")
    shutil.rmtree(root / "pred", ignore_errors=True)
    shutil.copytree(pred, root / "pred")
    proc = subprocess.run([sys.executable, __file__, "--inner", checkout, str(root)], capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-4000:])
    lines = [ln.split(", ") for ln in (root / "mora-zs-7b.txt").read_text().splitlines() if ln.strip()]
    printed = {f"{kind.strip()}/{'J&F' if m == 'JF' else m}".lstrip("/"): float(v)
               for kind, m, v in re.findall(r"^Final ((?:[A-Za-z]+ )?)(JF|J|F)\b[^:]*: (\S+)$", proc.stdout, re.M)}
    expected = {
        "source": f"dengandong/GroundMoRe@{COMMIT} evaluate_groundmore.py main(), run by run_reference.py",
        "per_question": {f"{v}/{e}": {"J&F": float(jf), "J": float(j), "F": float(f)} for v, e, jf, j, f in lines},
        "printed_4dp": printed,
        "missing_frames": re.findall(r"^Missing frames: (.*)\.$", proc.stdout, re.M),
    }
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(proc.stdout[-3000:])


if __name__ == "__main__":
    if sys.argv[1] == "--inner":
        inner(*sys.argv[2:4])
    else:
        main(*sys.argv[1:3])
