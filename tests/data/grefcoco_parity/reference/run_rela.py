"""Run ReLA's own gRefCOCO loader, test mapper and evaluator on the fixture; print what evaluate() returns.

Usage (README.md beside this file)::

    python run_rela.py <reference dir> <fixture root> <predictions dir>  > expected_rela.json

<reference dir> holds, outside this repository: ``gres_model/`` of henghuiding/ReLA @ 3ca9551,
``detectron2/`` (the pure-Python package) of facebookresearch/detectron2 @ 02b5c4e, and ``pkgs/``
with fvcore and iopath from PyPI. Run for each of val, testA, testB, exactly as ReLA's test loop:
``load_grefcoco_json`` (with its G_REFER) -> ``RefCOCOMapper(is_train=False)`` with
``T.Resize((480, 480))`` (build_transform_test, cfg.INPUT.IMAGE_SIZE = 480) -> ``ReferEvaluator``
(distributed=False) .reset / .process / .evaluate.

Stand-ins, and only these:
- ``transformers.BertTokenizer``: a tokenizer whose ``encode`` returns one id per word (the mapper's
  language tokens; nothing the evaluator reads).
- the model: ``outputs = {"ref_seg": [1 - m, m] (float, [2, 480, 480]), "nt_label": tensor(nt_label)}``
  from the prediction PNG m and predictions.json's scores, so ``argmax(dim=0)`` gives the PNG and
  the no-target answer exactly.
- the packages ``gres_model``, ``gres_model.data``, ``gres_model.data.datasets``,
  ``gres_model.data.dataset_mappers``, ``gres_model.evaluation`` are empty namespaces over ReLA's
  folders (their __init__ would import the model, which needs CUDA ops); the modules scored with are
  ReLA's files, imported unchanged.
"""
from __future__ import annotations

import json
import sys
import types
from pathlib import Path


def _namespace(name: str, path: Path) -> None:
    mod = types.ModuleType(name)
    mod.__path__ = [str(path)]
    sys.modules[name] = mod


def main(ref: Path, root: Path, preds: Path) -> dict:
    sys.path[:0] = [str(ref), str(ref / "pkgs")]
    tok = types.ModuleType("transformers")

    class BertTokenizer:
        @classmethod
        def from_pretrained(cls, name):
            return cls()

        def encode(self, text, add_special_tokens=True):
            return [101] + [1000 + len(w) for w in text.split()] + [102]

    tok.BertTokenizer = BertTokenizer
    sys.modules["transformers"] = tok
    for name in ("gres_model", "gres_model/data", "gres_model/data/datasets", "gres_model/data/dataset_mappers",
                 "gres_model/evaluation"):
        _namespace(name.replace("/", "."), ref / name)

    import importlib

    import cv2
    import numpy as np
    import torch
    from detectron2.data import transforms as T

    grefcoco = importlib.import_module("gres_model.data.datasets.grefcoco")
    mapper_mod = importlib.import_module("gres_model.data.dataset_mappers.refcoco_mapper")
    evaluation = importlib.import_module("gres_model.evaluation.refer_evaluation")

    entries = {str(e["sent_id"]): e for e in json.loads((preds / "predictions.json").read_text())}
    mapper = mapper_mod.RefCOCOMapper(is_train=False, tfm_gens=[T.Resize((480, 480))], image_format="RGB",
                                      bert_type="bert-base-uncased", max_tokens=20)
    out = {}
    for split in ("val", "testA", "testB"):
        dicts = grefcoco.load_grefcoco_json(str(root), "grefcoco", "unc", split, str(root / "images" / "train2014"))
        evaluator = evaluation.ReferEvaluator(f"grefcoco_unc_{split}", distributed=False, output_dir=None)
        evaluator.reset()
        for d in dicts:
            inp = mapper(d)
            e = entries[str(d["sentence"]["sent_id"])]
            m = cv2.imread(str(preds / e["mask"]), cv2.IMREAD_UNCHANGED) != 0
            m = torch.as_tensor(m.astype(np.float32))
            evaluator.process([inp], [{"ref_seg": torch.stack([1 - m, m]), "nt_label": torch.tensor(e["nt_label"])}])
        results = evaluator.evaluate()
        nt = {"TP": 0, "TN": 0, "FP": 0, "FN": 0}
        for p in evaluator._predictions:
            nt[("T" if p["pred_nt"] == p["gt_nt"] else "F") + ("P" if p["pred_nt"] else "N")] += 1
        out[split] = {"results": {src: {k: float(v) for k, v in res.items()} for src, res in results.items()},
                      "counts": nt, "n": len(dicts)}
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])), indent=1, sort_keys=True))
