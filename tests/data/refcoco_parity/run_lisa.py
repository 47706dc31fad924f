"""Run LISA's own RefCOCO validation code on the fixture (make_fixture.py) and print what it gives.

    python tests/data/refcoco_parity/run_lisa.py LISA_CHECKOUT WORK > expected_lisa.json

LISA_CHECKOUT: github.com/dvlab-research/LISA @ 3cb2d4301f1af4691bd4f3938335ef06e76f155a (outside
this repository; nothing of it is committed here). Executed unchanged, from its files:
``utils/refer.py`` (REFER), ``utils/dataset.py::ValDataset`` (class source, run as written),
``utils/utils.py`` (AverageMeter, intersectionAndUnionGPU), ``train_ds.py::validate`` (function
source, run as written), ``model/segment_anything/utils/transforms.py``, ``model/llava/conversation.py``.
What stands in for the rest, none of it on the scoring path:
- the model: returns, for image ``idx`` of ValDataset, logits +1 / -1 from ``pred/<sent_id>.png``
  for the image's sentences in ValDataset's own order (its img2refs, then each ref's sentences),
  and ``gt_masks`` = the batch's ``masks_list`` (what LISAForCausalLM.evaluate returns);
- ``CLIPImageProcessor``: zeros (the CLIP input is not used by the stand-in model);
- ``dict_to_cuda``: identity, and ``torch.histc`` on CPU receives the int masks as float32 (the CPU
  kernel has no int version; counts below 2^24 are exact, as on CUDA);
- ``torch.distributed``: a one-process gloo group (all_reduce is then the identity).
The batch is collated as LISA's collate_fn does for the fields validate reads (batch size 1).
"""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPLITS = ["refcoco|unc|val", "refcoco|unc|testA", "refcoco|unc|testB", "refcoco+|unc|val", "refcoco+|unc|testA",
          "refcoco+|unc|testB", "refcocog|umd|val", "refcocog|umd|test", "refcocog|google|val", "refcoco|google|test"]


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _source_of(path: Path, name: str) -> str:
    text = path.read_text()
    for node in ast.parse(text).body:
        if getattr(node, "name", None) == name:
            return ast.get_source_segment(text, node)
    raise SystemExit(f"{name} not found in {path}")


def main(lisa: Path, work: Path) -> dict:
    import cv2
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    import tqdm
    from pycocotools import mask

    sys.path.insert(0, str(HERE))
    from make_fixture import write_fixture

    root, pred = write_fixture(work)
    refer = _module("lisa_refer", lisa / "utils" / "refer.py")
    lutils = _module("lisa_utils", lisa / "utils" / "utils.py")
    conversation_lib = _module("lisa_conversation", lisa / "model" / "llava" / "conversation.py")
    transforms = _module("lisa_transforms", lisa / "model" / "segment_anything" / "utils" / "transforms.py")

    class CLIPImageProcessor:
        @classmethod
        def from_pretrained(cls, *_a, **_k):
            return cls()

        def preprocess(self, image, return_tensors="pt"):
            return {"pixel_values": torch.zeros(1, 3, 4, 4)}

    ns = {"glob": __import__("glob"), "os": os, "cv2": cv2, "np": np, "torch": torch, "F": F, "mask": mask,
          "REFER": refer.REFER, "CLIPImageProcessor": CLIPImageProcessor, "conversation_lib": conversation_lib,
          "DEFAULT_IMAGE_TOKEN": "<image>", "ResizeLongestSide": transforms.ResizeLongestSide,
          "get_mask_from_json": None}
    exec(_source_of(lisa / "utils" / "dataset.py", "ValDataset"), ns)
    ValDataset = ns["ValDataset"]

    real_histc = torch.histc

    def histc(t, *a, **k):
        return real_histc(t.float() if not t.is_floating_point() else t, *a, **k)

    vns = {"torch": types.SimpleNamespace(**{**{k: getattr(torch, k) for k in dir(torch) if not k.startswith("__")},
                                              "cuda": types.SimpleNamespace(empty_cache=lambda: None)}),
           "tqdm": tqdm, "AverageMeter": lutils.AverageMeter, "Summary": lutils.Summary,
           "intersectionAndUnionGPU": lutils.intersectionAndUnionGPU, "dict_to_cuda": lambda d: d}
    exec(_source_of(lisa / "train_ds.py", "validate"), vns)
    validate = vns["validate"]

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=0, world_size=1)
    torch.histc = histc
    out = {"lisa": "dvlab-research/LISA@3cb2d4301f1af4691bd4f3938335ef06e76f155a", "splits": {}}
    try:
        for val_dataset in SPLITS:
            ds = ValDataset(str(root), None, "clip", val_dataset, image_size=64)

            def loader(ds=ds):
                for idx in range(len(ds)):
                    (_path, image, clip, convs, masks, label, resize, _a, _b, _inf) = ds[idx]
                    yield {"images": image[None], "images_clip": clip[None], "masks_list": [masks.float()], "idx": idx}

            def model(ds=ds, **batch):
                info = ds.refer_seg_ds["images"][batch["idx"]]
                sids = [s["sent_id"] for ref in ds.refer_seg_ds["img2refs"][info["id"]] for s in ref["sentences"]]
                logits = [torch.from_numpy(np.where(cv2.imread(str(pred / f"{s}.png"), cv2.IMREAD_GRAYSCALE) > 0, 1.0, -1.0))
                          for s in sids]
                return {"pred_masks": [torch.stack(logits)], "gt_masks": batch["masks_list"]}

            model.eval = lambda: None
            args = types.SimpleNamespace(precision="fp32", local_rank=0)
            writer = types.SimpleNamespace(add_scalar=lambda *a, **k: None)
            print(val_dataset, file=sys.stderr)
            giou, ciou = validate(loader(), model, 0, writer, args)  # prints "giou: ..., ciou: ..."
            n = sum(len(s["sentences"]) for refs in ds.refer_seg_ds["img2refs"].values() for s in refs)
            out["splits"][val_dataset] = {"giou": float(giou), "ciou": float(ciou), "n_sentences": n,
                                          "n_images": len(ds)}
    finally:
        torch.histc = real_histc
        dist.destroy_process_group()
    return out


if __name__ == "__main__":
    stdout, sys.stdout = sys.stdout, sys.stderr  # REFER and validate print progress: stderr; the JSON alone on stdout
    result = main(Path(sys.argv[1]), Path(sys.argv[2]))
    sys.stdout = stdout
    print(json.dumps(result, indent=1))
