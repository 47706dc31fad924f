"""Published rows (leaderboards/paper/*.csv, one file per paper): what each paper prints, with
where it was read and whether it was checked against the paper's own text. Format and the
verification rule: leaderboards/paper/README.md."""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from rvt_bench.core import benchmark, files
from rvt_bench.core.printable import printable
from rvt_bench.core.types import DatasetFormatError

PAPER_DIR = Path(__file__).resolve().parent / "paper"
COLUMNS = ("paper_id", "paper_title", "table", "dataset", "benchmark", "split", "subset", "metric", "model",
           "value_printed", "unit", "status", "evidence_source", "evidence_snippet", "note", "setting", "variant")
SETTINGS = ("", "ablation")
"""`setting`: "" for a paper's main result, "ablation" for a row of its ablation tables (a variant
trained or run in a reduced setting): tables show those apart, never among the main results. A file
written before the column existed (its header COLUMNS without `setting`) reads with setting "".
`variant`: the benchmark's named protocol variant the paper scored under (rvt_bench.core.benchmark.variants,
e.g. ReasonSeg's "segzero"), "" for the benchmark's reference rule; a file without the column reads
with variant ""."""
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


class PublishedRowsError(DatasetFormatError, ValueError):
    """A published-row CSV that cannot be read as one (its header, a row's fields, setting or value):
    the message names the file and the row, on one line; the CLI's data error (exit 2)."""


VALUE = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
"""value_printed: a finite decimal number as printed ("56.2", "0.837"), nothing else (no "nan", no
formula, no text)."""


def read(path: str | Path) -> list[dict[str, str]]:
    """The rows of one paper's CSV as strings (nothing parsed). Raises PublishedRowsError (a ValueError
    and DatasetFormatError) naming the file when its header is not COLUMNS (or COLUMNS without
    `setting`, read as setting ""), and naming the file and row when a row has not the header's
    number of fields, its setting is not one of SETTINGS, its variant is neither "" nor one its dataset declares, or its value_printed is not a finite number
    (VALUE); as rvt_bench.core.files.read_text when it is not a regular UTF-8 file within its size cap."""
    reader = csv.DictReader(io.StringIO(files.read_text(path, "published-row CSV"), newline=""))
    where = printable(path)
    if tuple(reader.fieldnames or ()) not in (COLUMNS, COLUMNS[:-1], COLUMNS[:-2]):
        raise PublishedRowsError(f"{where}: published-row columns must be {list(COLUMNS)}, got "
                                 f"{printable(reader.fieldnames)}")
    width = len(reader.fieldnames)
    rows = []
    for k, row in enumerate(reader, 1):
        line = f"{where}: row {k} (line {reader.line_num})"
        fields = width - sum(v is None for v in row.values()) + len(row.get(None) or ())
        if fields != width:
            raise PublishedRowsError(f"{line}: has {fields} fields, the header {width}")
        row = {**row, "setting": row.get("setting") or "", "variant": row.get("variant") or ""}
        if row["setting"] not in SETTINGS:
            raise PublishedRowsError(f"{line}: setting must be one of {list(SETTINGS)}, got {printable(repr(row['setting']))} "
                                     f"({printable(row['model'])})")
        if row["variant"] and row["variant"] not in _variants(row["dataset"]):
            raise PublishedRowsError(f"{line}: variant {printable(repr(row['variant']))} is not one that benchmark "
                                     f"{printable(repr(row['dataset']))} declares ({sorted(_variants(row['dataset']))}; "
                                     f"conf/dataset/<name>.yaml `variants`)")
        if not VALUE.fullmatch(row["value_printed"]):
            raise PublishedRowsError(f"{line}: value_printed must be a number as printed (56.2), got "
                                     f"{printable(repr(row['value_printed']))} ({printable(row['model'])})")
        rows.append(row)
    return rows


def _variants(dataset: str) -> dict[str, str]:
    try:
        return benchmark.variants(dataset)
    except benchmark.DeclarationError:
        return {}


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
