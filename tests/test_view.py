"""What a reader sees of a model's own report: the summary's funnel line, the measures with their
units and report.html's funnel chart are rendered from metrics.json's "adapter_report" block as the
adapter labelled it (a LISA-like model here, whose stages the harness knows nothing of), and an
older file's DT-R1 "funnel" block is read as one."""
from types import SimpleNamespace

from rvt_bench.harness.report.charts import funnel_chart
from rvt_bench.harness.summary import format_summary
from rvt_bench.harness.view import adapter_report, measure_text

METRICS = {
    "dataset": "reasonseg", "split": "val", "model": "lisa", "run_name": "r", "n": 4, "failures": 1,
    "failures_by_kind": {"parse": 1}, "parse_rate": 0.75, "tasks": {"segmentation": 4},
    "metrics": {"gIoU": 0.5, "cIoU": 0.25}, "headline": ["gIoU", "cIoU"],
    "metric_units": {"gIoU": "fraction", "cIoU": "fraction"},
    "ci": {"gIoU": {"low": 0.1, "high": 0.9, "n": 4}}, "baseline_empty": {"gIoU": 0.0},
    "adapter_report": {"model": "lisa", "n": 4,
                       "stages": [{"key": "seg_emitted", "label": "[SEG] emitted", "reached": 3},
                                  {"key": "mask_decoded", "label": "mask decoded", "reached": 3},
                                  {"key": "result_correct", "label": "result correct", "reached": 2}],
                       "measures": [{"key": "seg_rate", "label": "[SEG] rate", "value": 0.75, "unit": "fraction"},
                                    {"key": "gen_s", "label": "generation", "value": 12.5, "unit": "s"},
                                    {"key": "tokens", "label": "tokens (mean)", "value": 31.25, "unit": "tokens"}]},
}


def test_summary_renders_the_adapters_own_funnel_and_measures():
    text = format_summary(SimpleNamespace(metrics=METRICS, scoring_s=1.5))
    assert "  funnel: [SEG] emitted 3 > mask decoded 3 > result correct 2 (50.0 % of 4)" in text
    assert "  measures: [SEG] rate 75.0 %, tokens (mean) 31.2 tokens" in text
    # per-request seconds (summed: they overlap when requests run at once) apart from the wall clock
    assert "  latency, summed per request (s): generation 12.500\n" in text
    assert "  wall time (s): scoring 1.500" in text
    assert "decoding" not in text and "plan emitted" not in text  # nothing of DT-R1's


def test_measures_carry_their_units():
    report = adapter_report(METRICS)
    assert [measure_text(m) for m in report.measures] == ["75.0 %", "12.5 s", "31.2 tokens"]


def test_a_mean_count_is_not_truncated():
    # sam3's "objects kept per sample (mean)" was 0.625 in metrics.json and "0" in the summary
    from rvt_bench.core.records import Measure

    mean = Measure(key="detections", label="objects kept per sample (mean)", value=0.625, unit="count")
    assert measure_text(mean) == "0.6"
    assert measure_text(Measure(key="n", label="objects", value=3, unit="count")) == "3"
    assert measure_text(Measure(key="n", label="objects", value=2.0, unit="count")) == "2"


def test_funnel_chart_labels_are_the_adapters():
    svg = funnel_chart(adapter_report(METRICS))
    assert svg.startswith("<svg") and "[SEG] emitted" in svg and "2 (50 %)" in svg


def test_an_older_funnel_block_reads_as_an_adapter_report():
    old = {**{k: v for k, v in METRICS.items() if k != "adapter_report"}, "model": "dtr1", "decoding": "grammar",
           "funnel": {"stages": ["plan_emitted", "dag_valid", "answer_parsed", "result_correct"], "n": 4,
                      "reached": {"plan_emitted": 4, "dag_valid": 3, "answer_parsed": 3, "result_correct": 1},
                      "not_applicable": 0},
           "analytics": {"valid_dag_rate": 0.75, "mean_code_rounds": None, "latency_s": {"generation": 0.0}}}
    report = adapter_report(old)
    assert [(s.label, s.reached) for s in report.stages] == [("plan emitted", 4), ("DAG valid", 3),
                                                              ("answer parsed", 3), ("result correct", 1)]
    assert report.decoding == "grammar" and [m.key for m in report.measures] == ["valid_dag_rate"]  # no None, no 0 s
