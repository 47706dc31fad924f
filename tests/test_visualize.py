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
    k = PANEL_HEIGHT // 120  # frames are 120 px high
    panel = pic[-PANEL_HEIGHT:, : 160 * k]  # first frame
    green = (np.abs(panel.astype(int) - np.array(GT_RGB) * 0.45).sum(axis=2) < 40)
    red = (np.abs(panel.astype(int) - np.array(PRED_RGB)).sum(axis=2) < 60)
    assert green[25 * k:55 * k, 25 * k:55 * k].mean() > 0.9  # inside the GT square 20:60
    assert red.sum() > 100 and not red[25 * k:55 * k, 25 * k:55 * k].any()  # outline away from the GT
    assert red[68 * k:112 * k, 98 * k:152 * k].any()  # around the prediction 70:110 x 100:150


def test_failed_sample_renders_without_prediction_masks(tmp_path):
    sample, _ = sample_with_frames(tmp_path, n=1)
    pic = render_sample(sample, Prediction.failure("v/0", "parse", "no <answer>"), None)
    assert pic.shape[0] > PANEL_HEIGHT  # header + one panel
