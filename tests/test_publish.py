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
