"""The typed records between stages (rvt_bench.core.records, rvt_bench.core.types): JSON round trips with the on-disk
keys and key order, reading records written before schema versions, refusing newer ones, and the
one list of failure kinds."""
import json
from pathlib import Path

import pytest

import rvt_bench.metrics  # noqa: F401  (the built-in kinds of score values)
from rvt_bench.core.records import (METRICS_SCHEMA_VERSION, SCORE_SCHEMA_VERSION, Failure, JudgeVerdict, RunMetrics,
                                    ScoreRecord)
from rvt_bench.metrics.protocols.revos import ReVOSValues
from rvt_bench.metrics.units.captions import TextValues
from rvt_bench.metrics.units.lisa_iou import MaskIoUValues
from rvt_bench.core.types import (FAILURE_KINDS, AdapterError, DatasetFormatError, ParseError, Prediction, RunStoreError,
                                  SandboxError)
from rvt_bench.harness.predict import predict_one
from rvt_bench.harness.runner import run
from tests.fakes import FakeAdapter, make_cfg

VERDICT = {"score": None, "reason": "unparsable", "cached": False, "error": "parse: no JSON", "template": "vqa@1",
           "model": "judge-7b", "raw": "maybe"}
# a record as rvt_bench.metrics.protocols.rvtbench writes it: header, values, then the judge and the funnel
RECORD = {"sample_id": "rvt/vqa/a", "modality": "video", "task": "vqa", "failed": False, "error_kind": None,
          "meta": {"level": 2}, "values": {"text": {"hypothesis": "h", "references": ["r"], "question": "q"}},
          "part_1": "vqa", "part": "rvt", "judge": VERDICT, "funnel": {"first_failed": None, "result_correct": None}}
# scores.jsonl lines of schema_version 1 as rvt-bench 6b073fa wrote them: the synthetic samples of
# tests/test_protocol_contract.py scored by each conf/dataset protocol (one line per part, failed or
# not, and a ReVOS expression without a foreground), read and written by that version
V1_LINES = (Path(__file__).parent / "data" / "scores_v1_6b073fa.jsonl").read_text().splitlines()


def test_a_score_record_round_trips_typed_with_its_keys_in_order():
    record = ScoreRecord.from_json({**RECORD, "schema_version": 2})
    assert record.judge == JudgeVerdict(None, "unparsable", False, "parse: no JSON", "vqa@1", "judge-7b", "maybe")
    assert record.of(TextValues) == TextValues("h", ["r"], "q") and record.parts == {"part_1": "vqa", "part": "rvt"}
    written = record.to_json()
    assert list(written) == [*RECORD, "schema_version"] and written["schema_version"] == SCORE_SCHEMA_VERSION == 2
    assert ScoreRecord.from_json(json.loads(json.dumps(written))) == record


def test_a_score_record_of_a_newer_schema_is_refused():
    with pytest.raises(RunStoreError, match="schema_version 3"):
        ScoreRecord.from_json({**RECORD, "schema_version": 3})


def _flat(v2: dict) -> dict:
    """A version 2 record with its values put back beside the header, as version 1 wrote them."""
    flat = {k: v for k, v in v2.items() if k != "values"}
    for values in v2["values"].values():
        flat.update(values)
    return {**flat, "schema_version": 1}


@pytest.mark.parametrize("line", V1_LINES, ids=[json.loads(line)["sample_id"] for line in V1_LINES])
def test_a_version_1_record_reads_typed_and_converts_by_moving_its_values_only(line):
    old = json.loads(line)
    record = ScoreRecord.from_json(old)
    assert record.schema_version == 2 and len(record.values) == 1
    new = record.to_json()
    assert _flat(new) == old  # nothing but the layout changed
    assert ScoreRecord.from_json(json.loads(json.dumps(new))) == record


def test_version_1_records_of_each_kind_read_as_their_own_values():
    kinds = {json.loads(line)["sample_id"]: list(ScoreRecord.from_json(json.loads(line)).values) for line in V1_LINES}
    assert kinds["reasonseg/img00"] == kinds["llmseg40k/img00"] == ["mask_iou"]
    assert kinds["revos/vid00"] == kinds["revos/no_foreground"] == ["revos"]  # not video_jf: its keys are revos's too
    assert {tuple(v) for k, v in kinds.items() if k.startswith(("rvtbench/", "jitbench/"))} == {
        ("video_jf",), ("box_iou",), ("text",)}
    no_r = ScoreRecord.from_json(json.loads(next(x for x in V1_LINES if "no_foreground" in x)))
    assert no_r.of(ReVOSValues).R is None and "R" not in no_r.to_json()["values"]["revos"]


def test_a_version_1_record_with_keys_of_no_known_values_is_refused_naming_them():
    with pytest.raises(RunStoreError, match=r"keys \['mystery'\] belong to no known unit values"):
        ScoreRecord.from_json({"sample_id": "s", "I": 1, "U": 2, "target": 2, "giou_term": 0.5, "iou": 0.5, "mystery": 1})


def test_values_of_an_unknown_kind_are_refused_naming_the_kind():
    with pytest.raises(RunStoreError, match="kind 'nowhere'"):
        ScoreRecord.from_json({**RECORD, "values": {"nowhere": {}}, "schema_version": 2})
    with pytest.raises(RunStoreError, match=r"mask_iou values lack \['iou'\]"):
        ScoreRecord.from_json({**RECORD, "values": {"mask_iou": {"I": 1, "U": 2, "target": 2, "giou_term": 0.5}},
                               "schema_version": 2})
    # nothing read is dropped silently on its way to the next write
    with pytest.raises(RunStoreError, match=r"keys \['extra'\] that TextValues does not declare"):
        ScoreRecord.from_json({**RECORD, "values": {"text": {"hypothesis": "h", "references": [], "extra": 1}},
                               "schema_version": 2})
    with pytest.raises(RunStoreError, match=r"keys \['J'\] beside its values"):
        ScoreRecord.from_json({**RECORD, "J": 0.5, "schema_version": 2})


def test_correct_is_the_judges_verdict_else_the_values_rule():
    image = ScoreRecord("s", values={"mask_iou": MaskIoUValues(6, 10, 10, 0.6, 0.6)})
    assert image.correct() is True and image.sample_score() == 0.6
    assert ScoreRecord("s", values={"mask_iou": MaskIoUValues(5, 10, 10, 0.5, 0.5)}).correct() is False  # IoU > 0.5
    text = ScoreRecord("t", values={"text": TextValues("h", ["r"])})
    assert text.correct() is None and text.sample_score() is None  # undecided without a judge
    text.judge = JudgeVerdict(0.5)
    assert text.correct() is True
    text.judge = JudgeVerdict(None, "unparsable")
    assert text.correct() is None


def test_a_judge_verdict_round_trips():
    verdict = JudgeVerdict(0.5, "half right", cached=True, template="vqa@1", model="m")
    assert JudgeVerdict.from_json(json.loads(json.dumps(verdict.to_json()))) == verdict
    assert verdict.scored and not JudgeVerdict(None).scored


def test_a_failure_keeps_extra_keys_after_its_own():
    failure = Failure.from_json({"sample_id": "s1", "kind": "data", "message": "bad frame", "file": "a.png"})
    assert failure.to_json() == {"sample_id": "s1", "kind": "data", "message": "bad frame", "file": "a.png"}
    assert list(failure.to_json()) == ["sample_id", "kind", "message", "file"]
    assert Failure.of("s2", {"kind": "parse", "message": "no tag"}) == Failure("s2", "parse", "no tag")
    with pytest.raises(RunStoreError, match="without kind"):
        Failure.from_json({"sample_id": "s1"})


def _metrics(**kw) -> RunMetrics:
    return RunMetrics(dataset="demo", split="val", model="m", run_name="r", fingerprint="f", protocol="p",
                      aggregate={"metrics": {"IoU": 0.5}, "n": 99, "breakdown": {}}, n=2, failures=1,
                      failures_by_kind={"parse": 1}, parse_rate=0.5, failed_samples=[Failure("s1", "parse", "x")],
                      tasks={"segmentation": 2}, data_errors=1, data_error_samples=[Failure("s9", "data", "y")], **kw)


def test_run_metrics_round_trip_and_a_protocol_count_keeps_its_place_with_the_runner_value():
    metrics = _metrics(decoding="free", funnel={"n": 2}, analytics={"rollouts": 0}, units="fraction",
                       headline=["IoU"], judge={"status": "judge: not configured"})
    body = metrics.to_json()
    assert list(body)[6:9] == ["metrics", "n", "breakdown"] and body["n"] == 2
    assert body["schema_version"] == METRICS_SCHEMA_VERSION and "partial" not in body
    again = RunMetrics.from_json(json.loads(json.dumps(body)))
    assert again.to_json() == body and again.failed_samples == [Failure("s1", "parse", "x")]


def test_metrics_json_without_schema_version_reads_as_version_1():
    body = _metrics().to_json()
    del body["schema_version"]
    old = RunMetrics.from_json(body)
    assert old.schema_version == 1 and old.metrics == {"IoU": 0.5}
    with pytest.raises(RunStoreError, match="schema_version 3"):
        RunMetrics.from_json({**body, "schema_version": 3})


def test_a_prediction_round_trips_and_reads_without_schema_version():
    pred = Prediction.failure("s1", "parse", "no tag", trace="<think>")
    assert Prediction.from_json(json.loads(json.dumps(pred.to_json()))) == pred
    body = pred.to_json()
    del body["schema_version"]
    assert Prediction.from_json(body) == pred and pred.failure_kind == "parse"


def test_every_sample_error_kind_is_a_failure_kind_and_the_config_retries_only_failure_kinds():
    for error in (DatasetFormatError, AdapterError, ParseError, SandboxError):
        assert error.kind in FAILURE_KINDS
    from rvt_bench.harness.config import RunConfig

    assert set(RunConfig().retry_failed) <= set(FAILURE_KINDS)  # the run node's default (conf/config.yaml overrides none)


class _PartialAdapter(FakeAdapter):
    def predict(self, sample):
        exc = ParseError(f"{sample.id}: no <answer> tag")
        exc.trace = "<think>so far</think>"
        raise exc


def test_a_failure_keeps_the_partial_output_its_error_carries(tmp_path):
    from tests.fakes import FakeDataset

    sample = next(iter(FakeDataset(n=1)))
    pred = predict_one(_PartialAdapter(), sample, fail_fast=False)
    assert pred.error == {"kind": "parse", "message": f"{sample.id}: no <answer> tag"}
    assert pred.trace == "<think>so far</think>"


def test_scores_jsonl_rows_are_versioned_score_records_and_metrics_has_no_hidden_keys(tmp_path):
    result = run(make_cfg(tmp_path, fail=["s01"]))
    rows = [json.loads(line) for line in (result.run_dir / "scores.jsonl").read_text().splitlines()]
    assert [ScoreRecord.from_json(r).to_json() for r in rows] == rows
    assert all(r["schema_version"] == 2 and list(r["values"]) == ["fake_iou"] for r in rows)
    body = json.loads((result.run_dir / "metrics.json").read_text())
    assert not [k for k in body if k.startswith("_")]
    assert RunMetrics.from_json(body).to_json() == body
