"""rvt_bench.leaderboards.render: runs sorted by the headline with CIs; published rows beside them, exactly as printed."""
import csv
from pathlib import Path

from rvt_bench.leaderboards.publish import upsert
from rvt_bench.leaderboards.render import PAPER_DIR, published_percent, render

SHARED = Path("/work/shared/data/dtr1_paper_results.csv")


def run_row(fp, name, giou):
    return {"run_name": name, "fingerprint": fp, "dataset": "reasonseg", "split": "val", "model": "m", "source": "run",
            "headline": "gIoU", "gIoU": giou, "gIoU ci_low": giou - 0.1, "gIoU ci_high": giou + 0.1, "cIoU": 0.4,
            "cIoU ci_low": 0.3, "cIoU ci_high": 0.5, "n": 10, "failures": 0, "parse_rate": 1.0}


def body(markdown):
    return [line for line in markdown.splitlines() if line.startswith("| ") and not line.startswith("| rank")]


def test_runs_are_sorted_by_the_headline_with_their_intervals(tmp_path):
    upsert(tmp_path, "reasonseg", run_row("a1", "low", 0.3))
    upsert(tmp_path, "reasonseg", run_row("b2", "high", 0.6))
    rows = body(render("reasonseg", tmp_path, paper=False))
    assert [r.split(" | ")[3] for r in rows] == ["high", "low"]
    assert "| 60.0 [50.0, 70.0] |" in rows[0]


def test_the_models_own_measures_are_not_metric_columns(tmp_path):
    # rows without intervals: the metric columns are the numeric ones, less counts and adapter measures
    row = {k: v for k, v in run_row("a1", "mine", 0.5).items() if "ci_" not in k}
    upsert(tmp_path, "reasonseg", {**row, "adapter/total_s": 12.5, "adapter/valid_dag_rate": 0.75})
    head = render("reasonseg", tmp_path, paper=False).splitlines()[4]
    assert "gIoU (%)" in head and "cIoU (%)" in head and "adapter/" not in head


def test_paper_rows_appear_beside_a_run_exactly_as_published(tmp_path):
    upsert(tmp_path, "reasonseg", run_row("a1", "mine", 0.5))
    rows = body(render("reasonseg", tmp_path))
    paper = [r for r in rows if "| paper: " in r]
    assert len(rows) == 3 and len(paper) == 2
    # DT-R1 on ReasonSeg long queries: gIoU 0.812, cIoU 0.834 in the shipped CSV
    assert "| DT-R1 |  | long query | 81.2 | 83.4 |" in paper[0]


def test_shipped_paper_csv_is_the_shared_copy_byte_for_byte():
    shipped = PAPER_DIR / "dtr1_arxiv2511.12365.csv"
    if SHARED.exists():
        assert shipped.read_bytes() == SHARED.read_bytes()
    with open(shipped, newline="") as fh:
        assert {r["benchmark"] for r in csv.DictReader(fh)} >= {"JiTBench", "RVTBench", "ReasonSeg", "ReVOS", "LLM-Seg40K"}


def test_published_fractions_print_as_their_percentages_without_float_noise():
    assert published_percent("0.837") == "83.7"
    assert published_percent("0.670") == "67.0"
    assert published_percent("0.0") == "0"
