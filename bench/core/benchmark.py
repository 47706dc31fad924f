"""A benchmark in one declaration: `conf/dataset/<name>.yaml` read as data.

The dataset YAML declares everything the harness knows of a benchmark (docs/adding-a-benchmark.md):

    name: revos
    loader:   {_target_: ...}      how samples are read (bench/loaders/<name>.py, or the canonical loader)
    protocol: {_target_: ...}      how they are scored (metrics/protocols/<name>.py, or units in YAML)
    predictions:                   where a precomputed folder holds a sample's predicted masks
      revos: {path: "{video}/{exp_id}/{frame_id}.png", read: gray}
    paper:                         its published table (leaderboards/tables.py draws it)
      caption: "..."
      columns: [{head: Referring, label: J, cell: referring/J}, ...]   (or `metrics: [...]` + `cell: "x/{metric}"`)
      lines: [[segmentation, J], ...]   long layouts only: the (task, metric) lines of each method
      subsets: {referring: "referring/"}  a published row's subset -> the prefix of its cell key
      published: [visa_arxiv2407.11325.csv]   its published rows (leaderboards/paper/ or beside the YAML)
    variants:                      named protocol variants a paper scored under (dataset.protocol.variant=<name>)
      segzero: "what it reproduces"
    submission:                    the zip its server scores, GT not public (bench/harness/submission.py)
      path: "Annotations/{video}/{exp_id}/{frame_id}.png"
    files:                         the files its loader reads under root, and as what (`declared_files`)
      - {path: "meta_expressions_{split}_.json", role: json}
      - {path: "JPEGImages/*/*.jpg", role: image}

Nothing outside a benchmark's own modules compares with its name: the precomputed adapter asks for
the declared prediction layouts, the tables for the declared paper layout
(tests/test_benchmark_declaration.py holds this).

Where declarations are found: `conf/dataset/` of rvt_bench, then the `dataset/` folder of each
directory in the environment variable RVT_BENCH_CONF_PATH (``os.pathsep``-separated; the command
line adds the same directories to Hydra's search path, so `+dataset=<name>` finds them). A shipped
name is never shadowed. Read with yaml.safe_load: interpolations (``${..root}``) stay text, which
is all the `paper` and `predictions` blocks need.
"""
from __future__ import annotations

import os
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from rvt_bench.core import files
from rvt_bench.core.paths import CONF_DIR
from rvt_bench.core.types import DatasetFormatError

CONF_PATH_ENV = "RVT_BENCH_CONF_PATH"
READS = ("any", "gray")  # any: foreground where any channel is nonzero; gray: cv2 IMREAD_GRAYSCALE, values kept
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
FRAME_FIELD = "frame_id"  # the one template field that is not a meta key: one file per frame


class DeclarationError(ValueError):
    """A benchmark declaration that cannot be used; the message names the file and the key."""


def conf_dirs() -> list[Path]:
    """The config roots searched, in order: rvt_bench's conf/, then RVT_BENCH_CONF_PATH's."""
    extra = [Path(p) for p in os.environ.get(CONF_PATH_ENV, "").split(os.pathsep) if p.strip()]
    return [CONF_DIR, *extra]


def dataset_file(name: str) -> Path | None:
    """The YAML declaring benchmark `name`, or None (also for a name that is no plain file name)."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        return None
    for root in conf_dirs():
        path = root / "dataset" / f"{name}.yaml"
        if path.is_file():
            return path
    return None


def declared_names() -> list[str]:
    """Every declared benchmark, shipped ones first (sorted), then the extra directories'."""
    out: list[str] = []
    for root in conf_dirs():
        out += [p.stem for p in sorted((root / "dataset").glob("*.yaml")) if p.stem not in out]
    return out


_CACHE: dict[tuple[str, float], dict] = {}


def declaration(name: str) -> dict | None:
    """The declaration of `name` as plain data (None when none is found). Raises DeclarationError
    naming the file when it is not a YAML mapping."""
    path = dataset_file(name)
    if path is None:
        return None
    key = (str(path), path.stat().st_mtime)
    if key not in _CACHE:
        import yaml

        try:
            data = yaml.safe_load(files.read_text(path, "dataset declaration"))
        except (yaml.YAMLError, DatasetFormatError) as exc:
            raise DeclarationError(f"{path}: not readable YAML ({exc})") from exc
        if not isinstance(data, dict):
            raise DeclarationError(f"{path}: a dataset declaration must be a mapping")
        _CACHE[key] = data
    return _CACHE[key]


def paper(name: str) -> dict | None:
    """The `paper` block of `name` (its published table layout), or None when it declares none."""
    decl = declaration(name) or {}
    block = decl.get("paper")
    if block is None:
        return None
    if not isinstance(block, dict) or not isinstance(block.get("columns"), list):
        raise DeclarationError(f"{dataset_file(name)}: paper needs a list `columns`")
    return block


def variants(name: str) -> dict[str, str]:
    """The named protocol variants `name` declares ({variant: what it reproduces}; {} when none):
    `dataset.protocol.variant=<variant>` selects one, "" / null is the benchmark's reference rule.
    Raises DeclarationError naming the file when `variants` is not a mapping of names to text."""
    block = (declaration(name) or {}).get("variants")
    if block is None:
        return {}
    if not isinstance(block, dict) or not all(isinstance(k, str) and _NAME.match(k) and isinstance(v, str)
                                              for k, v in block.items()):
        raise DeclarationError(f"{dataset_file(name)}: variants must map variant names to what each reproduces")
    return dict(block)


def published_files(name: str) -> tuple[Path, list[str]] | None:
    """(the directory of `name`'s YAML, the published-row CSVs it declares in paper.published, as
    written); None when it declares none. rvt_bench.leaderboards.paper resolves a relative name
    beside the YAML, else under leaderboards/paper/."""
    files = (paper(name) or {}).get("published")
    if files is None:
        return None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise DeclarationError(f"{dataset_file(name)}: paper.published must be a list of file names")
    return dataset_file(name).parent, files  # type: ignore[union-attr]


@dataclass(frozen=True)
class PredictionLayout:
    """Where a precomputed folder holds one sample's predicted masks.

    name: the layout's name (`model.layout=<name>`); path: a template relative to the folder whose
    fields are sample meta keys and, for one file per frame, `{frame_id}` (each of
    sample.frame_ids); read: "any" (foreground where any channel is nonzero) or "gray" (read as
    cv2 IMREAD_GRAYSCALE, gray values kept). keys: the meta keys the template needs.
    reader: None, or the dotted name of a class in the benchmark's own module that reads a layout
    PNG templates cannot say (masks plus scores in an index file: gRefCOCO): built once per folder
    as ``cls(root, layout)``, called per sample as ``reader(sample) -> Prediction`` (AdapterError
    for a sample it cannot answer); ``path`` is then the index file's name."""

    name: str
    path: str
    read: str = "any"
    reader: str | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(f for f in _fields(self.path) if f != FRAME_FIELD)

    @property
    def per_frame(self) -> bool:
        return FRAME_FIELD in _fields(self.path)

    def names(self, meta: Mapping[str, Any], frame_ids: list[str]) -> list[str]:
        """The relative file names of a sample with `meta` and `frame_ids` (one per frame, or one).
        Raises KeyError for a meta key the sample lacks."""
        values = {k: meta[k] for k in self.keys}
        if self.per_frame:
            return [self.path.format(**values, **{FRAME_FIELD: f}) for f in frame_ids]
        return [self.path.format(**values)]


FILE_ROLES = {
    "json": "a JSON document read whole (annotations, meta, mask dictionaries)",
    "jsonl": "JSON lines, one record per line",
    "pickle": "a pickle read as plain data (rvt_bench.core.safe_pickle)",
    "image": "a picture or a video frame, decoded as RGB",
    "mask_png": "a mask PNG (binary, palette or gray values)",
    "frame_dir": "a directory of one video's frames, named by the data",
    "text": "plain text lines (split lists)",
}
"""The roles a declared file may have (`files` in a declaration): what it is to its loader, and so
which hostile versions of it tests/hostile_kit.py writes."""


@dataclass(frozen=True)
class DeclaredFile:
    """One entry of a declaration's `files`: a glob relative to the dataset root (``{split}`` stands
    for the split; a leading ``../`` for a release whose images lie beside the root, as LLM-Seg40K's)
    and its role (a FILE_ROLES key)."""

    path: str
    role: str

    def pattern(self, split: str) -> str:
        """The glob with ``{split}`` replaced by `split`."""
        return self.path.replace("{split}", str(split))


def declared_files(name: str) -> list[DeclaredFile]:
    """The files benchmark `name` declares that its loader reads (its YAML's `files`: a list of
    {path, role}), in order; [] when it declares none. Raises DeclarationError naming the file for
    an entry without a relative string path or with an unknown role."""
    decl = declaration(name) or {}
    where = f"{dataset_file(name)}: files"
    block = decl.get("files")
    if block is None:
        return []
    if not isinstance(block, list):
        raise DeclarationError(f"{where} must be a list of {{path, role}}")
    out = []
    for k, entry in enumerate(block):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("path"), str) or not entry["path"]:
            raise DeclarationError(f"{where}[{k}]: needs a `path` (a glob relative to the root)")
        if os.path.isabs(entry["path"]):
            raise DeclarationError(f"{where}[{k}]: path {entry['path']!r} must be relative to the root")
        if entry.get("role") not in FILE_ROLES:
            raise DeclarationError(f"{where}[{k}]: role must be one of {sorted(FILE_ROLES)}, got {entry.get('role')!r}")
        out.append(DeclaredFile(entry["path"], entry["role"]))
    return out


def _fields(template: str) -> list[str]:
    return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]


def prediction_layout(name: str, spec: Any, where: str = "") -> PredictionLayout:
    """A PredictionLayout from its declared mapping {path, read}. Raises DeclarationError naming
    `where` when the path is no template of plain fields or `read` is unknown."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("path"), str):
        raise DeclarationError(f"{where}predictions.{name}: needs a `path` template")
    try:
        parsed = list(string.Formatter().parse(spec["path"]))
    except ValueError as exc:
        raise DeclarationError(f"{where}predictions.{name}: path {spec['path']!r}: {exc}") from exc
    for _, field, fmt, conv in parsed:
        if field is not None and (not field.isidentifier() or fmt or conv):
            raise DeclarationError(f"{where}predictions.{name}: path field {{{field}}} must be a plain meta key")
    read = spec.get("read", "any")
    if read not in READS:
        raise DeclarationError(f"{where}predictions.{name}: read must be one of {list(READS)}, got {read!r}")
    reader = spec.get("reader")
    if reader is not None and (not isinstance(reader, str) or not all(p.isidentifier() for p in reader.split("."))
                               or "." not in reader):
        raise DeclarationError(f"{where}predictions.{name}: reader must be a dotted class name, got {reader!r}")
    return PredictionLayout(str(name), spec["path"], read, reader)


def prediction_layouts(name: str | None = None, block: Any = None) -> dict[str, PredictionLayout]:
    """The prediction layouts of benchmark `name` (its YAML's `predictions`), of a given `block`
    (a run's resolved dataset.predictions), or, with neither, of every declared benchmark (the first
    declaration of a layout name wins). Raises DeclarationError for a malformed one."""
    if block is not None:
        return {str(k): prediction_layout(str(k), v) for k, v in dict(block).items()}
    names = [name] if name is not None else declared_names()
    out: dict[str, PredictionLayout] = {}
    for bench in names:
        decl = declaration(bench) or {}
        where = f"{dataset_file(bench)}: "
        for key, spec in (decl.get("predictions") or {}).items():
            out.setdefault(str(key), prediction_layout(str(key), spec, where))
    return out
