"""Leaderboard rows a researcher can share: one n with the excluded counts, `complete`, no absolute
paths, the same columns for every split; render marks incomplete runs (leaderboards/row.py, render.py)."""
import json
import os
from pathlib import Path

from rvt_bench.leaderboards.publish import upsert
from rvt_bench.leaderboards.render import render
from rvt_bench.leaderboards.row import leaderboard_row, portable_overrides, portable_path


def metrics(split="test", failures=0, n=12, dataset="revos", **extra):
    return {"run_name": f"r-{split}-{failures}", "fingerprint": f"fp{split}{failures}", "dataset": dataset,
            "split": split, "model": "LISA-7B", "protocol": "revos", "n": n, "failures": failures, "parse_rate": 1.0,
            "data_errors": 0, "metrics": {"J&F": 0.5, "J": 0.4, "F": 0.6}, "breakdown": {},
            "ci": {"J&F": {"low": 0.4, "high": 0.6, "n": 10}}, "excluded": {"no-target expressions": 2}, **extra}


def make_run(path):
    path.mkdir(parents=True, exist_ok=True)
    (path / "manifest.json").write_text(json.dumps({"git_sha": "abc", "started_utc": "2026-01-01T00:00:00"}))
    return path


def resolved(root):
    return {"model": {"name": "LISA-7B"}, "run": {"root": str(root)}}


def test_a_row_holds_no_absolute_path_and_one_n_with_what_it_leaves_out(tmp_path):
    run_dir = make_run(tmp_path / "runs" / "revos" / "lisa" / "r1")
    home = os.path.expanduser("~")
    row = leaderboard_row(resolved(tmp_path / "runs"), metrics(), run_dir, ["J&F"],
                          [f"dataset.root={home}/data/ReVOS", f"model.root={tmp_path}/runs/preds,/abs/other", "model.x=3"])
    assert row["run_dir"] == "revos/lisa/r1"
    assert row["overrides"] == "dataset.root=.../ReVOS model.root=preds,.../other model.x=3"
    assert not any(isinstance(v, str) and (home in v or str(tmp_path) in v) for v in row.values())
    assert (row["n"], row["excluded"], row["complete"]) == (10, 2, 1)


def test_portable_paths_leave_other_text_alone():
    assert portable_path("~/x/y", [Path("/nowhere")]) == ".../y"
    assert portable_path("relative/p", [Path("/a")]) == "relative/p"
    assert portable_overrides(["+model=lisa", "a.b"], []) == ["+model=lisa", "a.b"]


def test_a_run_with_a_missing_prediction_is_incomplete_in_the_csv_and_in_render(tmp_path):
    run_dir = make_run(tmp_path / "runs" / "x")
    for failures in (0, 1):
        row = leaderboard_row(resolved(tmp_path / "runs"), metrics(failures=failures), run_dir, ["J&F"], [])
        upsert(tmp_path / "boards", "revos", row)
    board = (tmp_path / "boards" / "revos.csv").read_text()
    lines = render("revos", tmp_path / "boards", paper=False).splitlines()
    assert "complete" in board.splitlines()[0]
    incomplete = [line for line in lines if "[INCOMPLETE: 1 failed]" in line]
    assert len(incomplete) == 2 and all("r-test-1" in line for line in incomplete)  # runs table and paper table
    assert any("r-test-0" in line and "INCOMPLETE" not in line for line in lines)


def test_every_split_gets_the_columns_of_every_split(tmp_path):
    body = {**metrics(split="val", dataset="reasonseg"), "metrics": {"gIoU": 0.5, "cIoU": 0.4},
            "breakdown": {"is_sentence": {"false": {"gIoU": 0.3, "cIoU": 0.2, "n": 5},
                                           "true": {"gIoU": 0.6, "cIoU": 0.5, "n": 5}}},
            "ci": {"gIoU": {"low": 0.4, "high": 0.6, "n": 10}}}
    run_dir = make_run(tmp_path / "r")
    val = leaderboard_row(resolved(tmp_path), body, run_dir, ["gIoU", "cIoU"], [])
    test = leaderboard_row(resolved(tmp_path), {**body, "split": "test"}, run_dir, ["gIoU", "cIoU"], [])
    assert "is_sentence=false/gIoU" in val
    assert [k for k in val if "/" in k] == [k for k in test if "/" in k]


def test_render_of_an_empty_board_is_one_line_and_runs_come_sorted_by_the_headline(tmp_path):
    (tmp_path / "demo.csv").write_text("")
    assert render("demo", tmp_path, paper=False).count("\n") == 0
    for name, score in (("low", 0.2), ("high", 0.9), ("mid", 0.5)):
        upsert(tmp_path, "demo", {"run_name": name, "fingerprint": name, "dataset": "demo", "split": "val",
                                  "model": f"M-{name}", "headline": "J&F", "headlines": json.dumps(["J&F"]), "J&F": score})
    out = render("demo", tmp_path, paper=False)
    assert [line.split(" | ")[1] for line in out.splitlines() if line[2:3].isdigit() and "M-" in line] == \
        ["M-high", "M-mid", "M-low"]


def test_revos_names_the_no_target_expressions_its_headline_leaves_out():
    from rvt_bench.core.records import ScoreRecord
    from rvt_bench.metrics.protocols.revos import ReVOSProtocol, ReVOSValues

    records = [ScoreRecord(f"v/{k}", meta={"type_id": k % 3}, values={"revos": ReVOSValues(k % 3, 0.5, 0.5, 0.5, {}, A=0.5)})
               for k in range(12)]
    assert ReVOSProtocol().aggregate(records)["excluded"] == {"no-target expressions": 4}
