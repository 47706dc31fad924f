"""Every model reported in its own terms: each adapter's funnel on predictions with known failures,
through the real runner, adapter and protocol on (a small copy of) the demo. metrics.json's
adapter_report, each sample's scores.jsonl stage, the summary and report.html show the model's own
stages with counts that match its predictions; a model without stages gets no funnel printed.
DT-R1's seeded runs are tests/test_attribute.py."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from rvt_bench.adapters.base import ScoredSample
from rvt_bench.adapters.jit.adapter import JiTAdapter
from rvt_bench.adapters.lisa.adapter import LisaAdapter
from rvt_bench.adapters.twin.oracle import OraclePerception
from rvt_bench.adapters.vlm.adapter import VLMAdapter
from rvt_bench.adapters.vlm.reply import Reply
from rvt_bench.core import masks
from rvt_bench.core.frames import frame_size
from rvt_bench.core.paths import CONF_DIR
from rvt_bench.metrics.units.lisa_iou import MaskIoUValues
from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import AdapterError, Prediction
from rvt_bench.harness.config import group_node
from rvt_bench.harness.runner import run
from rvt_bench.harness.summary import format_summary
from rvt_bench.loaders.demo import DemoDataset
from tests.fakes import make_cfg
from tests.small_demo import make_small_demo
from tests.test_vlm_adapter import Canned, FakeSam2

REPO = Path(__file__).resolve().parents[1]


def iou_record(sid, iou):
    """A score record of one image whose mask IoU is `iou` (LISA's unit)."""
    return ScoreRecord(sid, values={"mask_iou": MaskIoUValues(int(100 * iou), 100, 100, iou, iou)})


@pytest.fixture(scope="module")
def small_demo(tmp_path_factory):
    return make_small_demo(tmp_path_factory.mktemp("demo"))


def demo_run(tmp_path, *overrides):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["+dataset=demo", f"run.root={tmp_path / 'runs'}",
                                           f"leaderboard.dir={tmp_path / 'boards'}", *overrides])
    return run(cfg)


def shown(result, stages: list[tuple[str, int]], first_failed: dict[str, str | None]) -> dict:
    """Assert that metrics.json, scores.jsonl, the summary and report.html all show `stages`
    ((label, samples reached) in order) and each sample's first failed stage; the report."""
    report = result.metrics["adapter_report"]
    assert [(s["label"], s["reached"]) for s in report["stages"]] == stages
    assert report["n"] == result.metrics["n"]
    records = [json.loads(line) for line in (result.run_dir / "scores.jsonl").read_text().splitlines()]
    assert {r["sample_id"]: r["funnel"]["first_failed"] for r in records} == first_failed
    summary = format_summary(result)
    funnel = " ".join(line.strip() for line in summary.splitlines() if line.startswith(("  funnel", "          ")))
    assert funnel.startswith("funnel"), summary  # one funnel, the model's own, on a line or two
    for label, reached in stages:
        assert f"{label} {reached}" in funnel, (label, summary)
    html = result.report.read_text()
    chart = html[html.index('id="chart-funnel"'):]
    for label, reached in stages:  # the funnel chart's own text (SVG text elements)
        assert f">{label}<" in chart and f">{reached} (" in chart, (label, reached)
    return report


# --- precomputed ------------------------------------------------------------------------------


def test_precomputed_reports_found_and_decoded_on_the_demo(tmp_path):
    # quick split: the GT as prediction except astronaut_flag (no record), chelsea_eyes (a mask one
    # row too tall) and coffee_cup (an empty mask); vqa / summary text is undecided without a judge
    lines = []
    for s in DemoDataset(REPO / "demo", split="quick"):
        if s.id == "image/astronaut_flag":
            continue
        h, w = frame_size(s.frames[0])
        m = {"image/chelsea_eyes": [masks.empty(h + 1, w)], "image/coffee_cup": [masks.empty(h, w)]}.get(s.id, s.target.masks)
        lines.append(json.dumps(Prediction(s.id, task=s.task, masks=m if s.task == "segmentation" else None,
                                           boxes=s.target.boxes, text=(s.target.answers or [None])[0]).to_json()))
    (tmp_path / "preds.jsonl").write_text("\n".join(lines) + "\n")
    result = demo_run(tmp_path, "+model=precomputed", f"model.root={tmp_path / 'preds.jsonl'}")
    expected = {s.id: None for s in DemoDataset(REPO / "demo", split="quick")}
    expected.update({"image/astronaut_flag": "prediction_found", "image/chelsea_eyes": "decoded",
                     "image/coffee_cup": "result_correct"})
    report = shown(result, [("prediction found", 9), ("decoded at the right size", 8), ("result correct", 5)], expected)
    assert "decoding" not in report and "decoding:" not in format_summary(result)
    assert {m["key"]: m["value"] for m in report["measures"]}["result_undecided"] == 2
    board = (tmp_path / "boards" / "demo.csv").read_text().splitlines()
    assert "adapter/reading_s" in board[0] and ",decoding," in board[0]


# --- JiT ------------------------------------------------------------------------------------------

PLAN = '{"query_type": "semantic", "specialists": [{"name": "OWLv2", "rationale": "labels"}]}'
DINO = '{"query_type": "semantic", "specialists": [{"name": "DINOv2", "rationale": "look-alikes"}]}'
# per sample in dataset order: coffee_cup answered right (instance 1 is the cup), coin_entry's plan is
# not JSON, launch_pad's needs DINOv2 (oracle perception has none), grounding names an id the graph
# does not have, vqa and summary answer in text
JIT_TURNS = [PLAN, '{"ids": [1]}', "I would use SAM2 here.", DINO, PLAN, '{"ids": [99]}', PLAN, "Two coins.",
             PLAN, "A second coin slides in."]


def test_jit_reports_plan_specialists_graph_and_answer(small_demo, tmp_path):
    (tmp_path / "turns.json").write_text(json.dumps(JIT_TURNS))
    result = demo_run(tmp_path, "+model=jit", f"dataset.root={small_demo}", "policy=scripted",
                      f"policy.turns_file={tmp_path / 'turns.json'}", "policy.per_rollout=false")
    report = shown(result, [("plan is JSON", 5), ("specialists ran", 4), ("scene graph built", 4), ("answer parsed", 3),
                            ("result correct", 1)],
                   {"image/coffee_cup": None, "video/UVO/all/coin_entry/0": "plan_json",
                    "video/launch_pad/0": "specialists_ran", "rvt/grounding/launch_pad": "answer_parsed",
                    "rvt/vqa/coin_entry": None, "rvt/summary/coin_entry": None})
    assert "decoding" not in report  # a scripted policy decodes under no grammar, nor does JiT
    assert report["details"] == {"mode": {"semantic": 2, "text": 2}}
    seconds = {m["key"] for m in report["measures"] if m["unit"] == "s"}
    assert {"planning_s", "perception_s", "reasoning_s", "total_s"} <= seconds and "programs_s" not in seconds


def test_jit_says_it_does_not_decode_under_the_grammar():
    conf = OmegaConf.to_container(group_node("model", "jit"), resolve=False)

    class GrammarPolicy:
        decoding = "grammar"

    kw = {k: v for k, v in conf.items() if k not in ("_target_", "name", "policy", "perception")}
    report = JiTAdapter(policy=GrammarPolicy(), perception=OraclePerception(), **kw).report([])
    assert report.decoding is None
    assert {m.key: m.value for m in report.measures}["policy_decoding"] == "not applied (JiT decodes free)"


def test_jit_counts_a_graph_that_was_not_built(small_demo):
    sample = next(iter(DemoDataset(small_demo)))
    pred = Prediction.failure(sample.id, "exception", "graph", trace={"plan": {}, "timings": {"twin": 0.1}})
    conf = OmegaConf.to_container(group_node("model", "jit"), resolve=False)
    kw = {k: v for k, v in conf.items() if k not in ("_target_", "name", "policy", "perception")}
    adapter = JiTAdapter(policy=object(), perception=OraclePerception(), **kw)
    assert adapter.sample_stage(ScoredSample(sample, pred, iou_record(sample.id, 0.0))).first_failed == "graph_built"


# --- VLM ------------------------------------------------------------------------------------------


class VideoSam2Fails(FakeSam2):
    def segment(self, frames, key_frame, boxes=None, labels=None, scores=None):
        raise AdapterError("SAM2 video predictor: out of memory")


class CannedOrFailed(Canned):
    """Canned replies, where an AdapterError stands for a request the server failed."""

    def __init__(self, *replies):
        super().__init__()
        self.replies = [r if isinstance(r, (Reply, AdapterError)) else Reply(r, "stop", len(r.split())) for r in replies]


# per sample in dataset order: the server fails coffee_cup, coin_entry's reply has no boxes,
# launch_pad's boxes reach a SAM2 that fails, grounding's box misses, vqa answers, the summary is cut
# inside its thought
VLM_REPLIES = [AdapterError("chat server: 503"), "I cannot tell.", '[{"bbox_2d": [10, 10, 50, 50], "frame": 0}]',
               '[{"bbox_2d": [0, 0, 2, 2], "frame": 0}]', "A coin.", Reply("<think>the coin", "length", 3)]


def canned_vlm(**kw):
    """The VLM adapter over VLM_REPLIES and a SAM2 whose video predictor fails (config.yaml names this)."""
    keep = ("name", "coords", "frames", "generation", "think", "grounding_fill", "prompts")
    return VLMAdapter(backend=CannedOrFailed(*VLM_REPLIES), sam2=VideoSam2Fails(), **{k: kw[k] for k in keep})


def test_vlm_reports_reply_answer_and_sam2(small_demo, tmp_path):
    result = demo_run(tmp_path, "+model=vlm", f"dataset.root={small_demo}", "model._target_=tests.test_adapter_reports.canned_vlm")
    report = shown(result, [("reply received", 5), ("answer parsed", 3), ("masks from SAM2", 2), ("result correct", 0)],
                   {"image/coffee_cup": "reply_received", "video/UVO/all/coin_entry/0": "answer_parsed",
                    "video/launch_pad/0": "sam2_masks", "rvt/grounding/launch_pad": "result_correct",
                    "rvt/vqa/coin_entry": None, "rvt/summary/coin_entry": "answer_parsed"})
    measures = {m["key"]: m["value"] for m in report["measures"]}
    assert measures["result_undecided"] == 1 and "generation_s" in measures
    # SAM2 never finished a mask: no prediction recorded SAM2 seconds, and none is printed
    latency = next(line for line in format_summary(result).splitlines() if line.startswith("  latency, summed per request (s):"))
    assert "SAM2_s" not in measures and "SAM2" not in latency and "frames" in latency


# --- Seg-Zero / VisionReasoner ---------------------------------------------------------------------


def canned_segzero(**kw):
    """Seg-Zero's adapter over one reply (the cup's box, in the 840 x 840 input) and the box SAM2."""
    from rvt_bench.adapters.segzero.adapter import SegZeroAdapter
    from tests.fakes import BoxSam2

    keep = ("name", "model", "answer_format", "template", "example", "strip", "resize", "max_new_tokens")
    reply = '<think>the cup</think><answer>{"bbox": [280, 40, 570, 620], "points_1": [420, 300], "points_2": [400, 200]}</answer>'
    # canned replies, no server whose image resize could be checked (rvt_bench.adapters.vlm.calibrate)
    return SegZeroAdapter(backend=CannedOrFailed(reply), sam2=BoxSam2(), input_size_check=False, **{k: kw[k] for k in keep})


def test_seg_zero_reports_reply_answer_and_sam2_and_refuses_every_video(small_demo, tmp_path):
    # only the image reaches the model: every clip (and the clip's grounding, vqa and summary) is refused
    result = demo_run(tmp_path, "+model=seg_zero", f"dataset.root={small_demo}",
                      "model._target_=tests.test_adapter_reports.canned_segzero")
    shown(result, [("reply received", 1), ("answer parsed", 1), ("masks from SAM2", 1), ("result correct", 1)],
          {"image/coffee_cup": None, "video/UVO/all/coin_entry/0": "reply_received",
           "video/launch_pad/0": "reply_received", "rvt/grounding/launch_pad": "reply_received",
           "rvt/vqa/coin_entry": "reply_received", "rvt/summary/coin_entry": "reply_received"})


# --- LISA -----------------------------------------------------------------------------------------


def test_lisa_reports_seg_token_and_mask_on_the_tiny_checkpoint(small_demo, tmp_path):
    from tests.lisa_tiny import REFERENCE_BOOSTS, build_checkpoint

    (small_demo / "splits" / "lisa.txt").write_text("image/coffee_cup\nrvt/grounding/launch_pad\nrvt/vqa/coin_entry\n")
    checkpoint = build_checkpoint(tmp_path / "tiny_lisa", 0, **REFERENCE_BOOSTS)
    result = demo_run(tmp_path, "+model=lisa", f"model.checkpoint={checkpoint}", f"dataset.root={small_demo}",
                      "dataset.split=lisa")
    preds = {r["sample_id"]: r for r in map(json.loads, (result.run_dir / "predictions.jsonl").read_text().splitlines())}
    cup = preds["image/coffee_cup"]
    assert cup["trace"]["frames"][0]["n_seg"] >= 1  # eval mode: "[SEG]." is teacher-forced
    decoded = bool(masks.decode(cup["masks"][0]).any())  # random weights: the mask is whatever they give
    record = next(json.loads(line) for line in (result.run_dir / "scores.jsonl").read_text().splitlines()
                  if json.loads(line)["sample_id"] == "image/coffee_cup")
    correct = decoded and record["values"]["mask_iou"]["iou"] > 0.5
    # grounding and vqa: LISA answers segmentation only, so no [SEG] was emitted for them
    shown(result, [("[SEG] emitted", 1), ("mask decoded", int(decoded)), ("result correct", int(correct))],
          {"image/coffee_cup": None if correct else "result_correct" if decoded else "mask_decoded",
           "rvt/grounding/launch_pad": "seg_emitted", "rvt/vqa/coin_entry": "seg_emitted"})


def test_lisa_counts_a_frame_without_seg_and_an_empty_mask():
    adapter = LisaAdapter(checkpoint="unused")
    sample = next(iter(DemoDataset(REPO / "demo", split="quick")))
    h, w = sample.target.masks[0]["size"]
    full = masks.encode(np.ones((h, w), bool))

    def stage(frames, mask):
        pred = Prediction(sample.id, task="segmentation", masks=[mask], trace={"frames": frames})
        return adapter.sample_stage(ScoredSample(sample, pred, iou_record(sample.id, 0.9))).first_failed

    assert stage([{"n_seg": 0}], masks.empty(h, w)) == "seg_emitted"
    assert stage([{"n_seg": 1}], masks.empty(h, w)) == "mask_decoded"
    assert stage([{"n_seg": 2}], full) is None


# --- Sa2VA ----------------------------------------------------------------------------------------


def test_sa2va_reports_seg_token_and_mask_on_the_tiny_checkpoint(small_demo, tmp_path):
    from tests.sa2va_tiny import REFERENCE_BOOSTS, build_checkpoint

    (small_demo / "splits" / "sa2va.txt").write_text("image/coffee_cup\nvideo/UVO/all/coin_entry/0\nrvt/vqa/coin_entry\n")
    checkpoint = build_checkpoint(tmp_path / "tiny_sa2va", 0, **REFERENCE_BOOSTS)
    result = demo_run(tmp_path, "+model=sa2va", f"model.checkpoint={checkpoint}", "model.max_new_tokens=16",
                      f"dataset.root={small_demo}", "dataset.split=sa2va")
    preds = {r["sample_id"]: r for r in map(json.loads, (result.run_dir / "predictions.jsonl").read_text().splitlines())}
    scores = {r["sample_id"]: r for r in map(json.loads, (result.run_dir / "scores.jsonl").read_text().splitlines())}
    first_failed, seg, decoded, correct = {}, 0, 0, 0
    for sid in ("image/coffee_cup", "video/UVO/all/coin_entry/0"):  # random weights: the answer is whatever they give
        has_seg = preds[sid]["trace"]["n_seg"] >= 1
        has_mask = has_seg and any(masks.decode(m).any() for m in preds[sid]["masks"])
        ok = scores[sid]["funnel"]["first_failed"] is None
        seg, decoded, correct = seg + has_seg, decoded + has_mask, correct + ok
        first_failed[sid] = None if ok else "result_correct" if has_mask else "mask_decoded" if has_seg else "seg_emitted"
        frames = 1 if sid.startswith("image/") else len(list((small_demo / "revos" / "JPEGImages" / "UVO" / "all" / "coin_entry").glob("*.jpg")))
        assert len(preds[sid]["masks"]) == frames and preds[sid]["error"] is None
    assert seg >= 1 and frames > 1  # REFERENCE_BOOSTS: the tiny model emits [SEG] on images
    first_failed["rvt/vqa/coin_entry"] = "seg_emitted"  # Sa2VA answers segmentation only
    assert "segmentation only" in preds["rvt/vqa/coin_entry"]["error"]["message"]
    shown(result, [("[SEG] emitted", seg), ("mask decoded", decoded), ("result correct", correct)], first_failed)


# --- a model without stages ---------------------------------------------------------------------


def test_a_model_that_reports_nothing_gets_no_funnel_and_no_decoding(tmp_path):
    result = run(make_cfg(tmp_path))
    assert "adapter_report" not in result.metrics
    summary = format_summary(result)
    assert "funnel" not in summary and "decoding" not in summary
    records = [json.loads(line) for line in (result.run_dir / "scores.jsonl").read_text().splitlines()]
    assert all("funnel" not in r for r in records)
