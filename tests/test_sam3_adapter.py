"""`+model=sam3` on tiny random-weight SAM 3 checkpoints (tests/sam3_tiny.py): the demo end to end
(images and videos), the "no target" answer when nothing is detected, the funnel, one-line errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rvt_bench.adapters.sam3.adapter import Sam3Adapter
from rvt_bench.core import masks
from rvt_bench.core.types import AdapterError
from rvt_bench.loaders.demo import DemoDataset
from tests import sam3_tiny

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return sam3_tiny.build(tmp_path_factory.mktemp("tiny_sam3"), sam3_tiny.calibration_frames())


@pytest.fixture(scope="module")
def blind_checkpoint(tmp_path_factory):
    """The presence logit at -8: every score is below 0.5, on images and videos."""
    return sam3_tiny.build(tmp_path_factory.mktemp("blind_sam3"), sam3_tiny.calibration_frames(), logit_bias=-8.0)


@pytest.fixture(scope="module")
def demo():
    return {s.id: s for s in DemoDataset(REPO / "demo", split="quick")}


def test_run_bench_demo_end_to_end_images_and_videos(checkpoint, tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, str(REPO / "run_bench.py"), "+dataset=demo", "+model=sam3", f"model.checkpoint={checkpoint}",
         f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}"],
        cwd=REPO, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1].removeprefix("run directory: "))
    preds = {r["sample_id"]: r for r in map(json.loads, (run_dir / "predictions.jsonl").read_text().splitlines())}
    samples = {s.id: s for s in DemoDataset(REPO / "demo", split="quick")}
    answered = {sid: p for sid, p in preds.items() if samples[sid].task in ("segmentation", "grounding")}
    assert answered and all(p["error"] is None for p in answered.values()), answered
    shown = {"image": 0, "video": 0}
    for sid, pred in answered.items():
        sample = samples[sid]
        if pred.get("no_target"):
            continue
        per_frame = pred["masks"] if sample.task == "segmentation" else pred["boxes"]
        assert len(per_frame) == sample.num_frames
        if sample.task == "segmentation":
            areas = [masks.area(m) for m in per_frame]
            size = masks.decode(per_frame[0]).size
            assert all(a < size for a in areas), sid  # calibrated: no mask covers the whole frame
            shown[sample.modality] += any(areas)
    assert shown["image"] >= 1 and shown["video"] >= 1, shown  # the tiny model detects on both
    for sid in set(preds) - set(answered):  # vqa, summarization: one line naming the task
        assert "SAM 3 answers segmentation and grounding" in preds[sid]["error"]["message"]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["adapter_report"]["model"] == "sam3"
    assert "funnel: concept detected" in proc.stdout


def test_image_detections_above_the_threshold_are_united(checkpoint, demo):
    sample = demo["image/coffee_cup"]
    adapter = Sam3Adapter(checkpoint=str(checkpoint))
    pred = adapter.predict(sample)
    kept = pred.trace["scores"]
    assert pred.trace["detections"] == [len(kept)] and len(kept) >= 2 and min(kept) > 0.5
    union = masks.decode(pred.masks[0])
    assert 0 < union.sum() < union.size
    one = Sam3Adapter(checkpoint=str(checkpoint), threshold=max(kept) - 1e-6).predict(sample)
    assert one.trace["detections"] == [1] and masks.area(one.masks[0]) < masks.area(pred.masks[0])


def test_each_kept_image_detection_is_an_instance_that_saco_gold_scores(checkpoint, demo):
    """SA-Co/Gold scores instances (SAM 3's evaluation dumps one COCO result per detection): the union
    alone was one instance of score 1.0 there. Against a GT made of the detections' own masks every
    prediction now matches (pmF1 1.0); the union alone would match at most one of them."""
    from rvt_bench.core.types import Prediction
    from rvt_bench.metrics.protocols.saco_gold import SACoGoldProtocol

    sample = demo["image/coffee_cup"]
    pred = Sam3Adapter(checkpoint=str(checkpoint)).predict(sample)
    instances = pred.trace["instances"]
    assert len(instances) == pred.trace["detections"][0] >= 2
    assert [score for _, score in instances] == pred.trace["scores"]
    each = [masks.decode(rle) for rle, _ in instances]
    assert all(m.shape == masks.decode(pred.masks[0]).shape and m.any() for m in each)
    assert np.array_equal(np.logical_or.reduce(each), masks.decode(pred.masks[0]))  # the union is the sample's mask
    gt = replace(sample, meta={"annotations": {"a": [[rle, 0] for rle, _ in instances]}, "order": 0})
    protocol = SACoGoldProtocol()
    scored = protocol.aggregate([protocol.score(gt, pred)])["metrics"]
    assert scored["positive_micro_F1"] == pytest.approx(1.0, abs=1e-3)
    union_only = Prediction(sample_id=pred.sample_id, task=pred.task, masks=pred.masks)
    assert protocol.aggregate([protocol.score(gt, union_only)])["metrics"]["positive_micro_F1"] < 0.9


def test_a_long_query_is_cut_at_the_text_context(checkpoint, demo):
    sample = replace(demo["image/coffee_cup"], query=" ".join(["the cup on the left of the table"] * 12))
    pred = Sam3Adapter(checkpoint=str(checkpoint)).predict(sample)  # without the cut: position embeddings overflow
    assert pred.error is None and pred.trace["detections"]


@pytest.mark.parametrize("sid", ["image/coffee_cup", "video/UVO/all/coin_entry/0"])
def test_a_query_no_codec_accepts_fails_its_sample_in_one_line(checkpoint, demo, sid):
    # a JSON annotation's "\ud800" is a lone surrogate: the tokenizer raised TypeError (an adapter crash)
    sample = replace(demo[sid], query="the cup \ud800 on the left")
    with pytest.raises(AdapterError, match="U\\+D800, a lone surrogate, at character 8") as err:
        Sam3Adapter(checkpoint=str(checkpoint)).predict(sample)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("sid", ["image/coffee_cup", "video/UVO/all/coin_entry/0"])
def test_no_detection_is_the_no_target_answer(blind_checkpoint, demo, sid):
    sample = demo[sid]
    pred = Sam3Adapter(checkpoint=str(blind_checkpoint)).predict(sample)
    assert pred.no_target and pred.masks is None and pred.boxes is None
    assert not any(pred.trace["detections"])
    if sample.modality == "image":  # 1 - the best detection score, below the threshold
        assert pred.no_target_score == pytest.approx(1 - pred.trace["best_score"], abs=1e-5)
        assert pred.no_target_score > 0.5
    pred.check_no_target()


def test_an_image_threshold_of_one_keeps_nothing(checkpoint, demo):
    pred = Sam3Adapter(checkpoint=str(checkpoint), threshold=1.0).predict(demo["image/coffee_cup"])
    assert pred.no_target and pred.trace["best_score"] > 0.5


def test_grounding_is_the_box_around_the_kept_masks(checkpoint, demo):
    sample = replace(demo["image/coffee_cup"], task="grounding", target=None)
    adapter = Sam3Adapter(checkpoint=str(checkpoint))
    box = adapter.predict(sample).boxes
    mask = masks.decode(adapter.predict(demo["image/coffee_cup"]).masks[0])
    ys, xs = np.nonzero(mask)
    assert box == [[[float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)]]]


def test_funnel_counts_detected_and_decoded(checkpoint, blind_checkpoint, demo):
    from rvt_bench.adapters.base import ScoredSample
    from rvt_bench.core.records import ScoreRecord
    from rvt_bench.metrics.units.lisa_iou import MaskIoUValues

    def iou(value):  # a score record of one image whose mask IoU is `value`
        return ScoreRecord(sample.id, values={"mask_iou": MaskIoUValues(int(100 * value), 100, 100, value, value)})

    sample = demo["image/coffee_cup"]
    seen = Sam3Adapter(checkpoint=str(checkpoint)).predict(sample)
    blind = Sam3Adapter(checkpoint=str(blind_checkpoint))
    unseen = blind.predict(sample)
    items = [ScoredSample(sample, seen, iou(0.2)), ScoredSample(sample, unseen, iou(0.0))]
    assert [blind.sample_stage(i).first_failed for i in items] == ["result_correct", "detected"]
    report = blind.report(items)
    stages = {s.key: s.reached for s in report.stages}
    assert stages["detected"] == 1 and stages["mask_decoded"] == 1
    measures = {m.key: m.value for m in report.measures}
    assert measures["no_target"] == 0.5 and "model_s" in measures


def test_missing_checkpoint_is_one_line(tmp_path):
    with pytest.raises(AdapterError) as exc:
        Sam3Adapter(checkpoint=str(tmp_path / "nowhere")).preflight()
    assert "model.checkpoint" in str(exc.value) and "\n" not in str(exc.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(AdapterError) as exc:
        Sam3Adapter(checkpoint=str(tmp_path / "empty")).preflight()
    assert "config.json is missing" in str(exc.value) and "\n" not in str(exc.value)


def test_unreadable_checkpoint_is_one_line(checkpoint, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(checkpoint, broken)
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(AdapterError) as exc:
        Sam3Adapter(checkpoint=str(broken)).preflight()
    assert "cannot be loaded as SAM 3" in str(exc.value) and "\n" not in str(exc.value)


def test_run_stops_in_one_line_without_a_checkpoint(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "run_bench.py"), "+dataset=demo", "+model=sam3", f"model.checkpoint={tmp_path / 'none'}",
         f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "sam3: model.checkpoint" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_settings_are_checked_and_fingerprinted():
    with pytest.raises(AdapterError, match="prompt"):
        Sam3Adapter(prompt="no placeholder")
    with pytest.raises(AdapterError, match="threshold"):
        Sam3Adapter(threshold=1.5)
    a, b = Sam3Adapter(checkpoint="x/y"), Sam3Adapter(checkpoint="x/y", threshold=0.4)
    assert a.fingerprint() != b.fingerprint() and a.fingerprint()["threshold"] == 0.5
