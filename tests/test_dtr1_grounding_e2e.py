"""A grounding sample of the demo end to end: scripted DT-R1 rollout -> oracle twin -> answer parser
-> RVTBench protocol. Boxes taken from the twin's instance bboxes and normalized by the frame size
come back as the GT boxes (IoU 1.0 on every frame, including frames where the object is gone)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvt_bench.adapters.dtr1.adapter import DTR1Adapter
from rvt_bench.adapters.policy.scripted import ScriptedPolicy
from rvt_bench.adapters.twin.builder import build_twin
from rvt_bench.adapters.twin.oracle import OraclePerception
from rvt_bench.loaders.demo import DemoDataset
from rvt_bench.metrics.protocols.rvtbench import RVTBenchProtocol
from rvt_bench.metrics.units.box_iou import BoxValues

REPO = Path(__file__).resolve().parents[1]
PLAN = '<think>find the object that leaves</think>\n<dt_plan>{"SAM2": [], "OWLv2": ["SAM2"]}</dt_plan>'


@pytest.fixture(scope="module")
def demo() -> DemoDataset:
    return DemoDataset(REPO / "demo")


def _answer_from_twin(sample, label: str) -> str:
    """The <answer> a perfect policy writes: the labelled instance's twin bboxes, normalized xyxy."""
    twin = build_twin(sample, ["SAM2", "OWLv2"], OraclePerception())
    height, width = twin.size
    inst = next(i for i in twin.instances if i.label == label)
    boxes = {str(t): [[f.bbox[0] / width, f.bbox[1] / height, f.bbox[2] / width, f.bbox[3] / height]]
             for t, f in sorted(inst.frames.items())}
    return f'<think>instance {inst.id}</think>\n<task>grounding</task> <answer>{json.dumps({"boxes": boxes})}</answer>'


@pytest.mark.parametrize("sample_id,label", [("rvt/grounding/launch_pad", "rocket"),
                                              ("rvt/grounding/lawn_depth", "helmet")])
def test_perfect_grounding_rollout_scores_iou_one(demo, sample_id, label):
    sample = next(s for s in demo if s.id == sample_id)
    adapter = DTR1Adapter(policy=ScriptedPolicy([PLAN, _answer_from_twin(sample, label)]),
                          perception=OraclePerception(), sandbox={"timeout_s": 20.0})
    pred = adapter.predict(sample)
    assert pred.error is None and pred.task == "grounding"
    assert len(pred.boxes) == sample.num_frames
    record = RVTBenchProtocol().score(sample, pred)
    assert record.of(BoxValues).frame_ious == pytest.approx([1.0] * sample.num_frames, abs=1e-12)
    metrics = RVTBenchProtocol().aggregate([record])["metrics"]
    assert metrics["grounding/gIoU"] == pytest.approx(1.0, abs=1e-12)
    assert metrics["grounding/cIoU"] == pytest.approx(1.0, abs=1e-12)
    assert metrics["grounding/Acc@0.5"] == 1.0


def test_boxes_of_the_other_object_score_below_one(demo):
    sample = next(s for s in demo if s.id == "rvt/grounding/launch_pad")
    adapter = DTR1Adapter(policy=ScriptedPolicy([PLAN, _answer_from_twin(sample, "flag")]),
                          perception=OraclePerception(), sandbox={"timeout_s": 20.0})
    record = RVTBenchProtocol().score(sample, adapter.predict(sample))
    # the flag never overlaps the rocket: 0 where the rocket is visible, 0 where only the flag is
    assert max(record.of(BoxValues).frame_ious) == 0.0
