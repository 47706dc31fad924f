"""RVTBenchProtocol: routing by sample.task to J/F (davis2017), box IoU (metrics/boxes.py) and
pycocoevalcap caption metrics (metrics/text.py); breakdowns by level and category.

Expected values are worked by hand in each test (box areas, pixel counts); F and the caption
metrics are checked against the project's reference-tested functions on the same inputs.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rvt_bench.core import masks
from rvt_bench.core.types import AdapterError, Prediction, Sample, Target
from rvt_bench.metrics.masks import f_measure
from rvt_bench.metrics.protocols.rvtbench import RVTBenchProtocol
from rvt_bench.metrics.units.box_iou import BoxValues
from rvt_bench.metrics.units.video_jf import VideoJFValues

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed")
H, W = 8, 8


def square(y0, y1, x0, x1) -> np.ndarray:
    m = np.zeros((H, W), dtype=bool)
    m[y0:y1, x0:x1] = True
    return m


def sample(sid: str, task: str, n: int = 2, level: int = 1, category: str = "spatial", **target) -> Sample:
    return Sample(id=sid, dataset="rvtbench", split="test", modality="video", frames=[f"f{k}.jpg" for k in range(n)],
                  frame_ids=[str(k) for k in range(n)], query="q", task=task, target=Target(**target),
                  meta={"video": "v", "level": level, "category": category})


def seg_sample(sid="s", **kw) -> Sample:
    return sample(sid, "segmentation", masks=[masks.encode(square(0, 4, 0, 4)), None], **kw)


def test_segmentation_j_is_iou_per_frame_averaged_and_both_empty_frames_score_one():
    half = square(0, 4, 0, 2)  # 8 of the GT's 16 pixels, nothing outside: I = 8, U = 16
    rec = RVTBenchProtocol().score(seg_sample(), Prediction("s", masks=[masks.encode(half), None])).of(VideoJFValues)
    assert rec.frames["I"] == [8, 0] and rec.frames["U"] == [16, 0]
    assert rec.frames["J"] == [0.5, 1.0] and rec.J == 0.75
    assert rec.frames["F"] == [f_measure(square(0, 4, 0, 4), half), 1.0]
    assert rec.jf == (rec.J + rec.F) / 2


def test_grounding_scores_box_iou_per_frame():
    s = sample("g", "grounding", boxes=[[[0, 0, 10, 10]], []])
    rec = RVTBenchProtocol().score(s, Prediction("g", task="grounding", boxes=[[[0, 5, 10, 10]], []])).of(BoxValues)
    assert rec.frame_ious == [0.5, 1.0]  # 50 / 100; neither side has a box in frame 1
    assert rec.giou_term == 0.75 and (rec.I, rec.U) == (50.0, 100.0)


def test_prediction_of_another_task_scores_as_empty():
    exact = [masks.encode(square(0, 4, 0, 4)), None]
    rec = RVTBenchProtocol().score(seg_sample(), Prediction("s", task="vqa", masks=exact, text="a bear"))
    assert rec.of(VideoJFValues).frames["J"] == [0.0, 1.0]
    g = sample("g", "grounding", boxes=[[[0, 0, 10, 10]], []])
    assert RVTBenchProtocol().score(g, Prediction("g", task="segmentation", boxes=[[[0, 0, 10, 10]], []])).of(BoxValues).giou_term == 0.5


def test_failed_prediction_scores_as_empty_and_is_flagged():
    rec = RVTBenchProtocol().score(seg_sample(), Prediction.failure("s", "parse", "no <answer>"))
    assert rec.failed and rec.error_kind == "parse" and rec.of(VideoJFValues).J == 0.5


def test_wrong_frame_count_and_invalid_box_are_adapter_errors():
    with pytest.raises(AdapterError, match="1 masks.*2 frames"):
        RVTBenchProtocol().score(seg_sample(), Prediction("s", masks=[None]))
    g = sample("g", "grounding", boxes=[[[0, 0, 10, 10]], []])
    with pytest.raises(AdapterError, match="sample 'g'.*frame 0"):
        RVTBenchProtocol().score(g, Prediction("g", boxes=[[[5, 0, 1, 10]], []]))


def test_aggregate_per_task_with_level_and_category_breakdown():
    p = RVTBenchProtocol()
    exact = [masks.encode(square(0, 4, 0, 4)), None]
    records = [
        p.score(seg_sample("s1", level=1, category="spatial"), Prediction("s1", masks=exact)),        # J = 1
        p.score(seg_sample("s2", level=2, category="spatial"), Prediction("s2")),                     # J = 0.5
        p.score(sample("g1", "grounding", level=2, boxes=[[[0, 0, 10, 10]], []]),
                Prediction("g1", boxes=[[[0, 0, 10, 10]], [[0, 0, 1, 1]]])),                          # 1 and 0
    ]
    out = p.aggregate(list(reversed(records)))
    assert out["n"] == 3
    assert out["metrics"]["segmentation/J"] == 0.75
    assert out["metrics"]["grounding/gIoU"] == 0.5 and out["metrics"]["grounding/cIoU"] == 100 / 101
    assert out["metrics"]["grounding/Acc@0.5"] == 0.0  # 0.5 is not > 0.5
    assert out["breakdown"]["segmentation/level"]["1"]["J"] == 1.0
    assert out["breakdown"]["segmentation/level"]["2"] == {"J&F": out["breakdown"]["segmentation/level"]["2"]["J&F"],
                                                           "J": 0.5, "F": records[1].of(VideoJFValues).F, "n": 1}
    assert out["breakdown"]["segmentation/category"]["spatial"]["n"] == 2
    assert "vqa/BLEU-4" not in out["metrics"]  # no vqa sample, no vqa metric


@needs_java
def test_text_tasks_are_scored_at_corpus_level_per_task():
    from rvt_bench.metrics.text import caption_scores

    p = RVTBenchProtocol()
    pairs = [("v1", "three birds", ["three birds land"]), ("v2", "a red car", ["a red car parks"]),
             ("v3", "", ["the dog sleeps"])]
    records = [p.score(sample(sid, "vqa", answers=refs), Prediction(sid, text=hyp or None)) for sid, hyp, refs in pairs]
    records.append(p.score(sample("m1", "summarization", answers=["birds land on a wire"]),
                           Prediction("m1", text="birds land on a wire")))
    out = p.aggregate(records)
    expected = caption_scores([(sid, hyp) for sid, hyp, _ in pairs], {sid: refs for sid, _, refs in pairs},
                              metrics=("BLEU", "CIDEr"))["corpus"]
    assert out["metrics"]["vqa/BLEU-4"] == expected["BLEU-4"] and out["metrics"]["vqa/CIDEr"] == expected["CIDEr"]
    assert out["metrics"]["summarization/BLEU-1"] == pytest.approx(1.0)
    # CIDEr over 3 and 1 samples is not a score to read: said once per task in metrics.json "warnings"
    cider = [w for w in out["warnings"] if "CIDEr over" in w]
    assert len(cider) == 2 and any(w.startswith("vqa") and "3 sample(s)" in w for w in cider)
    assert any(w.startswith("summarization") and "1 sample(s)" in w for w in cider)


@needs_java
def test_breakdown_groups_score_as_their_own_corpus_with_one_tokenizer_pass(monkeypatch):
    import rvt_bench.metrics.text as text
    from rvt_bench.metrics.text import caption_scores

    p = RVTBenchProtocol()
    pairs = [("v1", "three birds", ["three birds land"], 1), ("v2", "a red car", ["a red car parks"], 2),
             ("v3", "a red truck", ["a red truck waits"], 2), ("v4", "the dog", ["the dog sleeps"], 1)]
    records = [p.score(sample(sid, "vqa", level=lvl, answers=refs), Prediction(sid, text=hyp)) for sid, hyp, refs, lvl in pairs]
    passes = []
    real = text.tokenize_captions
    monkeypatch.setattr(text, "tokenize_captions", lambda *a: (passes.append(1), real(*a))[1])
    out = p.aggregate(records)
    assert len(passes) == 1  # one Java tokenizer run for the task, its groups included
    monkeypatch.undo()
    for level in (1, 2):
        group = [(sid, hyp, refs) for sid, hyp, refs, lvl in pairs if lvl == level]
        alone = caption_scores([(sid, hyp) for sid, hyp, _ in group], {sid: refs for sid, _, refs in group},
                               metrics=("BLEU", "CIDEr"))["corpus"]
        got = out["breakdown"]["vqa/level"][str(level)]  # group keys are strings
        assert got["BLEU-4"] == alone["BLEU-4"] and got["CIDEr"] == alone["CIDEr"] and got["n"] == 2


def test_jitbench_run_end_to_end_from_a_predictions_file(tmp_path):
    """+dataset=jitbench +model=precomputed on canonical records and a predictions.jsonl."""
    from hydra import compose, initialize_config_dir
    from PIL import Image

    import run_bench  # noqa: F401  (registers the ${repo:} resolver)
    from rvt_bench.harness.runner import run

    repo = Path(__file__).resolve().parent.parent
    frames = tmp_path / "JiT" / "frames" / "bear"
    frames.mkdir(parents=True)
    for k in range(2):
        Image.fromarray(np.zeros((H, W, 3), np.uint8)).save(frames / f"{k:05d}.jpg")
    gt = [masks.encode(square(0, 4, 0, 4)), None]
    recs = [{"id": f"q{i}", "video": "bear", "query": "the bear", "category": c, "level": lv, "masks": gt}
            for i, (c, lv) in enumerate([("semantic", 1), ("temporal", 3)])]
    (tmp_path / "JiT" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    preds = [Prediction("q0", task="segmentation", masks=gt), Prediction("q1", task="segmentation", masks=[None, None])]
    (tmp_path / "preds.jsonl").write_text("".join(json.dumps(p.to_dict()) + "\n" for p in preds))
    with initialize_config_dir(config_dir=str(repo / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["+dataset=jitbench", "+model=precomputed", f"dataset.root={tmp_path / 'JiT'}",
                                           f"model.root={tmp_path / 'preds.jsonl'}", f"run.root={tmp_path / 'runs'}",
                                           f"leaderboard.dir={tmp_path / 'boards'}"])
    metrics = run(cfg).metrics
    assert metrics["failures"] == 0
    assert metrics["metrics"]["segmentation/J"] == 0.75  # q0: 1.0; q1: frame 0 J = 0, frame 1 J = 1
    assert metrics["breakdown"]["segmentation/category"]["semantic"]["J&F"] == 1.0


def test_score_many_gives_the_serial_records_in_order_and_replaces_unscorable_predictions():
    p = RVTBenchProtocol()
    exact = [masks.encode(square(0, 4, 0, 4)), None]
    pairs = [(seg_sample(f"s{i}"), Prediction(f"s{i}", masks=exact if i % 2 else None)) for i in range(6)]
    pairs.append((seg_sample("bad"), Prediction("bad", masks=[None])))  # wrong frame count
    serial = p.score_many(pairs, workers=1)
    parallel = p.score_many(pairs, workers=2, chunksize=2)
    assert [r for r, _ in parallel] == [r for r, _ in serial]
    assert [r.sample_id for r, _ in serial] == [s.id for s, _ in pairs]
    record, pred = serial[-1]
    assert pred.error["kind"] == "adapter" and "unscorable prediction" in pred.error["message"]
    assert record.failed and record.of(VideoJFValues).J == 0.5


def test_grounding_headline_is_m_viou_and_silence_scores_the_empty_baseline():
    """A model that never answers: 10 frames, object in 2. m_vIoU 0 = the baseline; gIoU 0.8 =
    its baseline too, so silence never scores above the baseline printed beside it."""
    protocol = RVTBenchProtocol()
    assert "grounding/m_vIoU" in protocol.headline
    g = sample("g", "grounding", n=10, boxes=[[[0, 0, 10, 10]] if t < 2 else [] for t in range(10)])
    out = protocol.aggregate([protocol.score(g, Prediction.failure("g", "parse", "no answer"))])
    assert out["metrics"]["grounding/m_vIoU"] == 0.0 == out["baseline_empty"]["grounding/m_vIoU"]
    assert out["metrics"]["grounding/gIoU"] == 0.8 == out["baseline_empty"]["grounding/gIoU"]
    assert any(w.startswith("grounding: m_vIoU =") and "baseline" in w for w in out["warnings"])  # "<part>: <key>"


def test_segmentation_baseline_and_all_empty_gt_warning():
    protocol = RVTBenchProtocol()
    empty_gt = sample("e", "segmentation", masks=[None, None])
    records = [protocol.score(seg_sample("s"), Prediction("s", masks=[masks.encode(square(0, 4, 0, 4)), None])),
               protocol.score(empty_gt, Prediction("e", masks=[None, None]))]
    out = protocol.aggregate(records)
    # empty prediction: s scores J = F = 0.5 (its second frame is empty on both sides), e scores 1
    assert out["baseline_empty"]["segmentation/J"] == 0.75 and out["baseline_empty"]["segmentation/F"] == 0.75
    assert out["metrics"]["segmentation/J"] == 1.0
    assert any("1 of 2 scored segmentation samples have an empty GT" in w for w in out["warnings"])


class _FakeJudge:
    """Scores 1 when the answer mentions a car, None (unscored) for "???"; records its requests."""

    model = "fake-judge"

    def __init__(self):
        from types import SimpleNamespace

        self.template = SimpleNamespace(tag="fake@1")
        self.asked = []

    def score_many(self, items):
        from rvt_bench.core.records import JudgeVerdict

        self.asked += [it.sample_id for it in items]
        return [JudgeVerdict(None if it.prediction == "???" else float("car" in it.prediction), "r",
                        template=self.template.tag, model=self.model) for it in items]


@needs_java
def test_the_yaml_composition_of_units_scores_as_the_preset_judge_included():
    """conf/dataset/rvtbench.yaml builds RVTBench from units alone; it gives RVTBenchProtocol's records
    and metrics, with the judge reaching the text parts through the composite."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    repo = Path(__file__).resolve().parent.parent
    from_yaml = instantiate(OmegaConf.load(repo / "conf" / "dataset" / "rvtbench.yaml").protocol)
    preset = RVTBenchProtocol()
    assert from_yaml.headline == preset.headline and from_yaml.name == preset.name == "rvtbench"
    exact = [masks.encode(square(0, 4, 0, 4)), None]
    pairs = [(seg_sample("s1"), Prediction("s1", masks=exact)), (seg_sample("s2"), Prediction("s2")),
             (sample("g1", "grounding", boxes=[[[0, 0, 10, 10]], []]), Prediction("g1", boxes=[[[0, 0, 10, 5]], []])),
             (sample("v1", "vqa", answers=["a red car parks"]), Prediction("v1", text="a red car")),
             (sample("v2", "vqa", answers=["the dog sleeps"]), Prediction("v2", text="???")),
             (sample("v3", "vqa", answers=["three birds"]), Prediction.failure("v3", "parse", "no answer")),
             (sample("m1", "summarization", answers=["birds land"]), Prediction("m1", text="birds land"))]
    bodies = []
    for protocol in (from_yaml, preset):
        judge = _FakeJudge()
        protocol.attach_judge(judge)
        records = [r for r, _ in protocol.score_many(pairs, progress=False)]
        assert sorted(judge.asked) == ["m1", "v1", "v2"]  # the failed answer is wrong without a request
        bodies.append((records, protocol.aggregate(records)))
    (rec_a, out_a), (rec_b, out_b) = bodies
    assert rec_a == rec_b and out_a["metrics"] == out_b["metrics"] and out_a["breakdown"] == out_b["breakdown"]
    assert out_a["metrics"]["vqa/judge"] == 0.5 and out_a["metrics"]["vqa/judge_n_failed"] == 1  # (1 + 0) / 2 scored


def test_records_written_before_the_part_key_aggregate_the_same():
    """scores.jsonl of older runs has no "part": the composite reads the task from the record."""
    p = RVTBenchProtocol()
    exact = [masks.encode(square(0, 4, 0, 4)), None]
    records = [p.score(seg_sample("s1"), Prediction("s1", masks=exact)), p.score(seg_sample("s2"), Prediction("s2")),
               p.score(sample("g1", "grounding", boxes=[[[0, 0, 10, 10]], []]), Prediction("g1"))]
    old = [replace(r, parts={}) for r in records]
    assert all("part" in r.parts for r in records)
    assert p.aggregate(old)["metrics"] == p.aggregate(records)["metrics"]
    assert p.estimator("segmentation/J", old).value() == p.estimator("segmentation/J", records).value() == 0.75
