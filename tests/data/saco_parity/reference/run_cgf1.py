"""Run SAM 3's own cgF1 evaluator on the fixture; print what CGF1Evaluator.evaluate returns.

Usage (README.md beside this file)::

    python run_cgf1.py <sam3 checkout> <gt dir> <predictions dir>  > expected_cgf1.json

<sam3 checkout>: facebookresearch/sam3 @ 99d02f2 (outside this repository); only
``sam3/eval/cgf1_eval.py`` is imported (``sam3`` and ``sam3.eval`` are empty namespaces over its
folders: their __init__ would import the model). As scripts/eval/standalone_cgf1.py:
``CGF1Evaluator(gt_path=[...], verbose=True, iou_type="segm").evaluate(pred_file)``, for the
oracle over a, b, c, each annotator alone, the pair (b, a), and an empty predictions file; plus
eval_sam3.py's table cells (round(cgF1 * 100, 2), round(IL_MCC, 2), round(pmF1 * 100, 2)).
"""
from __future__ import annotations

import contextlib
import json
import math
import sys
import tempfile
import types
from pathlib import Path

RUNS = {"abc": "abc", "a": "a", "b": "b", "c": "c", "ba": "ba"}


def _namespace(name: str, path: Path) -> None:
    mod = types.ModuleType(name)
    mod.__path__ = [str(path)]
    sys.modules[name] = mod


def main(ref: Path, gt: Path, preds: Path) -> dict:
    _namespace("sam3", ref / "sam3")
    _namespace("sam3.eval", ref / "sam3" / "eval")
    from sam3.eval.cgf1_eval import CGF1Evaluator

    pred_file = preds / "gold_metaclip_nps/dumps/gold_metaclip_nps/coco_predictions_segm.json"
    empty = Path(tempfile.mkdtemp()) / "empty.json"
    empty.write_text("[]")
    out = {}
    for label, annotators in [*RUNS.items(), ("abc_empty", "abc")]:
        files = [str(gt / f"gold_metaclip_merged_{a}_release_test.json") for a in annotators]
        with contextlib.redirect_stdout(sys.stderr):
            ev = CGF1Evaluator(gt_path=files, verbose=True, iou_type="segm")
            res = ev.evaluate(str(empty if label.endswith("empty") else pred_file))
        res = {k.removeprefix("cgF1_eval_segm_"): v for k, v in res.items()}
        out[label] = {"metrics": res, "n": len(ev.eval_img_ids),
                      "table": [round(res["cgF1"] * 100, 2), round(res["IL_MCC"], 2),
                                round(res["positive_micro_F1"] * 100, 2)]}
        assert all(math.isfinite(v) for v in res.values())
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])), indent=1, sort_keys=True))
