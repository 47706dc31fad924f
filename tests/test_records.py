"""The typed records between stages (rvt_bench.core.records, rvt_bench.core.types): JSON round trips with the on-disk
keys and key order, reading records written before schema versions, refusing newer ones, and the
one list of failure kinds."""
import json

import pytest

from rvt_bench.core.records import METRICS_SCHEMA_VERSION, Failure, JudgeVerdict, RunMetrics, ScoreRecord
from rvt_bench.core.types import (FAILURE_KINDS, AdapterError, DatasetFormatError, ParseError, Prediction, RunStoreError,
                                  SandboxError)
from rvt_bench.harness.predict import predict_one
from rvt_bench.harness.runner import run
from tests.fakes import FakeAdapter, make_cfg

VERDICT = {"score": None, "reason": "unparsable", "cached": False, "error": "parse: no JSON", "template": "vqa@1",
           "model": "judge-7b", "raw": "maybe"}
# a record as rvt_bench.metrics.protocols.rvtbench writes it: header, values, then the judge and the funnel
RECORD = {"sample_id": "rvt/vqa/a", "modality": "video", "task": "vqa", "failed": False, "error_kind": None,
          "meta": {"level": 2}, "question": "q", "hypothesis": "h", "references": ["r"], "part": "rvt",
          "judge": VERDICT, "funnel": {"first_failed": None, "result_correct": None}}


def test_a_score_record_round_trips_with_its_keys_in_order_and_a_version_added():
    record = ScoreRecord.from_json(RECORD)
    assert record.judge == JudgeVerdict(None, "unparsable", False, "parse: no JSON", "vqa@1", "judge-7b", "maybe")
    written = record.to_json()
    assert list(written) == [*RECORD, "schema_version"] and written["schema_version"] == 1
    assert ScoreRecord.from_json(json.loads(json.dumps(written))) == record


def test_a_score_record_of_a_newer_schema_is_refused():
    with pytest.raises(RunStoreError, match="schema_version 2"):
        ScoreRecord.from_json({**RECORD, "schema_version": 2})


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
    assert all(r["schema_version"] == 1 for r in rows)
    body = json.loads((result.run_dir / "metrics.json").read_text())
    assert not [k for k in body if k.startswith("_")]
    assert RunMetrics.from_json(body).to_json() == body
