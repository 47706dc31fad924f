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
    assert body["schema_version"] == 4 and body["units"] == "fraction"
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


def test_summary_ends_with_the_markdown_results_table_and_a_pointer(runs):
    _, a, _ = runs
    lines = format_summary(a).splitlines()
    table = lines[lines.index("| benchmark | metric | value | 95% CI | unit | n |"):-1]  # the last line says where the rest is
    assert len(table) == 2 + len(a.metrics["headline"])
    gIoU = a.metrics["metrics"]["image/gIoU"]
    assert f"| demo (demo) | image/gIoU | {100 * gIoU:.1f} | [" in table[2]


def test_summary_fits_a_screen_and_says_where_the_rest_is(runs):
    _, a, _ = runs
    short, full = format_summary(a).splitlines(), format_summary(a, verbose=True).splitlines()
    assert len(short) <= 40 and short[-1].startswith("more: ") and "report.html" in short[-1]
    assert not any(line.startswith("  image/level=") for line in short)
    assert any(line.startswith("  image/level=1 (n=") for line in full) and len(full) > len(short)
    # precomputed predictions: the precomputed adapter's own funnel, no decoding (issue 28)
    at = next(k for k, line in enumerate(short) if line.startswith("  funnel: "))
    assert short[at].startswith("  funnel: prediction found ") and "result correct" in " ".join(short[at:at + 2])


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


def test_compare_page_has_a_paired_plot_per_mean_metric(runs, tmp_path):
    from rvt_bench.harness.report.comparison import write_comparison

    _, a, b = runs
    result = compare(a.run_dir, b.run_dir, b=100, per_sample=True)
    giou = result["per_sample"]["image/gIoU"]
    assert len(giou["a"]) == len(giou["b"]) == 11  # every shared image sample, on both sides
    page = write_comparison(result, tmp_path / "cmp.html").read_text()
    assert page.count("<svg") == len(result["per_sample"]) >= 4 and "image/gIoU: B better on" in page
    assert "None" not in page and " pp" in page


def test_a_run_compared_with_itself_has_no_difference(runs):
    _, a, _ = runs
    for row in compare(a.run_dir, a.run_dir, b=100)["metrics"]:
        if "delta" in row:
            assert row["delta"] == 0 and row["p_value"] == 1.0 and row["wins"] == row["losses"] == 0


def test_every_full_run_leaves_its_report_and_the_summary_shows_the_scoring_time(runs):
    _, a, _ = runs
    assert a.report == a.run_dir / "report.html" and a.report.is_file() and any((a.run_dir / "report_images").iterdir())
    seconds = json.loads((a.run_dir / "manifest.json").read_text())["scoring"]["seconds"]
    prediction = json.loads((a.run_dir / "manifest.json").read_text())["prediction"]
    wall = next(line for line in format_summary(a).splitlines() if line.startswith("  wall time (s):"))
    assert f"scoring {seconds:.3f}" in wall and f"prediction {prediction['seconds']:.3f}" in wall
    assert prediction["samples"] == 31 and "by the latest invocation" in wall


def test_a_resume_with_nothing_to_predict_names_the_prediction_time_as_an_earlier_one(runs):
    from rvt_bench.harness.summary import latency_line

    _, a, _ = runs
    metrics = json.loads((a.run_dir / "metrics.json").read_text())
    prediction = json.loads((a.run_dir / "manifest.json").read_text())["prediction"]
    wall = latency_line(metrics, 1.0, prediction, predicted_now=0)[-1]
    assert f"31 samples predicted by an earlier invocation on {prediction['finished_utc']}" in wall
    assert "latest" not in wall
    rebuilt = latency_line(metrics, 1.0, prediction)[-1]  # report.html, built from the run's files
    assert f"31 samples, by the invocation that finished predicting on {prediction['finished_utc']}" in rebuilt
    assert "latest" not in rebuilt


def test_a_run_scored_before_typed_values_compares_as_it_did(runs, tmp_path):
    """scores.jsonl of schema_version 1 (each unit's values flat beside the header) still reads:
    the comparison of such a run is the comparison of the same run written now."""
    import shutil

    _, a, b = runs
    old = tmp_path / "a_v1"
    shutil.copytree(a.run_dir, old)
    lines = []
    for line in (a.run_dir / "scores.jsonl").read_text().splitlines():
        record = json.loads(line)
        values = record.pop("values")
        assert values and record["schema_version"] == 2
        for kind in values.values():
            record.update(kind)
        lines.append(json.dumps({**record, "schema_version": 1}, sort_keys=True))
    (old / "scores.jsonl").write_text("\n".join(lines) + "\n")
    now, before = compare(a.run_dir, b.run_dir, b=100), compare(old, b.run_dir, b=100)
    assert before["metrics"] == now["metrics"] and len(now["metrics"]) == len(a.metrics["headline"])


def test_compare_of_three_runs_writes_one_page_with_flips_labels_and_ids(runs, tmp_path, capsys):
    from rvt_bench.harness.compare import main as compare_main

    _, a, b = runs
    out = tmp_path / "page" / "out.html"
    out.parent.mkdir()
    compare_main([str(a.run_dir), str(b.run_dir), str(a.run_dir), "--B", "50", "--html", str(out)])
    assert [p.name for p in out.parent.iterdir()] == ["out.html"]  # one file for three runs
    page = out.read_text()
    assert page.count("<h3>Samples that flipped") == 2 and ("right -> wrong" in page or "wrong -> right" in page)
    assert "(a)" in page and "(b)" in page and "run 1" not in page  # labelled by display and run name
    flipped = compare(a.run_dir, b.run_dir, b=20)["flips"]
    assert flipped and all(f["a_correct"] != f["b_correct"] for f in flipped)
    svgs = "".join(part.split("</svg>")[0] for part in page.split("<svg")[1:])
    ids = compare(a.run_dir, b.run_dir, b=20, per_sample=True)["per_sample"]["image/gIoU"]["a"]
    assert any(f">{sid}<" in svgs for sid in ids)  # the samples that changed most are named on the plot
    keys = [r["key"] for r in compare(a.run_dir, b.run_dir, b=20)["metrics"]]
    assert any("=" in k or k.count("/") > 1 for k in keys)  # paper-table cells beyond the headline


def test_the_pages_name_each_metric_with_its_bootstrap_method_as_the_terminal_does(runs, tmp_path):
    """report.html and compare --html listed the methods alone ("samples; sources ...; samples;
    corpus metric ..."): which metric had which was only in the terminal's "Resampled" lines."""
    import html as htmllib
    import re

    from rvt_bench.harness.report.comparison import write_comparison

    _, a, b = runs
    result = compare(a.run_dir, b.run_dir, b=50, per_sample=True)
    terminal = format_comparison(result).split("Resampled (bootstrap draws and permutation swaps):\n")[1]
    groups = [line[2:] for line in terminal.splitlines() if line.startswith("- ")]
    assert len(groups) >= 3 and all(": " in g for g in groups)  # e.g. "image/gIoU, image/cIoU: samples"
    page = htmllib.unescape(write_comparison(result, tmp_path / "cmp.html").read_text())
    listed = re.search(r"resampled \(bootstrap draws and permutation swaps\):</p><ul class='meta resampled'>(.*?)</ul>", page).group(1)
    assert re.findall(r"<li>(.*?)</li>", listed) == groups
    report = htmllib.unescape(a.report.read_text())
    listed = re.search(r'<ul class="meta" id="ci-methods">(.*?)</ul>', report).group(1)
    said = dict(item.split(": ", 1)[::-1] for item in re.findall(r"<li>(.*?)</li>", listed))
    for group in groups:  # the run's own intervals: each metric named with the same method as in the terminal
        keys, how = group.split(": ", 1)
        assert how in said and set(keys.split(", ")) <= set(said[how].split(", ")), (group, said)


def test_the_compare_page_shows_control_characters_of_names_and_ids_as_escapes(tmp_path):
    import re

    from rvt_bench.harness.report.comparison import write_comparison

    result = {"name_a": "a\x1b[31m", "name_b": "b<i>", "a": "run A\r", "b": "run B", "n_shared": 1, "only_a": 0, "only_b": 0,
              "metrics": [{"key": "gIoU", "a": 0.5, "b": 0.6, "delta": 0.1, "low": 0.0, "high": 0.2, "p_value": 0.5, "n": 1,
                           "wins": 1, "losses": 0, "ties": 0, "resampled": "samples"}],
              "flips": [{"sample_id": "s\x00<b>1", "a_correct": False, "b_correct": True, "a": 0.0, "b": 1.0}]}
    page = write_comparison(result, tmp_path / "cmp.html").read_text()
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f]", page)
    assert r"a\x1b[31m" in page and r"run A\r" in page and r"s\x00&lt;b&gt;1" in page and "b&lt;i&gt;" in page


def test_compare_shows_a_hostile_run_name_escaped_on_the_terminal_and_in_the_charts(runs, tmp_path, capsys):
    """A run name from metrics.json holding an OSC 8 link, U+202E, a newline, a lone surrogate or "$\\frac{$":
    compare printed it raw to the terminal, the paired charts' SVG <text> carried it raw, and the
    lone surrogate (or the mathtext) killed `compare --html` with a matplotlib traceback."""
    import re
    import shutil

    from rvt_bench.harness.compare import main as compare_main

    _, a, b = runs
    hostile = tmp_path / "hostile"
    shutil.copytree(a.run_dir, hostile)
    metrics = json.loads((hostile / "metrics.json").read_text())
    metrics["run_name"] = "x\x1b]8;;http://x\x07link\x07 \u202eevil\nforged line bad\udcffname $\\frac{$"
    (hostile / "metrics.json").write_text(json.dumps(metrics))
    out = tmp_path / "cmp.html"
    compare_main([str(hostile), str(b.run_dir), "--B", "20", "--html", str(out)])
    stdout = capsys.readouterr().out
    raw = "[\x00-\x08\x0b-\x1f\x7f\u202e\ud800-\udfff]"
    assert not re.search(raw, stdout) and "\nforged line" not in stdout
    assert r"x\x1b]8;;http://x\x07link\x07 \u202eevil\nforged line bad\udcffname $\frac{$" in stdout
    page = out.read_text(encoding="utf-8")
    assert not re.search(raw, page)
    labels = re.findall(r"<text[^>]*>([^<]*)", page)
    assert any(label.endswith(r"\udcffname $\frac{$) (%)") for label in labels)  # "$" as text, not mathtext
