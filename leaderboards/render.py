"""A leaderboard: users' runs sorted by the headline metric, with 95% CIs and provenance, then the
benchmark's table in its paper's layout (leaderboards/tables.py): the runs and the published rows
of leaderboards/paper/*.csv, each published row with its mark (verified / unverified) and source.

    rvt-bench render DATASET [--dir leaderboards] [--format markdown|latex] [--no-paper]

Values are printed in percent (the CSVs hold fractions), CIDEr as its score; `--format latex`
prints only the paper-layout table (booktabs), ready for a paper.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from rvt_bench.core import benchmark
from rvt_bench.core.printable import printable, printable_lines
from rvt_bench.core.types import DatasetFormatError
from rvt_bench.core.units import unit
from rvt_bench.leaderboards.config import LeaderboardConfig
from rvt_bench.leaderboards.paper import paper_rows
from rvt_bench.leaderboards.publish import read_board as read_csv_board
from rvt_bench.leaderboards.tables import (FORMATS, VARIANT_TAG, has_layout, markdown_cell, paper_table, variant_mark,
                                          variant_of)

# Numeric columns of a row that are not metrics.
_NOT_METRICS = {"n", "excluded", "complete", "failures", "parse_rate", "data_errors", "judge_failure_rate",
                "protocol_version"}


def _pct(value: Any, digits: int = 1, key: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if unit(key) != "%":
        return f"{float(value):.{digits + 2}f}"
    return f"{100 * float(value):.{digits}f}"


def _metric_columns(board: pd.DataFrame) -> list[str]:
    """The runs table's metric columns: the rows' headline metrics ("headlines", JSON), else every
    metric with an interval, else every numeric column that is not a count."""
    if "headlines" in board.columns and board["headlines"].notna().any():
        keys: list[str] = []
        for cell in board["headlines"].dropna():
            keys += [k for k in json.loads(cell) if k not in keys and k in board.columns]
        # both numbers of a protocol with variants: the reference's keys first, then each variant's
        bases = list(dict.fromkeys(VARIANT_TAG.sub("", k) for k in keys))
        keys += [c for c in board.columns if c not in keys and VARIANT_TAG.search(c) and VARIANT_TAG.sub("", c) in bases
                 and not c.endswith((" ci_low", " ci_high"))]
        return sorted(keys, key=lambda k: (bool(VARIANT_TAG.search(k)), VARIANT_TAG.findall(k)))
    with_ci = [c[: -len(" ci_low")] for c in board.columns if c.endswith(" ci_low")]
    if with_ci:
        return with_ci
    return [c for c in board.columns if c not in _NOT_METRICS and not c.startswith(("adapter/", "analytics/"))
            and pd.api.types.is_numeric_dtype(board[c])]


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def read_board(dataset: str, board_dir: str | Path = LeaderboardConfig.dir) -> pd.DataFrame:
    """<board_dir>/<dataset>.csv (an empty frame when there is none yet)."""
    path = Path(board_dir) / f"{dataset}.csv"
    return read_csv_board(path)


def board_runs(board: pd.DataFrame) -> list[dict[str, Any]]:
    """The leaderboard's rows as the runs of a paper table (leaderboards/tables.py): NaN cells
    dropped, each labelled by model (policy / perception) as in the runs table."""
    runs = []
    for _, r in board.iterrows():
        row = {k: v for k, v in r.items() if not (isinstance(v, float) and math.isnan(v))}
        parts = [str(row[k]) for k in ("policy", "perception") if isinstance(row.get(k), str) and row.get(k)]
        row["label"] = (f"{row.get('model')}" + (f" ({' / '.join(parts)})" if parts else "") + variant_mark(row)
                        + _unsandboxed(row) + _incomplete(row))
        runs.append(row)
    return runs


def _incomplete(row: Any) -> str:
    """The mark of a run that is not whole: "[INCOMPLETE: k failed]" (failures include missing
    predictions), with its data errors, or "[INCOMPLETE]" for a row whose `complete` is 0 otherwise
    (a run.limit run); "" for a complete run or a row written before `complete` existed."""
    counts = []
    for key, what in (("failures", "failed"), ("data_errors", "data errors")):
        value = row.get(key)
        if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)) and value > 0:
            counts.append(f"{int(value)} {what}")
    if counts:
        return f" [INCOMPLETE: {', '.join(counts)}]"
    complete = row.get("complete")
    return " [INCOMPLETE]" if isinstance(complete, (int, float)) and not math.isnan(complete) and complete == 0 else ""


def _headline(board: pd.DataFrame, metrics: list[str]) -> str | None:
    """The column the runs are sorted by: the first headline metric (without its variant tag first:
    "J&F" before "J&F[failed-zero]") that every row has a value for, so a reference run and a
    variant run rank by the same number; else the one most rows have; None without metrics."""
    heads: list[str] = []
    for cell in board["headlines"].dropna() if "headlines" in board.columns else []:
        heads += [k for k in json.loads(cell) if k not in heads]
    if not heads and "headline" in board.columns:
        heads = [str(h) for h in board["headline"].dropna()]
    heads = heads or list(metrics)
    candidates = list(dict.fromkeys(k for h in heads for k in (VARIANT_TAG.sub("", h), h)))
    present = [c for c in candidates if c in board.columns]
    if not present:
        return metrics[0] if metrics else None
    full = [c for c in present if board[c].notna().all()]
    return full[0] if full else max(present, key=lambda c: int(board[c].notna().sum()))


def render(dataset: str, board_dir: str | Path = LeaderboardConfig.dir, paper: bool = True, digits: int = 1,
           fmt: str = "markdown") -> str:
    """The leaderboard of `dataset` (module docstring): markdown = the runs table, then the paper-layout
    table with the published rows; latex = the paper-layout table alone. Raises ValueError for
    another fmt."""
    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {FORMATS}, got {fmt!r}")
    board = read_board(dataset, board_dir)
    published = paper_rows(dataset) if paper else []
    metrics = _metric_columns(board) if not board.empty else []
    headline = _headline(board, metrics) if not board.empty else None
    if headline in board.columns:  # runs in the paper table too come best first
        board = board.sort_values(headline, ascending=False, na_position="last", kind="stable")
    laid_out = not board.empty or published or has_layout(dataset)
    table = paper_table(board_runs(board), fmt, published, digits, dataset=dataset) if laid_out else ""
    if fmt == "latex":
        return table
    if board.empty:
        note = (f"No runs yet: no leaderboard {dataset}.csv in {board_dir}. A scored run publishes its row there; "
                f"make one with `rvt-bench +dataset={dataset} +model=MODEL` (`rvt-bench --list` names the models).")
        return "\n".join([f"## {dataset}", "", note, "", table]) if table else note
    head = ["rank", "model", "run", "split", "data", *[f"{c} ({'%' if unit(c) == '%' else 'score'})" for c in metrics],
            "n", "excluded", "failures", "parse rate (%)", "git", "date", "overrides"]
    lines = [f"## {dataset}", "",
             f"Runs, values in % (files hold fractions) [95% bootstrap CI], sorted by {headline or 'n/a'}"
             + (" (a variant's own numbers stand in its columns, marked [failed-...]; a run marked [variant: ...] "
                "has a protocol variant's headline)" if any(variant_of(r) for _, r in board.iterrows()) else "") + ".", "",
             "| " + " | ".join(markdown_cell(c) for c in head) + " |", "|" + "---|" * len(head)]
    for rank, (_, r) in enumerate(board.iterrows(), 1):
        cells = []
        for c in metrics:
            if c not in board.columns or pd.isna(r[c]):
                cells.append("n/a")
                continue
            lo, hi = r.get(f"{c} ci_low"), r.get(f"{c} ci_high")
            ci = f" [{_pct(lo, digits, c)}, {_pct(hi, digits, c)}]" if lo is not None and not pd.isna(lo) else ""
            cells.append(_pct(r[c], digits, c) + ci)
        parts = [str(r.get(k)) for k in ("policy", "perception") if isinstance(r.get(k), str) and r.get(k)]
        model = (f"{r.get('model')}" + (f" ({' / '.join(parts)})" if parts else "") + variant_mark(r) + _unsandboxed(r)
                 + _incomplete(r))
        parse = "n/a" if pd.isna(r.get("parse_rate")) else _pct(r.get("parse_rate"))
        data = _data_source(_text(r.get("data_source")))
        lines.append("| " + " | ".join(markdown_cell(c) for c in [
            str(rank), model, str(r.get("run_name")), str(r.get("split")), data, *cells, str(r.get("n")), _count(r.get("excluded")),
            str(r.get("failures")), parse, _text(r.get("git_sha"))[:10], _text(r.get("date")), _text(r.get("overrides"))]) + " |")
    return "\n".join(lines + (["", table] if table else []))


def _count(value: Any) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else str(int(value))


def _unsandboxed(row: Any) -> str:
    """The mark of a run whose model-written code ran outside the sandbox (its row's sandbox "none")."""
    return " [UNSANDBOXED: sandbox none]" if row.get("sandbox") == "none" else ""


def _data_source(cell: str) -> str:
    """The leaderboard's data_source cell (JSON) as a short text: "files" or "hub:<id>@<revision[:12]>"."""
    if not cell:
        return "files"
    source = json.loads(cell)
    if source.get("hf_dataset"):
        return f"hub:{source['hf_dataset']}@{str(source.get('revision'))[:12]}" + ("" if source.get("official") else " (unofficial)")
    return "files"


def _or_one_line(call):
    """call(); a data error (a published-rows file that cannot be read) ends the command with one
    line on stderr and exit status 2, as the harness's data errors do (leaderboards sits below the
    harness, so it says so itself)."""
    try:
        return call()
    except DatasetFormatError as exc:
        print(printable(f"error: {type(exc).__name__}: {' '.join(str(exc).split())}"), file=sys.stderr)
        raise SystemExit(2) from None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--dir", default=LeaderboardConfig.dir, help="folder of the <dataset>.csv files")
    ap.add_argument("--no-paper", action="store_true", help="leave out published rows")
    ap.add_argument("--digits", type=int, default=1, help="decimals of the percentages of runs")
    ap.add_argument("--format", choices=FORMATS, default="markdown", help="latex: the paper-layout table alone (booktabs)")
    args = ap.parse_args(argv)
    # a published-rows CSV that cannot be read (a row's setting, value or fields) is one line, exit 2
    published = _or_one_line(lambda: paper_rows(args.dataset))
    # a benchmark without runs prints its (empty) layout; a name that is no benchmark at all (a typo)
    # stops, naming what there is
    if (not (Path(args.dir) / f"{args.dataset}.csv").is_file() and not published
            and benchmark.dataset_file(args.dataset) is None):
        boards = sorted(p.stem for p in Path(args.dir).glob("*.csv")) if Path(args.dir).is_dir() else []
        print(printable(f"error: no leaderboard {args.dataset}.csv in {args.dir}, no published rows for it and no benchmark "
                        f"of that name (benchmarks: {', '.join(benchmark.declared_names())}); "
                        f"boards there: {', '.join(boards) or 'none'}"), file=sys.stderr)
        raise SystemExit(2)
    text = _or_one_line(lambda: render(args.dataset, args.dir, not args.no_paper, args.digits, args.format))
    print(printable_lines(text))  # data's control characters as escapes (the cells' own line breaks are spaces)


if __name__ == "__main__":
    main()
