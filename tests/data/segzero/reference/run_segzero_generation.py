"""Run the authors' own prompt building, input construction and generation on a tiny random
Qwen2.5-VL, for tests/data/segzero/generation.json (issue 42 item 1).

Executed from copies OUTSIDE this repository (never committed):
- SEGZERO_DIR: dvlab-research/Seg-Zero @ 42a33455283ba041a3099cf154a708116f300cec
  (`git --git-dir=<mirror> archive 42a3345 | tar -x -C /tmp/<dir>`): ``main`` of
  evaluation_scripts/evaluation.py (Seg-Zero-7B's ReasonSeg numbers) and of
  evaluation_scripts/evaluation_visionreasoner.py (VisionReasoner's published ReasonSeg 66.26), whole:
  their dataset loop, 840 x 840 resize, QUESTION_TEMPLATE, chat messages, ``apply_chat_template``,
  ``process_vision_info``, processor call, ``generate``, trimming, ``batch_decode``, the factors
  they hand to ``extract_bbox_points_think``, and on through their SAM2 block;
- VISIONREASONER_DIR: dvlab-research/VisionReasoner @ a455092: the class ``VisionReasonerModel`` of
  vision_reasoner/models/vision_reasoner_model.py (its ``__init__`` and ``segment_objects`` ->
  ``_generate_model_output``, 2048 new tokens, one image per call).
qwen_vl_utils 0.0.11 (the release of their time; `pip install --target DEPS --no-deps
qwen-vl-utils==0.0.11`, DEPS put on sys.path) provides their ``process_vision_info``.

Shims, none touching what is compared:
- the string "cuda" in their code becomes "cpu" (``inputs.to``, ``torch.autocast``);
- ``Qwen2_5_VLForConditionalGeneration.from_pretrained`` loads the tiny checkpoint of
  tiny_qwen25vl.py with the ``torch_dtype`` they pass (bfloat16, recorded) but
  attn_implementation "sdpa" where they ask "flash_attention_2" (not on CPU; recorded) and no
  device_map; ``AutoProcessor.from_pretrained`` loads its processor with their arguments;
- ``load_dataset`` gives a ``datasets.Dataset`` of the cases (the hub copy's columns; images as
  the ``Image`` feature decodes them from the JPEG files in ../generation/); ``parse_args`` their
  arguments (batch_size 3: one batch); ``SAM2ImagePredictor.from_pretrained`` the tiny SAM2 of
  run_segzero_pipeline.py; VisionReasoner's TaskRouter / YOLO / OpenAI are not built;
- ``Recorder`` (below) wraps the processor's ``__call__`` and the model's ``generate``: it records
  what they are given and return, and caps ``max_new_tokens`` at CAP = 40 (the value their code
  passes is recorded: 1024 / 2048); a random model never writes EOS, and 1024 bf16 steps on CPU
  take minutes. Greedy decoding is prefix-stable, so the first 40 ids are those of the full run.
Recorded per script: how the model and processor were loaded, the generate arguments, per batch the
prompts, the sha256 of each uint8 image handed to the processor (the 840 x 840 resize), input_ids,
attention_mask, image_grid_thw, pixel_values (shape, sha256 of the float32 bytes, sum, a strided
sample), the generated ids after the prompt, the decoded replies and the factors handed to
``extract_bbox_points_think``, and what that function returns for a readable answer at those
factors (the coordinate scaling back).

usage: python run_segzero_generation.py SEGZERO_DIR VISIONREASONER_DIR DEPS   (this checkout's venv)
"""
from __future__ import annotations

import ast
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE.parent
CAP = 40
# (file, query, ann_id): RGB 640 x 480, a '?' query (VisionReasoner strips it, Seg-Zero keeps it);
# portrait 333 x 500 with a trailing '.'; grayscale 1000 x 562 with a long query in quotes
CASES = [("gen_a.jpg", "What is the object people use to drink hot coffee from in the morning?", "a"),
         ("gen_b.jpg", "The Dog.", "b"),
         ("gen_c.jpg", "\"In this busy street scene, which of the many objects would a tired pedestrian most likely sit "
                       "on to rest for a while, given that it is made of wood, painted green, placed under the tree "
                       "near the crossing and partly hidden by the parked bicycles on its left side.\"", "c")]
SIZES = {"gen_a.jpg": (640, 480, "RGB"), "gen_b.jpg": (333, 500, "RGB"), "gen_c.jpg": (1000, 562, "L")}
READABLE = {
    "seg_zero": '<think>the cup</think><answer>{"bbox": [101,230,617,777], "points_1": [333,401], '
                '"points_2": [350,700]}</answer>',
    "visionreasoner": '<think>two</think><answer>[{"bbox_2d": [101,230,617,777], "point_2d": [333,401]}, '
                      '{"bbox_2d": [5,6,839,838], "point_2d": [419,420]}]</answer>',
}


def write_images() -> None:
    """The case images: smooth seeded content (gradients, discs), JPEG quality 90."""
    from PIL import Image

    for name, (w, h, mode) in SIZES.items():
        rng = np.random.default_rng(len(name) * w + h)
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        img = np.stack([xx / w * 200, yy / h * 200, (xx + yy) / (w + h) * 255], axis=2)
        for _ in range(6):
            cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(20, min(w, h) / 3)
            img[(xx - cx) ** 2 + (yy - cy) ** 2 < r * r] = rng.uniform(0, 255, 3)
        image = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
        (image.convert("L") if mode == "L" else image).save(DATA / "generation" / name, quality=90)


def sha(array) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def pixel_summary(pixel_values) -> dict:
    """pixel_values (float32 tensor) as shape, sha256 of its bytes, float64 sum, every 9973rd value."""
    values = pixel_values.detach().float().numpy()
    return {"shape": list(values.shape), "sha256": sha(values), "sum": float(values.astype(np.float64).sum()),
            "sample": [float(v) for v in values.reshape(-1)[::9973]]}


class Recorder:
    """Wraps a processor's __call__ and a model's generate (class swap: the objects stay theirs)."""

    def __init__(self, cap: int = CAP):
        self.cap, self.calls, self.generates = cap, [], []

    def processor(self, processor):
        rec, base = self, type(processor)

        def __call__(self, *args, **kwargs):
            out = base.__call__(self, *args, **kwargs)
            images = kwargs.get("images")
            flat = images if isinstance(images, list) else [images]
            flat = [x for i in flat for x in (i if isinstance(i, list) else [i]) if x is not None]
            rec.calls.append({"text": list(kwargs.get("text") or args[0]),
                              "images_sha256": [sha(np.asarray(im.convert("RGB") if hasattr(im, "convert") else im,
                                                               dtype=np.uint8)) for im in flat],
                              "images_size": [list(np.asarray(im).shape[:2]) for im in flat],
                              "input_ids": out["input_ids"].tolist(), "attention_mask": out["attention_mask"].tolist(),
                              "image_grid_thw": out["image_grid_thw"].tolist(),
                              "pixel_values": pixel_summary(out["pixel_values"])})
            return out

        processor.__class__ = type(base.__name__, (base,), {"__call__": __call__})
        return processor

    def model(self, model):
        rec, base = self, type(model)

        def generate(self, *args, **kwargs):
            asked = {k: v for k, v in kwargs.items() if k in ("max_new_tokens", "do_sample", "use_cache", "temperature",
                                                             "top_p", "num_beams")}
            kwargs["max_new_tokens"] = min(int(kwargs.get("max_new_tokens") or rec.cap), rec.cap)
            out = base.generate(self, *args, **kwargs)
            n = kwargs["input_ids"].shape[1]
            rec.generates.append({"asked": asked, "pixel_dtype": str(kwargs["pixel_values"].dtype).replace("torch.", ""),
                                  "model_dtype": str(self.dtype).replace("torch.", ""),
                                  "generated": out[:, n:].tolist()})
            return out

        model.__class__ = type(base.__name__, (base,), {"generate": generate})
        return model


def to_cpu(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == "cuda":
            node.value = "cpu"
    return tree


def loaders(checkpoint, rec, loaded):
    import torch
    from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration

    class Model:
        @staticmethod
        def from_pretrained(path, **kwargs):
            loaded["model"] = {k: str(v).replace("torch.", "") for k, v in kwargs.items()}
            assert Path(path).name in ("Seg-Zero-7B", "VisionReasoner-7B"), path
            model = Qwen2_5_VLForConditionalGeneration.from_pretrained(
                checkpoint, torch_dtype=kwargs["torch_dtype"], attn_implementation="sdpa")
            return rec.model(model)

    class Processor:
        @staticmethod
        def from_pretrained(path, **kwargs):
            loaded["processor"] = dict(kwargs)
            return rec.processor(AutoProcessor.from_pretrained(checkpoint, **kwargs))

    class Sam2:
        @staticmethod
        def from_pretrained(path):
            from tests.data.segzero.reference.run_segzero_pipeline import predictor

            return predictor()

    return Model, Processor, Sam2, torch


def dataset(cases):
    from datasets import Dataset, Features, Image, Value

    rows = {"image": [], "text": [], "image_id": [], "ann_id": [], "mask": [], "img_height": [], "img_width": []}
    for name, query, ann in cases:
        w, h, _ = SIZES[name]
        rows["image"].append(str(DATA / "generation" / name))
        rows["text"].append(query)
        rows["image_id"].append(name[:-4])
        rows["ann_id"].append(ann)
        mask = np.zeros((h, w), bool)
        mask[h // 4: h // 2, w // 4: w // 2] = True
        rows["mask"].append(mask.tolist())
        rows["img_height"].append(h)
        rows["img_width"].append(w)
    feats = Features({"image": Image(), "text": Value("string"), "image_id": Value("string"), "ann_id": Value("string"),
                      "mask": [[Value("bool")]], "img_height": Value("int64"), "img_width": Value("int64")})
    return Dataset.from_dict(rows, features=feats)


def run_script(path, checkpoint, fmt):
    """Their main(), whole, with the shims of the module docstring."""
    import argparse

    tree = to_cpu(ast.parse(Path(path).read_text()))
    keep = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    rec, loaded, factors, texts = Recorder(), {}, [], []
    Model, Processor, Sam2, torch = loaders(checkpoint, rec, loaded)
    from PIL import Image as PILImage

    import re

    with tempfile.TemporaryDirectory(prefix="segzerogen-out-") as out_dir:
        args = argparse.Namespace(reasoning_model_path=f"Ricky06662/{'Seg-Zero-7B' if fmt == 'seg_zero' else 'VisionReasoner-7B'}",
                                  segmentation_model_path="facebook/sam2-hiera-large", output_path=out_dir,
                                  test_data_path="Ricky06662/ReasonSeg_val", idx=0, num_parts=1, batch_size=len(CASES))
        ns = {"argparse": argparse, "torch": torch, "json": json, "re": re, "np": np, "os": __import__("os"),
              "PILImage": PILImage, "tqdm": lambda x: x, "Qwen2_5_VLForConditionalGeneration": Model,
              "AutoProcessor": Processor, "SAM2ImagePredictor": Sam2, "print": lambda *a, **k: None,
              "load_dataset": lambda path, split: dataset(CASES)}
        from qwen_vl_utils import process_vision_info

        ns["process_vision_info"] = process_vision_info
        exec(compile(ast.Module(keep, []), str(path), "exec"), ns)
        ns["parse_args"] = lambda: args
        theirs = ns["extract_bbox_points_think"]

        def recording(text, x_factor, y_factor):
            factors.append([x_factor, y_factor])
            texts.append(text)
            return theirs(text, x_factor, y_factor)

        ns["extract_bbox_points_think"] = recording
        ns["main"]()
    return {"loaded": loaded, "processor_calls": rec.calls, "generates": rec.generates, "decoded": texts, "factors": factors,
            "scaled": [list(theirs(READABLE[fmt], fx, fy)) for fx, fy in factors]}


def run_model_file(path, checkpoint):
    """VisionReasonerModel (class body as written, its bases dropped) built by its own __init__ and
    asked segment_objects(image, query) per case."""
    tree = to_cpu(ast.parse(Path(path).read_text()))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "VisionReasonerModel")
    cls.bases = []
    rec, loaded, factors, texts = Recorder(), {}, [], []
    Model, Processor, Sam2, torch = loaders(checkpoint, rec, loaded)
    from PIL import Image as PILImage
    from qwen_vl_utils import process_vision_info

    import re

    ns = {"torch": torch, "np": np, "re": re, "json": json, "os": __import__("os"), "PILImage": PILImage,
          "Qwen2_5_VLForConditionalGeneration": Model, "AutoProcessor": Processor, "SAM2ImagePredictor": Sam2,
          "process_vision_info": process_vision_info, "TaskRouter": lambda path: None, "YOLOWorld": None,
          "OpenAI": None, "print": lambda *a, **k: None, "STOP_WORDS": set(), "MAX_QUERY_WORDS": 2}
    exec(compile(ast.Module([cls], []), str(path), "exec"), ns)
    model = ns["VisionReasonerModel"](reasoning_model_path="Ricky06662/VisionReasoner-7B")
    theirs = model.extract_bbox_points_think

    def recording(text, x_factor, y_factor):
        factors.append([x_factor, y_factor])
        texts.append(text)
        return theirs(text, x_factor, y_factor)

    model.extract_bbox_points_think = recording
    data = dataset(CASES)
    for item in data:
        model.segment_objects(item["image"], item["text"])
    return {"loaded": loaded, "processor_calls": rec.calls, "generates": rec.generates, "decoded": texts,
            "factors": factors, "scaled": [list(theirs(READABLE["visionreasoner"], fx, fy))[:2] for fx, fy in factors]}


def main(segzero_dir, visionreasoner_dir, deps):
    import torch
    import transformers

    sys.path.insert(0, str(deps))
    sys.path.insert(0, str(DATA.parent.parent.parent))
    import qwen_vl_utils  # noqa: F401
    from importlib.metadata import version

    from tests.data.segzero.reference.tiny_qwen25vl import build_checkpoint, weights_digest

    (DATA / "generation").mkdir(exist_ok=True)
    write_images()
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory(prefix="segzerogen-ckpt-") as tmp:
        checkpoint = build_checkpoint(tmp)
        digest = weights_digest(transformers.Qwen2_5_VLForConditionalGeneration.from_pretrained(checkpoint))
        out = {"source": {"seg_zero": "dvlab-research/Seg-Zero@42a33455283ba041a3099cf154a708116f300cec "
                                      "evaluation_scripts/evaluation.py main",
                          "visionreasoner": "dvlab-research/Seg-Zero@42a33455283ba041a3099cf154a708116f300cec "
                                            "evaluation_scripts/evaluation_visionreasoner.py main",
                          "visionreasoner_model": "dvlab-research/VisionReasoner@a455092 vision_reasoner/models/"
                                                  "vision_reasoner_model.py VisionReasonerModel.segment_objects"},
               "torch": torch.__version__, "transformers": transformers.__version__,
               "qwen_vl_utils": version("qwen-vl-utils"), "cap": CAP, "weights_digest": digest,
               "cases": [{"file": f, "query": q, "size": list(SIZES[f][:2]), "mode": SIZES[f][2]} for f, q, _ in CASES],
               "readable": READABLE}
        scripts = Path(segzero_dir) / "evaluation_scripts"
        for fmt, script in (("seg_zero", "evaluation.py"), ("visionreasoner", "evaluation_visionreasoner.py")):
            out[fmt] = run_script(scripts / script, checkpoint, fmt)
        out["visionreasoner_model"] = run_model_file(
            Path(visionreasoner_dir) / "vision_reasoner" / "models" / "vision_reasoner_model.py", checkpoint)
        for fmt in ("seg_zero", "visionreasoner", "visionreasoner_model"):
            print(fmt, out[fmt]["loaded"], [g["asked"] for g in out[fmt]["generates"]],
                  [len(set(r)) for g in out[fmt]["generates"] for r in g["generated"]])
    (DATA / "generation.json").write_text(json.dumps(out, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
