"""What a scored run leaves for people: metrics.json header and CIs, the summary's results table,
samples.jsonl, the leaderboard row, rvt_bench.harness.compare. Real demo runs over precomputed predictions."""
import json

import pandas as pd
import pytest

from rvt_bench.harness.compare import compare, format_comparison
from rvt_bench.harness.summary import format_summary
from tests.demo_runs import demo_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("results")
    return tmp, demo_run(tmp, 3, 0, "a"), demo_run(tmp, 5, 1, "b")


def test_metrics_json_has_a_versioned_header(runs):
    _, a, _ = runs
    body = json.loads((a.run_dir / "metrics.json").read_text())
    assert body["schema_version"] == 3 and body["units"] == "fraction"
    assert body["protocol"] == "image:reasonseg+video:revos+rvt:rvtbench" and body["protocol_version"] == 1
    assert body["protocol_variants"]["route_by"] == "meta.source"
    assert body["metric_units"]["rvt/vqa/CIDEr"] == "score" and body["metric_units"]["video/J&F"] == "fraction"


def test_every_numeric_fraction_headline_has_an_interval_around_its_value(runs):
    _, a, _ = runs
    body = json.loads((a.run_dir / "metrics.json").read_text())
    for key in ("image/gIoU", "image/cIoU", "video/J&F", "rvt/grounding/m_vIoU"):
        ci = body["ci"][key]
        assert ci["low"] <= body["metrics"][key] <= ci["high"] and ci["B"] == 1000
    assert body["ci"]["video/J&F"]["n"] == 10  # the 12 ReVOS expressions less the 2 no-target ones


def test_missing_values_are_null_with_a_reason(runs):
    _, a, _ = runs
    body = json.loads((a.run_dir / "metrics.json").read_text())
    assert body["metrics"]["rvt/vqa/judge"] is None
    assert body["unavailable"]["rvt/vqa/judge"] == "judge: not configured"


def test_summary_ends_with_the_markdown_results_table(runs):
    _, a, _ = runs
    lines = format_summary(a).splitlines()
    table = lines[lines.index("| benchmark | metric | value | 95% CI | unit | n |"):]
    assert len(table) == 2 + len(a.metrics["headline"])
    gIoU = a.metrics["metrics"]["image/gIoU"]
    assert f"| demo (demo) | image/gIoU | {100 * gIoU:.1f} | [" in table[2]


def test_samples_log_joins_query_target_response_and_scores(runs):
    _, a, _ = runs
    rows = [json.loads(line) for line in (a.run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 31
    vqa = next(r for r in rows if r["task"] == "vqa")
    assert vqa["query"] and vqa["target"]["answers"] and vqa["scores"]["sample_id"] == vqa["sample_id"]
    first = rows[0]
    assert first["response"]["error"]["kind"] == "parse" and first["scores"]["failed"] is True


def test_leaderboard_row_has_numbers_in_metric_columns_and_provenance(runs):
    tmp, a, _ = runs
    board = pd.read_csv(tmp / "boards" / "demo.csv", dtype={"fingerprint": str})
    row = board[board["run_name"] == "a"].iloc[0]
    assert pd.isna(row["rvt/vqa/judge"])  # no text in a numeric column
    assert row["image/gIoU ci_low"] <= row["image/gIoU"] <= row["image/gIoU ci_high"]
    for col in ("git_sha", "packages_digest", "protocol", "protocol_version", "protocol_variants", "decoding", "sampling",
                "model_ids", "date", "n", "failures", "parse_rate", "adapter/reading_s"):
        assert col in board.columns
    assert row["source"] == "run" and row["headline"] == "image/gIoU"
    assert pd.isna(row["decoding"])  # precomputed predictions decode under no grammar: empty, not "free"


def test_compare_reports_deltas_p_values_and_wins(runs):
    _, a, b = runs
    result = compare(a.run_dir, b.run_dir, b=200)
    row = next(r for r in result["metrics"] if r["key"] == "image/gIoU")
    assert row["delta"] == pytest.approx(b.metrics["metrics"]["image/gIoU"] - a.metrics["metrics"]["image/gIoU"])
    assert 0 < row["p_value"] <= 1 and row["wins"] + row["losses"] + row["ties"] == 11
    assert "| image/gIoU |" in format_comparison(result)


def test_a_run_compared_with_itself_has_no_difference(runs):
    _, a, _ = runs
    for row in compare(a.run_dir, a.run_dir, b=100)["metrics"]:
        if "delta" in row:
            assert row["delta"] == 0 and row["p_value"] == 1.0 and row["wins"] == row["losses"] == 0


def test_every_full_run_leaves_its_report_and_the_summary_shows_the_scoring_time(runs):
    _, a, _ = runs
    assert a.report == a.run_dir / "report.html" and a.report.is_file() and any((a.run_dir / "report_images").iterdir())
    seconds = json.loads((a.run_dir / "manifest.json").read_text())["scoring"]["seconds"]
    latency = next(line for line in format_summary(a).splitlines() if line.startswith("  latency (s):"))
    assert f"scoring {seconds:.3f}" in latency
