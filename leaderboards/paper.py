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
           "value_printed", "unit", "status", "evidence_source", "evidence_snippet", "note", "setting")
SETTINGS = ("", "ablation")
"""`setting`: "" for a paper's main result, "ablation" for a row of its ablation tables (a variant
trained or run in a reduced setting): tables show those apart, never among the main results. A file
written before the column existed (its header COLUMNS without `setting`) reads with setting ""."""
STATUSES = ("verified", "unverified")
UNITS = ("percent", "fraction", "score", "seconds", "count (mean)")


EVIDENCE_LEVELS = ("paper text", "authors' README or code", "secondary source", "digest only")


def evidence(row: dict[str, str]) -> str:
    """How a published row's value is known, from its status and evidence_source: "paper text"
    (verified against the paper), "authors' README or code (<owner/repo>)" (read in a repository
    file), "secondary source (<name>)" (a later paper's reprinted table), or "digest only" (a
    summary of the paper, or the paper not reachable). The first words are EVIDENCE_LEVELS."""
    import re

    if row.get("status") == "verified":
        return "paper text"
    source = (row.get("evidence_source") or "").strip()
    repo = re.match(r"github:([\w.-]+/[\w.-]+)", source)
    if repo:
        return f"authors' README or code ({repo.group(1)})"
    named = re.match(r"third-party paper ([^(,;]+)", source)
    if named:
        return f"secondary source ({named.group(1).strip()})"
    return "digest only"


def read(path: str | Path) -> list[dict[str, str]]:
    """The rows of one paper's CSV as strings (nothing parsed). Raises ValueError naming the file
    when its header is not COLUMNS (or COLUMNS without `setting`, read as setting "") or a row's
    setting is not one of SETTINGS; as rvt_bench.core.files.read_text when it is not a regular
    UTF-8 file within its size cap."""
    reader = csv.DictReader(io.StringIO(files.read_text(path, "published-row CSV"), newline=""))
    if tuple(reader.fieldnames or ()) not in (COLUMNS, COLUMNS[:-1]):
        raise ValueError(f"{path}: published-row columns must be {list(COLUMNS)}, got {reader.fieldnames}")
    rows = [{**row, "setting": row.get("setting") or ""} for row in reader]
    for row in rows:
        if row["setting"] not in SETTINGS:
            raise ValueError(f"{path}: setting must be one of {list(SETTINGS)}, got {row['setting']!r} ({row['model']})")
    return rows


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
