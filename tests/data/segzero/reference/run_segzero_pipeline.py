"""Run the authors' per-sample block (reply -> SAM2 -> intersection / union) on shared tiny SAM2
weights, for tests/data/segzero/pipeline.json.

The block is the ``with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):`` loop
of ``main`` in Seg-Zero @ 42a33455283ba041a3099cf154a708116f300cec evaluation_scripts/evaluation.py
(Seg-Zero) and evaluation_visionreasoner.py (VisionReasoner's published ReasonSeg number), read from
a copy OUTSIDE this repository (SEGZERO_DIR) and executed unchanged but for two shims that touch
no arithmetic:
- the autocast device "cuda" becomes "cpu" (CPU autocast runs bfloat16 too);
- their ``SAM2ImagePredictor.from_pretrained`` model is the tiny random-weight SAM2 of
  ``Sam2PkgBackend.tiny(seed=0)`` (rvt_bench; 128 px input), whose backbone feature sizes the
  predictor is told (it hard-codes a 1024 px model's), as the port's predictor is.
Inputs: every reply of tests/data/segzero/parsers.json, answering about one 48 x 72 frame (seeded
noise) with a rectangular ground truth. Recorded per reply and script: "penalty" (their except
branch: intersection 0, union the GT's area), "skipped" (their `continue`), or the intersection and
union written.

usage: python run_segzero_pipeline.py SEGZERO_DIR   (with this checkout's venv: rvt_bench, sam2, torch)
"""
import ast
import json
import re
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image

HERE = Path(__file__).resolve().parent.parent
H, W = 48, 72


def frame_and_gt():
    """The shared input: seeded noise with a brighter block, and the block as ground truth."""
    rng = np.random.default_rng(7)
    frame = rng.integers(0, 120, (H, W, 3), dtype=np.uint8)
    frame[10:38, 20:55] += 120
    gt = np.zeros((H, W), bool)
    gt[10:38, 20:55] = True
    return frame, gt


def their_block(path):
    """(the `with ... autocast` statement of main, compiled with device "cpu"; extract function;
    compute_iou) from one of their scripts."""
    source = Path(path).read_text()
    tree = ast.parse(source)
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    block = next(n for n in ast.walk(main) if isinstance(n, ast.With) and len(n.items) == 2
                 and "autocast" in ast.unparse(n.items[1]))
    for node in ast.walk(block.items[1].context_expr):
        if isinstance(node, ast.Constant) and node.value == "cuda":
            node.value = "cpu"
    ns = {"re": re, "json": json, "np": np, "torch": torch}
    for name in ("extract_bbox_points_think", "compute_iou", "compute_bbox_iou"):
        fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
        if fn is not None:
            exec(compile(ast.Module([fn], []), str(path), "exec"), ns)
    return compile(ast.Module([block], []), str(path), "exec"), ns


def predictor():
    from sam2.sam2_image_predictor import SAM2ImagePredictor

    from rvt_bench.adapters.twin.backends.sam2_pkg import Sam2PkgBackend

    model, _ = Sam2PkgBackend.tiny(seed=0, device="cpu").components()
    pred = SAM2ImagePredictor(model)
    side = int(model.image_size)
    pred._bb_feat_sizes = [(side // 4, side // 4), (side // 8, side // 8), (side // 16, side // 16)]
    return Counting(pred)


class Counting:
    """Their predictor, counting the calls that raised (SAM errors are their "Segmentation error")."""

    def __init__(self, inner):
        self.inner, self.raised = inner, 0

    def set_image(self, image):
        return self._call(self.inner.set_image, image)

    def predict(self, **kwargs):
        return self._call(self.inner.predict, **kwargs)

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception:
            self.raised += 1
            raise


def main(segzero_dir):
    scripts = Path(segzero_dir) / "evaluation_scripts"
    replies = sorted({c["reply"] for c in json.loads((HERE / "parsers.json").read_text())["cases"]})
    frame, gt = frame_and_gt()
    image = Image.fromarray(frame)
    segmentation_model = predictor()
    out = {}
    for name, script in (("seg_zero", "evaluation.py"), ("visionreasoner", "evaluation_visionreasoner.py")):
        code, ns = their_block(scripts / script)
        rows = []
        for k, reply in enumerate(replies):
            all_outputs = []
            ns.update(batch_output_text=[reply], resize_size=840, segmentation_model=segmentation_model, has_bbox=False,
                      all_outputs=all_outputs, print=lambda *a, **kw: None,
                      batch_id_list=[{"image_id": str(k), "ann_id": str(k), "image": image, "mask": gt.tolist(),
                                      "img_height": H, "img_width": W, "bbox": None}])
            exec(code, ns)
            if not all_outputs:
                rows.append({"outcome": "skipped"})
            else:
                row = {"outcome": "written", "intersection": all_outputs[0]["intersection"], "union": all_outputs[0]["union"]}
                try:  # their except branch is the one where their extract raised (SAM never raises here: asserted)
                    ns["extract_bbox_points_think"](reply, W / 840, H / 840)
                except Exception:  # noqa: BLE001
                    row["outcome"] = "penalty"
                assert segmentation_model.raised == 0, (name, reply)
                rows.append(row)
        out[name] = rows
        counts = {o: sum(r["outcome"] == o for r in rows) for o in ("written", "penalty", "skipped")}
        ious = sorted({round(r["intersection"] / r["union"], 3) for r in rows if r["outcome"] == "written" and r["union"]})
        print(name, counts, len(ious), "distinct IoUs", ious[:3], ious[-3:])
    (HERE / "pipeline.json").write_text(json.dumps({
        "source": "dvlab-research/Seg-Zero@42a33455283ba041a3099cf154a708116f300cec evaluation_scripts/evaluation.py "
                  "and evaluation_visionreasoner.py main's autocast block (device cuda -> cpu), tiny SAM2 Sam2PkgBackend.tiny(seed=0)",
        "torch": torch.__version__, "height": H, "width": W, "replies": replies, **out}, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
