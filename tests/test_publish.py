import pandas as pd
import pytest

from rvt_bench.leaderboards.publish import render, upsert


def row(fp, name, score):
    return {"run_name": name, "fingerprint": fp, "dataset": "demo", "split": "val", "model": "m", "J&F": score}


def test_upsert_adds_rows_and_replaces_by_fingerprint(tmp_path):
    upsert(tmp_path, "demo", row("0001", "b", 0.5))
    upsert(tmp_path, "demo", row("0002", "a", 0.25))
    upsert(tmp_path, "demo", row("0001", "b", 0.75))
    board = pd.read_csv(tmp_path / "demo.csv", dtype={"fingerprint": str})
    assert list(board["run_name"]) == ["a", "b"]
    assert list(board["fingerprint"]) == ["0002", "0001"]  # leading zeros kept
    assert board.loc[board["fingerprint"] == "0001", "J&F"].item() == pytest.approx(0.75)


def test_row_without_fingerprint_is_refused(tmp_path):
    with pytest.raises(ValueError, match="fingerprint"):
        upsert(tmp_path, "demo", {"run_name": "x"})


def test_render_shows_the_board(tmp_path):
    assert render(tmp_path, "demo") == ""
    upsert(tmp_path, "demo", row("0001", "b", 0.5))
    assert "0001" in render(tmp_path, "demo")


def test_where_results_are_logged_is_not_what_ran():
    from rvt_bench.harness.publish import semantic_overrides

    assert semantic_overrides(["logger=wandb", "logger.project=p", "model.max_rounds=2", "run.root=/x"]) == \
        ["model.max_rounds=2"]  # the leaderboard row's overrides tell sweep points apart, not their trackers


FORMULAS = ["=HYPERLINK(\"http://x\",\"y\")", "+cmd|' /C calc'!A0", "-2+3", "@SUM(1,2)", "\tx", "\rx", "'=already",
            "''x"]


def test_cells_a_spreadsheet_would_evaluate_are_written_as_text_and_read_back_as_they_were(tmp_path):
    # OWASP's CSV-injection convention: a leading quote; numbers, and text that is a plain number, unchanged
    from rvt_bench.leaderboards.publish import read_board

    for k, name in enumerate(FORMULAS):
        upsert(tmp_path, "demo", {**row(f"{k:04d}", name, -0.5), "model": "@model", "=col": "=v"})
    upsert(tmp_path, "demo", {**row("0100", "plain", 0.25), "model": "-0.5", "=col": "x"})
    text = (tmp_path / "demo.csv").read_bytes().decode()
    assert "'=HYPERLINK" in text and "'@model" in text and "'-2+3" in text and "'+cmd" in text and "'=col" in text
    assert ",-0.500000" in text and ",-0.5," in text  # the float and the text that is a number stay numbers
    for line in text.split("\n"):
        for cell in line.split(","):
            assert not cell.lstrip('"').startswith(("=", "+", "@", "\t", "\r")) and not cell.startswith("-2")
    board = read_board(tmp_path / "demo.csv")
    assert "=col" in board.columns
    by_fp = dict(zip(board["fingerprint"], board["run_name"]))
    assert [by_fp[f"{k:04d}"] for k in range(len(FORMULAS))] == FORMULAS
    assert board.loc[board["fingerprint"] == "0000", "J&F"].item() == -0.5
    # publishing again reads and rewrites every row: nothing is quoted twice
    upsert(tmp_path, "demo", row("0100", "plain", 0.5))
    assert (tmp_path / "demo.csv").read_bytes().decode().count("'=HYPERLINK") == 1
    assert sorted(read_board(tmp_path / "demo.csv")["run_name"]) == sorted(FORMULAS + ["plain"])


@pytest.mark.parametrize("value", [*FORMULAS, "-0.5", "+3", "1e-3", "-.5e+2", "-", "=", "'", "plain", "", -0.5, 3, None])
def test_guard_round_trips_and_leaves_numbers(value):
    from rvt_bench.core.csvcells import guard, unguard

    assert unguard(guard(value)) == value
    written = guard(value)
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r") and value not in ("-0.5", "+3", "-.5e+2"):
        assert written == "'" + value
    if not isinstance(value, str) or value in ("-0.5", "+3", "1e-3", "-.5e+2", "plain", ""):
        assert written == value


def test_the_samples_listing_writes_a_formula_id_as_text(tmp_path):
    import csv

    from rvt_bench.harness.report import _write_listing

    _write_listing(tmp_path / "samples.csv", [["index", "sample_id", "score"], [0, "=1+1", "-0.250000"], [1, "a", ""]])
    rows = list(csv.reader((tmp_path / "samples.csv").open(newline="")))
    assert rows == [["index", "sample_id", "score"], ["0", "'=1+1", "-0.250000"], ["1", "a", ""]]
    # a carriage return in an id: the file's lines end in CRLF, so the id is quoted and stays one cell
    _write_listing(tmp_path / "samples.csv", [["index", "sample_id"], [0, "\rx"], [1, "a\rb"]])
    rows = list(csv.reader((tmp_path / "samples.csv").open(newline="")))
    assert rows == [["index", "sample_id"], ["0", "'\rx"], ["1", "a\rb"]]
