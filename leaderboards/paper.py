"""Published rows (leaderboards/paper/*.csv, one file per paper): what each paper prints, with
where it was read and whether it was checked against the paper's own text. Format and the
verification rule: leaderboards/paper/README.md."""
from __future__ import annotations

import csv
import io
from pathlib import Path

from rvt_bench.core import benchmark, files

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
    """Every published row of `dataset` (a benchmark's name; None: all rows of `paper_dir`), in
    file then row order. The files read are the ones the benchmark declares (conf/dataset/<name>.yaml
    `paper.published`, rvt_bench.core.benchmark.published_files: a name beside the YAML, else in
    `paper_dir`); a benchmark that declares none is looked up in every file of `paper_dir`."""
    rows: list[dict[str, str]] = []
    for path in _files(dataset, Path(paper_dir)):
        rows += [r for r in read(path) if dataset is None or r["dataset"] == dataset]
    return rows


def _files(dataset: str | None, paper_dir: Path) -> list[Path]:
    declared = benchmark.published_files(dataset) if dataset is not None else None
    if declared is None:
        return sorted(paper_dir.glob("*.csv"))
    here, names = declared
    paths = [Path(n) if Path(n).is_absolute() else here / n if (here / n).is_file() else paper_dir / n for n in names]
    return sorted(paths, key=lambda p: p.name)
