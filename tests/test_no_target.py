""""No target" as an answer (rvt_bench.core.types.Prediction.no_target): distinct from an empty mask
and from a failure, carried by predictions.jsonl (and so by the precomputed jsonl layout), scored
by each protocol's rule (metrics/protocols/base.py Protocol.no_target), said by the VLM adapter,
shown in report.html. That today's benchmarks score it as an empty prediction is
tests/test_protocol_contract.py::test_a_no_target_answer_scores_as_the_empty_prediction."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rvt_bench.adapters.base import ScoredSample
from rvt_bench.adapters.precomputed import PrecomputedAdapter
from rvt_bench.adapters.vlm import funnel
from rvt_bench.adapters.vlm.adapter import VLMAdapter
from rvt_bench.core import masks as mask_io
from rvt_bench.core.types import AdapterError, Prediction, RunStoreError
from rvt_bench.harness.config import group_node
from rvt_bench.loaders.demo import DemoDataset
from rvt_bench.metrics.protocols.reasonseg import ReasonSegProtocol
from tests.test_vlm_adapter import Canned

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo():
    return {s.id: s for s in DemoDataset(REPO / "demo", split="demo")}


def test_a_record_without_it_is_written_and_read_as_before():
    pred = Prediction("s1", task="segmentation", masks=[None])
    assert "no_target" not in pred.to_json() and "no_target_score" not in pred.to_json()
    assert Prediction.from_json(json.loads(json.dumps(pred.to_json()))) == pred


def test_a_no_target_answer_round_trips_with_its_score():
    pred = Prediction.none_found("s1", 0.83, task="segmentation")
    line = json.loads(json.dumps(pred.to_json()))
    assert (line["no_target"], line["no_target_score"]) == (True, 0.83)
    back = Prediction.from_json(line)
    assert back == pred and back.no_target and back.masks is None and back.error is None


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_no_target_field_that_is_not_a_boolean_is_a_store_error(value):
    with pytest.raises(RunStoreError, match="'no_target' must be true or false"):
        Prediction.from_json({"sample_id": "s1", "no_target": value})


@pytest.mark.parametrize("pred, reason", [
    (Prediction("s", no_target=True, masks=[mask_io.encode(__import__("numpy").ones((2, 2), bool))]), "also holds masks"),
    (Prediction("s", no_target=True, boxes=[[[0, 0, 1, 1]]]), "also holds masks or boxes"),
    (Prediction("s", no_target=True, no_target_score=float("nan")), "finite number"),
    (Prediction("s", no_target=True, no_target_score=10**400), "finite number"),  # beyond float: no OverflowError
    (Prediction("s", no_target_score=0.5), "without the no-target answer"),
])
def test_a_contradictory_no_target_answer_fails_its_sample_with_the_reason(demo, pred, reason):
    sample = demo["image/coffee_cup"]
    pred.sample_id = sample.id
    with pytest.raises(AdapterError, match=reason):
        pred.check_no_target()
    record, kept = ReasonSegProtocol().score_or_fail(sample, pred)
    assert kept.error is not None and reason in kept.error["message"] and record.failed


def test_it_is_neither_an_empty_mask_nor_a_failure_for_the_protocol_that_scores_it_itself(demo):
    class SeesIt(ReasonSegProtocol):
        no_target = "own"

        def score(self, sample, pred):
            self.seen = pred
            return super().score(sample, Prediction(pred.sample_id))

    sample, protocol = demo["image/coffee_cup"], SeesIt()
    protocol.score_or_fail(sample, Prediction.none_found(sample.id, 0.7))
    assert protocol.seen.no_target and protocol.seen.no_target_score == 0.7


def test_the_precomputed_jsonl_layout_carries_it(tmp_path, demo):
    sample = demo["image/coffee_cup"]
    (tmp_path / "predictions.jsonl").write_text(json.dumps(Prediction.none_found(sample.id, 0.6).to_json()) + "\n")
    pred = PrecomputedAdapter(root=str(tmp_path), layout="jsonl").predict(sample)
    assert pred.no_target and pred.no_target_score == 0.6 and pred.masks is None


def _vlm(reply: str) -> VLMAdapter:
    node = OmegaConf.to_container(group_node("model", "vlm"), resolve=True)
    kw = {k: v for k, v in node.items() if k not in ("_target_", "name", "sam2", "backend")}
    return VLMAdapter(backend=Canned(reply), **dict(kw, model="tiny-vlm"))


@pytest.mark.parametrize("reply", ["[]", "```json\n[]\n```", "None.", "no target", "<think>no cup</think>[]"])
@pytest.mark.parametrize("sid", ["image/coffee_cup", "rvt/grounding/launch_pad"])
def test_a_vlm_that_answers_nothing_matches_says_no_target(demo, reply, sid):
    sample = demo[sid]
    model = _vlm(reply)
    model.think = dict(model.think, enabled=True) if "<think>" in reply else model.think
    pred = model.predict(sample)
    assert pred.no_target and pred.error is None and pred.masks is None and pred.boxes is None
    record, _ = ReasonSegProtocol().score_or_fail(demo["image/coffee_cup"], Prediction.none_found("image/coffee_cup"))
    assert not record.failed


def test_a_vlm_box_is_no_no_target_and_an_unreadable_reply_is_a_parse_failure(demo):
    sample = demo["rvt/grounding/launch_pad"]
    assert not _vlm('[{"bbox_2d": [10, 10, 50, 50]}]').predict(sample).no_target
    with pytest.raises(AdapterError, match="no box in the reply"):
        _vlm("the rocket, probably").predict(sample)


def test_the_vlm_report_counts_no_target_answers(demo):
    sample = demo["image/coffee_cup"]
    said, boxed = Prediction.none_found(sample.id), Prediction(sample.id, masks=[None])
    rec, _ = ReasonSegProtocol().score_or_fail(sample, said)
    measures = {m.key: m.value for m in funnel.measures([ScoredSample(sample, said, rec), ScoredSample(sample, boxed, rec)])}
    assert measures["no_target"] == 0.5
    assert "no_target" not in {m.key for m in funnel.measures([ScoredSample(sample, boxed, rec)])}
