"""Leaderboard CSVs: one file per benchmark (`<dir>/<dataset>.csv`), one row per run, keyed by the
run's fingerprint so re-publishing a run replaces its row instead of adding one."""
from __future__ import annotations

import fcntl
import io
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from rvt_bench.core import csvcells, files
from rvt_bench.core.store import write_atomic

KEY = "fingerprint"
# Identity columns first, then metrics in the order the row gives them.
LEADING = ["run_name", KEY, "dataset", "split", "model", "policy", "perception"]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Exclusive lock beside the CSV: sweep points and shards may publish at the same moment."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(path.suffix + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def upsert(board_dir: str | Path, dataset: str, row: dict[str, Any]) -> Path:
    """Insert `row` into `<board_dir>/<dataset>.csv`, replacing the row with the same fingerprint.

    row: flat dict of scalars; must contain "fingerprint". Rows are kept sorted by run_name then
    fingerprint so the file diffs cleanly. Returns the CSV path. Raises ValueError without a fingerprint.
    """
    if not row.get(KEY):
        raise ValueError("a leaderboard row needs a 'fingerprint'")
    path = Path(board_dir) / f"{dataset}.csv"
    with _locked(path):
        board = read_board(path)
        if not board.empty:
            board = board[board[KEY] != row[KEY]]
        board = pd.concat([board, pd.DataFrame([row])], ignore_index=True)
        cols = [c for c in LEADING if c in board.columns] + [c for c in board.columns if c not in LEADING]
        board = board[cols].sort_values(["run_name", KEY], kind="stable")
        out = _guarded(board)
        end = csvcells.line_end([*out.columns, *(c for col in out.columns for c in out[col])])
        write_atomic(path, out.to_csv(index=False, float_format="%.6f", lineterminator=end))
    return path


def _guarded(board: pd.DataFrame) -> pd.DataFrame:
    """`board` with every text cell and column name a spreadsheet would evaluate written as text
    (rvt_bench.core.csvcells, OWASP's leading quote); numbers unchanged. `read_board` undoes it."""
    return _cells(board.rename(columns=csvcells.guard), csvcells.guard)


def _cells(board: pd.DataFrame, how) -> pd.DataFrame:
    """`board` with `how` applied to every cell of its text columns (numbers are never quoted)."""
    for column in board.columns:
        if not pd.api.types.is_numeric_dtype(board[column]):
            board[column] = board[column].map(how)
    return board


def render(board_dir: str | Path, dataset: str) -> str:
    """The leaderboard as a plain-text table (empty string when it does not exist yet)."""
    path = Path(board_dir) / f"{dataset}.csv"
    if not path.exists():
        return ""
    return read_board(path).to_string(index=False)


def read_board(path: Path) -> pd.DataFrame:
    """A leaderboard CSV (empty when absent or empty), read through rvt_bench.core.files: a FIFO or
    a device in its place is refused (DatasetFormatError naming it) instead of hanging the run. Text
    cells written as text for spreadsheets (`upsert`, rvt_bench.core.csvcells) come back as they were."""
    if not path.exists():
        return pd.DataFrame()
    raw = files.read_data(path, "leaderboard")
    if not raw.strip():
        return pd.DataFrame()
    return _cells(pd.read_csv(io.BytesIO(raw), dtype={KEY: str}).rename(columns=csvcells.unguard), csvcells.unguard)
