"""A leaderboard as a markdown table: users' runs sorted by the headline metric, with 95% CIs, then
the published rows of the same benchmark (source=paper), reproduced exactly as published.

    python -m rvt_bench.leaderboards.render DATASET [--dir leaderboards] [--no-paper]

Values are printed in percent (the CSVs hold fractions). Paper rows come from leaderboards/paper/*.csv
(columns source, benchmark, subset, metric, model, value, note; see leaderboards/paper/README.md);
a paper benchmark matches DATASET when both agree ignoring case and punctuation (LLM-Seg40K = llmseg40k).
"""
from __future__ import annotations

import argparse
import csv
import math
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd

from rvt_bench.core.units import unit
from rvt_bench.leaderboards.config import LeaderboardConfig
from rvt_bench.leaderboards.publish import read_board

PAPER_DIR = Path(__file__).resolve().parent / "paper"
# Numeric columns of a row that are not metrics.
_RAW_UNITS = {"seconds", "mean"}  # paper "metric" values that are units, not fractions
_NOT_METRICS = {"n", "failures", "parse_rate", "data_errors", "judge_failure_rate", "protocol_version"}


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def paper_rows(dataset: str, paper_dir: Path = PAPER_DIR) -> list[dict[str, str]]:
    """The published rows of `dataset`'s benchmark, as the strings of the CSV (nothing parsed)."""
    rows: list[dict[str, str]] = []
    for path in sorted(Path(paper_dir).glob("*.csv")):
        with open(path, newline="", encoding="utf-8") as fh:
            rows += [r for r in csv.DictReader(fh) if _norm(r["benchmark"]) == _norm(dataset)]
    return rows


def published_percent(value: str) -> str:
    """A published fraction string as the percentage the paper printed: "0.837" -> "83.7",
    "0.670" -> "67.0" (decimal arithmetic on the string: no float rounding)."""
    digits = len(value.split(".", 1)[1]) if "." in value else 0
    return str((Decimal(value) * 100).quantize(Decimal(1).scaleb(-max(digits - 2, 0))))


def _pct(value: Any, digits: int = 1, key: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if unit(key) != "%":
        return f"{float(value):.{digits + 2}f}"
    return f"{100 * float(value):.{digits}f}"


def _metric_columns(board: pd.DataFrame) -> list[str]:
    with_ci = [c[: -len(" ci_low")] for c in board.columns if c.endswith(" ci_low")]
    if with_ci:
        return with_ci
    return [c for c in board.columns if c not in _NOT_METRICS and not c.startswith("analytics/")
            and pd.api.types.is_numeric_dtype(board[c])]


def render(dataset: str, board_dir: str | Path = LeaderboardConfig.dir, paper: bool = True, digits: int = 1) -> str:
    """Markdown leaderboard of `dataset` (see module docstring). Empty runs table when no CSV yet."""
    path = Path(board_dir) / f"{dataset}.csv"
    board = read_board(path)
    published = paper_rows(dataset) if paper else []
    metrics = _metric_columns(board) if not board.empty else []
    headline = (str(board["headline"].dropna().iloc[0]) if "headline" in board.columns and board["headline"].notna().any()
                else (metrics[0] if metrics else None))
    if headline in board.columns:
        board = board.sort_values(headline, ascending=False, na_position="last", kind="stable")
    extra = [m for m in dict.fromkeys(r["metric"] for r in published) if m not in metrics]
    columns = metrics + extra
    head = ["rank", "source", "model", "run", "subset", *[f"{c} ({'%' if unit(c) == '%' else 'score'})" for c in columns], "n", "failures",
            "parse rate (%)", "git", "date", "note"]
    lines = [f"## {dataset}", "",
             f"Values in % (files hold fractions); [95% bootstrap CI]. Runs sorted by {headline or 'n/a'}"
             + ("; rows marked `paper` are published numbers, as printed in their source." if published else "."), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rank, (_, r) in enumerate(board.iterrows(), 1):
        cells = []
        for c in columns:
            if c not in board.columns or pd.isna(r[c]):
                cells.append("n/a")
                continue
            lo, hi = r.get(f"{c} ci_low"), r.get(f"{c} ci_high")
            ci = f" [{_pct(lo, digits, c)}, {_pct(hi, digits, c)}]" if lo is not None and not pd.isna(lo) else ""
            cells.append(_pct(r[c], digits, c) + ci)
        parts = [str(r.get(k)) for k in ("policy", "perception") if isinstance(r.get(k), str) and r.get(k)]
        model = f"{r.get('model')}" + (f" ({' / '.join(parts)})" if parts else "")
        parse = "n/a" if pd.isna(r.get("parse_rate")) else _pct(r.get("parse_rate"))
        sha = str(r.get("git_sha", ""))[:10]
        lines.append("| " + " | ".join([str(rank), str(r.get("source", "run")) if not pd.isna(r.get("source", "run")) else "run",
                                         model, str(r.get("run_name")), str(r.get("split")), *cells, str(r.get("n")),
                                         str(r.get("failures")), parse, sha, str(r.get("date", "")) if not pd.isna(r.get("date", "")) else "",
                                         str(r.get("overrides", "")) if not pd.isna(r.get("overrides", "")) else ""]) + " |")
    grouped: dict[tuple[str, str, str], dict[str, dict[str, str]]] = {}
    for p in published:
        grouped.setdefault((p["source"], p["model"], p["subset"]), {})[p["metric"]] = p
    for (source, model, subset), values in grouped.items():
        # shown in the column's unit: fractions as the percentages printed in the paper, scores
        # (CIDEr) and other units (seconds) as the CSV's own string
        cells = [("" if c not in values else published_percent(values[c]["value"]) if unit(c) == "%" and c not in _RAW_UNITS
                  else values[c]["value"]) for c in columns]
        notes = "; ".join(dict.fromkeys(v["note"] for v in values.values() if v["note"]))
        lines.append("| " + " | ".join(["", f"paper: {source}", model, "", subset, *cells, "", "", "", "", "", notes]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--dir", default=LeaderboardConfig.dir, help="folder of the <dataset>.csv files")
    ap.add_argument("--no-paper", action="store_true", help="leave out published rows")
    ap.add_argument("--digits", type=int, default=1, help="decimals of the percentages of runs")
    args = ap.parse_args(argv)
    print(render(args.dataset, args.dir, not args.no_paper, args.digits))


if __name__ == "__main__":
    main()
