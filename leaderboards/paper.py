"""Published rows (leaderboards/paper/*.csv, one file per paper): what each paper prints, with
where it was read and whether it was checked against the paper's own text. Format and the
verification rule: leaderboards/paper/README.md."""
from __future__ import annotations

import csv
import io
from pathlib import Path

from rvt_bench.core import files

PAPER_DIR = Path(__file__).resolve().parent / "paper"
COLUMNS = ("paper_id", "paper_title", "table", "dataset", "benchmark", "split", "subset", "metric", "model",
           "value_printed", "unit", "status", "evidence_source", "evidence_snippet", "note")
STATUSES = ("verified", "unverified")
UNITS = ("percent", "fraction", "score", "seconds", "count (mean)")


def read(path: str | Path) -> list[dict[str, str]]:
    """The rows of one paper's CSV as strings (nothing parsed). Raises ValueError naming the file
    when its header is not COLUMNS; as rvt_bench.core.files.read_text when it is not a regular
    UTF-8 file within its size cap."""
    reader = csv.DictReader(io.StringIO(files.read_text(path, "published-row CSV"), newline=""))
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise ValueError(f"{path}: published-row columns must be {list(COLUMNS)}, got {reader.fieldnames}")
    return list(reader)


def paper_rows(dataset: str | None = None, paper_dir: str | Path = PAPER_DIR) -> list[dict[str, str]]:
    """Every published row of `dataset` (our benchmark name: reasonseg, revos, llmseg40k, jitbench,
    rvtbench; None: all rows), in file then row order."""
    rows: list[dict[str, str]] = []
    for path in sorted(Path(paper_dir).glob("*.csv")):
        rows += [r for r in read(path) if dataset is None or r["dataset"] == dataset]
    return rows
