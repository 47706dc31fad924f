import numpy as np
from PIL import Image

from rvt_bench.core import masks
from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import Prediction, Sample, Target
from rvt_bench.harness.visualize import GT_RGB, LINE_PX, PANEL_HEIGHT, PRED_RGB, choose_frames, render_sample
from rvt_bench.metrics.units.box_iou import BoxValues
from rvt_bench.metrics.units.captions import TextValues
from rvt_bench.metrics.units.video_jf import VideoJFValues


def score_line(sid, values) -> dict:
    """A scores.jsonl line holding one kind of values."""
    return ScoreRecord(sid, values={values.kind: values}).to_json()


def jf(value) -> VideoJFValues:
    return VideoJFValues(value, value, value, {})


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
    pic = render_sample(sample, pred, score_line("v/0", jf(0.25)), max_frames=2)
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


def test_gt_boxes_are_drawn_in_the_gt_colour(tmp_path):
    sample, _ = sample_with_frames(tmp_path, n=1)
    sample.target.masks = None
    sample.target.boxes = [[[20.0, 20.0, 100.0, 80.0]]]
    pic = render_sample(sample, Prediction("v/0", boxes=[[]]), None)
    k = PANEL_HEIGHT // 120
    panel = pic[-PANEL_HEIGHT:, : 160 * k]
    green = (np.abs(panel.astype(int) - np.array(GT_RGB)).sum(axis=2) < 30)
    assert green[20 * k - 2:20 * k + 3, 30 * k:90 * k].mean() > 0.9  # the box's top edge (y = 20)
    assert not green[40 * k:60 * k, 40 * k:80 * k].any()  # its inside is not filled


def test_ignore_region_is_visible_on_a_grayscale_frame(tmp_path):
    from rvt_bench.harness.visualize import IGNORE_RGB

    p = tmp_path / "gray.png"
    Image.fromarray(np.full((120, 160), 128, np.uint8)).save(p)  # a single-channel image
    ignore = np.zeros((120, 160), bool)
    ignore[10:50, 10:50] = True
    sample = Sample(id="i/0", dataset="x", split="val", modality="image", frames=[str(p)], frame_ids=["gray"],
                    query="q", task="segmentation", target=Target(masks=[None], ignore=[masks.encode(ignore)]))
    pic = render_sample(sample, None, None)
    k = PANEL_HEIGHT // 120
    panel = pic[-PANEL_HEIGHT:, : 160 * k].astype(int)
    inside, outside = panel[15 * k:45 * k, 15 * k:45 * k], panel[70 * k:110 * k, 70 * k:150 * k]
    assert (np.abs(outside - 128).max()) <= 2  # untouched grey
    near = np.abs(inside - np.array(IGNORE_RGB)).sum(axis=2) < 120
    assert 0.3 < near.mean() < 0.7  # hatched: about half the pixels carry the ignore colour


def test_reference_answers_are_shown_in_the_header(tmp_path):
    sample, _ = sample_with_frames(tmp_path, n=1)
    bare = render_sample(sample, Prediction("v/0", text="a cat"), None)
    sample.target.answers = ["a dog", "the dog"]
    with_refs = render_sample(sample, Prediction("v/0", text="a cat"), None)
    assert with_refs.shape[0] == bare.shape[0] + 2 * LINE_PX  # one header line per reference answer


def test_frames_shown_are_those_holding_the_answer_and_the_worst(tmp_path):
    sample, gt = sample_with_frames(tmp_path, n=12)
    sample.target.masks = [None] * 12
    sample.target.masks[9] = masks.encode(gt)  # GT only in frame 9
    pred = Prediction("v/0", masks=[None] * 12)
    pred.masks[1] = pred.masks[2] = masks.encode(gt)  # predicted in frames 1-2 only
    per_frame = [1.0] * 12
    per_frame[9] = 0.0  # the worst frame
    score = score_line("v/0", VideoJFValues(0.9, 0.9, 0.9, {"J": per_frame}))
    assert choose_frames(sample, pred, score, 4) == [1, 2, 9]  # never frames where nothing is drawn
    assert choose_frames(sample, None, None, 4) == [9]


def test_the_prediction_is_filled_and_outlined_in_black_under_magenta(tmp_path):
    p = tmp_path / "white.png"
    Image.fromarray(np.full((120, 160, 3), 255, np.uint8)).save(p)
    box = np.zeros((120, 160), bool)
    box[40:80, 40:120] = True
    sample = Sample(id="i/0", dataset="x", split="val", modality="image", frames=[str(p)], frame_ids=["w"],
                    query="q", task="segmentation", target=Target(masks=[None]))
    panel = render_sample(sample, Prediction("i/0", masks=[masks.encode(box)]), None)[-PANEL_HEIGHT:].astype(int)
    k = PANEL_HEIGHT // 120
    inside = panel[55 * k:65 * k, 70 * k:90 * k]
    assert (inside[..., 1] < 200).all() and (inside[..., 0] > 200).all()  # magenta tint on white, not white
    assert (np.abs(panel - np.array(PRED_RGB)).sum(axis=2) < 60).any()  # the outline's colour
    assert (panel.sum(axis=2) < 60).any()  # its black border: visible on white and on magenta scenes


def test_worst_picks_per_task_among_scored_samples_only(tmp_path):
    from rvt_bench.harness.visualize import worst_per_task

    def s(sid, task):
        return Sample(id=sid, dataset="x", split="v", modality="image", frames=[], frame_ids=[], query="q", task=task,
                      target=Target())

    samples = {"a": s("a", "segmentation"), "b": s("b", "segmentation"), "c": s("c", "grounding"),
               "d": s("d", "vqa"), "e": s("e", "segmentation")}
    scores = {"a": score_line("a", jf(0.9)), "b": score_line("b", jf(0.1)),
              "c": score_line("c", BoxValues(0.5, 1.0, 2.0, [0.5])), "d": score_line("d", TextValues("x", ["y"])),
              "e": score_line("e", jf(0.5))}
    assert worst_per_task(list(samples), samples, scores, 2) == ["c", "b", "e"]
