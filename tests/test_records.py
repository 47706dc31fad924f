"""The typed records between stages (rvt_bench.core.records, rvt_bench.core.types): JSON round trips with the on-disk
keys and key order, reading records written before schema versions, refusing newer ones, and the
one list of failure kinds."""
import json
from pathlib import Path

import pytest

import rvt_bench.metrics  # noqa: F401  (the built-in kinds of score values)
from rvt_bench.core.records import (METRICS_SCHEMA_VERSION, SCORE_SCHEMA_VERSION, AdapterReport, Failure, JudgeVerdict,
                                    Measure, RunMetrics, ScoreRecord, Stage)
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


REPORT = AdapterReport(model="m", n=2, stages=[Stage("seg_emitted", "[SEG] emitted", 2), Stage("result_correct", "result correct", 1)],
                       measures=[Measure("model_s", "model", 1.5, "s")], details={"modes": {"a": 1}})


def test_run_metrics_round_trip_and_a_protocol_count_keeps_its_place_with_the_runner_value():
    metrics = _metrics(adapter_report=REPORT, units="fraction", headline=["IoU"], judge={"status": "judge: not configured"})
    body = metrics.to_json()
    assert list(body)[6:9] == ["metrics", "n", "breakdown"] and body["n"] == 2
    assert body["schema_version"] == METRICS_SCHEMA_VERSION == 4 and "partial" not in body
    assert body["adapter_report"] == {"model": "m", "n": 2, "stages": [
        {"key": "seg_emitted", "label": "[SEG] emitted", "reached": 2}, {"key": "result_correct", "label": "result correct", "reached": 1}],
        "measures": [{"key": "model_s", "label": "model", "value": 1.5, "unit": "s"}], "details": {"modes": {"a": 1}}}
    again = RunMetrics.from_json(json.loads(json.dumps(body)))
    assert again.to_json() == body and again.failed_samples == [Failure("s1", "parse", "x")] and again.adapter_report == REPORT


def test_metrics_json_without_schema_version_reads_as_version_1():
    body = _metrics().to_json()
    del body["schema_version"]
    old = RunMetrics.from_json(body)
    assert old.schema_version == 1 and old.metrics == {"IoU": 0.5}
    with pytest.raises(RunStoreError, match="schema_version 5"):
        RunMetrics.from_json({**body, "schema_version": 5})


def test_n_is_what_the_headline_averages_in_version_4_and_a_version_3_file_reads_the_same():
    from rvt_bench.core.records import excluded_reasons, headline_n, sample_counts

    # version 3 counted the samples the protocol's rule leaves out in n; version 4 does not
    v3 = {**_metrics().to_json(), "n": 12, "schema_version": 3, "excluded": {"dropped as the reference drops it": 3}}
    v4 = {**_metrics().to_json(), "n": 9, "excluded": {"dropped as the reference drops it": 3},
          "excluded_samples": [{"sample_id": f"v/{k}", "reason": "dropped as the reference drops it"} for k in range(3)]}
    assert v4["schema_version"] == 4
    assert headline_n(v3) == headline_n(v4) == 9 and sample_counts(v3) == sample_counts(v4) == (9, 3, 1)
    assert headline_n({**v3, "excluded": {}}) == 12 and headline_n({k: v for k, v in v3.items() if k != "schema_version"}) == 9
    assert RunMetrics.from_json(v3).to_json() == v3  # read and written back unchanged: still version 3
    assert excluded_reasons(v4) == {"v/0": "dropped as the reference drops it", "v/1": "dropped as the reference drops it",
                                    "v/2": "dropped as the reference drops it"} and excluded_reasons(v3) == {}


# metrics.json version 2 wrote DT-R1's funnel for every model (bench/harness/funnel.py before issue 28)
V2_FUNNEL = {"stages": ["plan_emitted", "dag_valid", "twin_built", "code_rounds_ran", "answer_parsed", "task_correct",
                        "result_correct"], "n": 2, "no_rollout": 0, "result_undecided": 0,
             "reached": {"plan_emitted": 2, "dag_valid": 1, "twin_built": 1, "code_rounds_ran": 1, "answer_parsed": 1,
                         "task_correct": 1, "result_correct": 0},
             "first_failed": {"plan_emitted": 0, "dag_valid": 1, "twin_built": 0, "code_rounds_ran": 0, "answer_parsed": 0,
                              "task_correct": 0, "result_correct": 1}}
V2_ANALYTICS = {"rollouts": 2, "parse_rate": 0.5, "valid_dag_rate": 0.5, "code_exec_success_rate": None,
                "mean_code_rounds": 1.0, "max_code_rounds": 1, "tool_usage": {"SAM2": 1}, "task_consistency": 1.0,
                "task_confusion": {"segmentation": {"segmentation": 1}},
                "latency_s": {"generation": 0.0, "perception": 0.25, "code": 0.5, "total": 3.0, "scoring": None}}


def test_a_version_2_file_reads_its_funnel_and_analytics_as_the_adapter_report():
    body = {**_metrics().to_json(), "schema_version": 2, "decoding": "grammar", "funnel": {**V2_FUNNEL, "not_applicable": 0},
            "analytics": V2_ANALYTICS}
    old = RunMetrics.from_json(body)
    report = old.adapter_report
    assert report.decoding == "grammar" and report.n == 2
    assert [(s.key, s.reached) for s in report.stages] == [(k, V2_FUNNEL["reached"][k]) for k in V2_FUNNEL["stages"]]
    # None and the 0 version 2 wrote for what nobody measured are left out
    assert {m.key: (m.value, m.unit) for m in report.measures} == {
        "valid_dag_rate": (0.5, "fraction"), "mean_code_rounds": (1.0, "rounds"), "max_code_rounds": (1, "rounds"),
        "task_consistency": (1.0, "fraction"), "perception_s": (0.25, "s"), "code_s": (0.5, "s"), "total_s": (3.0, "s")}
    assert report.details == {"tool_usage": {"SAM2": 1}, "task_confusion": {"segmentation": {"segmentation": 1}}}
    assert not {"decoding", "funnel", "analytics"} & set(old.aggregate)
    assert "adapter_report" in old.to_json() and "funnel" not in old.to_json()


def test_a_version_2_file_of_another_model_drops_the_rollout_stages_it_never_had():
    funnel = {**V2_FUNNEL, "not_applicable": 2,
              "reached": {**V2_FUNNEL["reached"], "dag_valid": 2, "twin_built": 2, "code_rounds_ran": 2}}
    body = {**_metrics().to_json(), "schema_version": 2, "decoding": "free", "funnel": funnel}
    report = RunMetrics.from_json(body).adapter_report
    assert [s.key for s in report.stages] == ["answer_parsed", "task_correct", "result_correct"]
    assert report.decoding is None and report.measures == []


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


class _TimedFailure(FakeAdapter):
    def predict(self, sample):
        exc = ParseError("no answer")
        exc.timings = {"policy": 2.5}
        raise exc


def test_a_failure_keeps_the_seconds_its_adapter_measured():
    from tests.fakes import FakeDataset

    pred = predict_one(_TimedFailure(), next(iter(FakeDataset(n=1))), fail_fast=False)
    assert pred.timings["policy"] == 2.5 and "total" in pred.timings


def test_scores_jsonl_rows_are_versioned_score_records_and_metrics_has_no_hidden_keys(tmp_path):
    result = run(make_cfg(tmp_path, fail=["s01"]))
    rows = [json.loads(line) for line in (result.run_dir / "scores.jsonl").read_text().splitlines()]
    assert [ScoreRecord.from_json(r).to_json() for r in rows] == rows
    assert all(r["schema_version"] == 2 and list(r["values"]) == ["fake_iou"] for r in rows)
    body = json.loads((result.run_dir / "metrics.json").read_text())
    assert not [k for k in body if k.startswith("_")]
    assert RunMetrics.from_json(body).to_json() == body


def test_every_built_in_score_kind_is_documented_in_the_schema():
    """docs/metrics_schema.md's scores.jsonl table lacked the `mevis` and `davis_unsupervised` kinds."""
    import rvt_bench.metrics  # noqa: F401  (imports every built-in kind)
    from rvt_bench.core.records import UnitValues
    from rvt_bench.metrics.protocols import mevis, ref_davis17_referformer, server  # noqa: F401

    schema = (Path(__file__).resolve().parent.parent / "docs" / "metrics_schema.md").read_text()
    table = schema.split("| kind | written by | values |", 1)[1].split("\n\n", 1)[0]
    documented = {line.split("|")[1].strip().strip("`") for line in table.splitlines()[2:] if line.startswith("| `")}
    assert {"mevis", "davis_unsupervised"} <= set(UnitValues._kinds)
    shipped = {k for k, cls in UnitValues._kinds.items() if cls.__module__.startswith("rvt_bench.")}  # tests register their own
    assert {"mevis", "davis_unsupervised", "video_jf", "server"} <= shipped and shipped <= documented
