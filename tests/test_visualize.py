import numpy as np
from PIL import Image

from bench import masks
from bench.types import Prediction, Sample, Target
from bench.visualize import GT_RGB, PANEL_HEIGHT, PRED_RGB, render_sample


def sample_with_frames(tmp_path, n=3, h=120, w=160):
    paths = []
    for t in range(n):
        p = tmp_path / f"{t:05d}.jpg"
        Image.fromarray(np.zeros((h, w, 3), np.uint8)).save(p)
        paths.append(str(p))
    gt = np.zeros((h, w), bool)
    gt[20:60, 20:60] = True
    return Sample(id="v/0", dataset="x", split="valid", modality="video", frames=paths,
                  frame_ids=[f"{t:05d}" for t in range(n)], query="the square", task="segmentation",
                  target=Target(masks=[masks.encode(gt)] * n)), gt


def test_overlay_shows_gt_fill_and_prediction_outline(tmp_path):
    sample, gt = sample_with_frames(tmp_path)
    pred_mask = np.zeros_like(gt)
    pred_mask[70:110, 100:150] = True
    pred = Prediction("v/0", masks=[masks.encode(pred_mask)] * 3)
    pic = render_sample(sample, pred, {"J&F": 0.25}, max_frames=2)
    assert pic.dtype == np.uint8 and pic.shape[2] == 3
    panel = pic[-PANEL_HEIGHT:, : PANEL_HEIGHT * 160 // 120]  # first frame, scaled x2
    green = (np.abs(panel.astype(int) - np.array(GT_RGB) * 0.45).sum(axis=2) < 40)
    red = (np.abs(panel.astype(int) - np.array(PRED_RGB)).sum(axis=2) < 60)
    assert green[50:110, 50:110].mean() > 0.9  # GT square 20:60 at scale 2
    assert red.sum() > 100 and not red[60:100, 60:100].any()  # outline of the prediction, away from GT


def test_failed_sample_renders_without_prediction_masks(tmp_path):
    sample, _ = sample_with_frames(tmp_path, n=1)
    pic = render_sample(sample, Prediction.failure("v/0", "parse", "no <answer>"), None)
    assert pic.shape[0] > PANEL_HEIGHT  # header + one panel
