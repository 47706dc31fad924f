"""Results tables in each benchmark's published layout, in markdown or LaTeX (booktabs).

    paper_table(runs, fmt="markdown" | "latex", published=None) -> str

`runs`: metrics.json bodies (or RunMetrics, or leaderboard rows: anything `cells_of` reads) of one
benchmark; several splits of one model share a row (ReasonSeg val + test). `published`: rows of
leaderboards/paper/*.csv (rvt_bench.leaderboards.paper) shown under the runs with their mark
(verified / unverified) and source (docs/analysis.md "Paper tables").

The layout is data: each benchmark declares it in conf/dataset/<name>.yaml `paper` (caption,
columns {head, label | metrics, cell, split}, lines for long layouts, subsets;
rvt_bench.core.benchmark); this module knows no benchmark. A benchmark without one gets the
run's headline metrics.

Every value is in its column's unit: percent for fractions (files hold fractions), the score for
CIDEr; a published value printed as a fraction is shown as the percentage it equals (exact
decimal arithmetic), one whose unit does not fit the column is listed under the table instead.
A run's cell shows its 95% bootstrap interval when metrics.json has one ("ci").
"""
from __future__ import annotations

import json

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Iterable, Mapping, Sequence

from rvt_bench.core import benchmark
from rvt_bench.core.printable import printable
from rvt_bench.core.units import unit
from rvt_bench.leaderboards.paper import evidence
from rvt_bench.metrics.protocols.base import group_key

NA = "–"
# a published row's subset -> its cell prefix, for every layout; a benchmark adds its own (paper.subsets)
_SUBSETS = {"overall": "", "all": ""}
FORMATS = ("markdown", "latex")


@dataclass(frozen=True)
class Column:
    """One value column. head: the group header ("Referring", "val", "Level 1"); label: the metric
    as printed ("J&F"); cell: the cell key it reads (`cells_of`), "{metric}" filled per line in
    long layouts; split: the run split that supplies it (None: any)."""

    head: str
    label: str
    cell: str
    split: str | None = None


@dataclass(frozen=True)
class Layout:
    """A benchmark's table. lines: None = one line per method (wide); else the (task, metric) lines
    each method gets (long layouts: rvtbench, jitbench), "{metric}" in a column's cell replaced by
    the line's cell prefix + metric."""

    dataset: str
    caption: str
    columns: tuple[Column, ...]
    lines: tuple[tuple[str, str], ...] | None = None
    subsets: Mapping[str, str] = field(default_factory=lambda: dict(_SUBSETS))
    note: str = ""  # what the benchmark says under its caption (which published rows its columns can hold)


def declared_layout(dataset: str) -> Layout | None:
    """The paper layout `dataset` declares (conf/dataset/<name>.yaml `paper`, read by
    rvt_bench.core.benchmark), or None when it declares none. A column with `metrics` stands for one
    column per metric, "{metric}" in its cell filled. Raises DeclarationError for a malformed block."""
    block = benchmark.paper(dataset)
    if block is None:
        return None
    where = f"{benchmark.dataset_file(dataset)}: paper"
    cols: list[Column] = []
    for spec in block["columns"]:
        if not isinstance(spec, Mapping) or not isinstance(spec.get("cell"), str):
            raise benchmark.DeclarationError(f"{where}.columns: each column needs a `cell`, got {spec!r}")
        head, split = str(spec.get("head") or ""), spec.get("split")
        split = None if split is None else str(split)
        if "metrics" in spec:
            cols += [Column(head, str(m), spec["cell"].format(metric=m), split) for m in spec["metrics"]]
        else:
            cols.append(Column(head, str(spec.get("label") or ""), spec["cell"], split))
    lines = block.get("lines")
    subsets = {**_SUBSETS, **{str(k).lower(): str(v) for k, v in (block.get("subsets") or {}).items()}}
    return Layout(dataset, str(block.get("caption") or dataset), tuple(cols),
                  None if lines is None else tuple((str(t), str(m)) for t, m in lines), subsets,
                  " ".join(str(block.get("note") or "").split()))


def has_layout(dataset: Any) -> bool:
    """Whether `dataset` declares a paper layout (the summary and report show its table then)."""
    return isinstance(dataset, str) and declared_layout(dataset) is not None


def layout(dataset: str, runs: list[Mapping[str, Any]] | None = None) -> Layout:
    """The layout `dataset` declares; a benchmark without one gets its runs' headline metrics as columns."""
    declared = declared_layout(dataset)
    if declared is not None:
        return declared
    heads: list[str] = []
    for run in runs or []:
        heads += [k for k in _headlines(run) if k not in heads]
    return Layout(dataset, f"{dataset}: headline metrics", tuple(Column("", k, k) for k in heads))


def _headlines(run: Mapping[str, Any]) -> list[str]:
    """A run's headline metrics: a metrics.json body lists them under "headline"; a leaderboard row
    holds the list JSON-encoded under "headlines" and the first of them under "headline"."""
    for key in ("headlines", "headline"):
        value = run.get(key)
        if isinstance(value, str) and value.startswith("["):
            try:
                value = json.loads(value)
            except ValueError:
                continue
        if isinstance(value, str) and value:
            return [value]
        if isinstance(value, (list, tuple)) and value:
            return [str(v) for v in value]
    return []


def cell_keys(dataset: str, body: Mapping[str, Any]) -> list[str]:
    """The cell keys of `dataset`'s layout that a run (its metrics.json body) has a value for: what
    a leaderboard row keeps so that `render` can draw the table, and what gets an interval."""
    cells = cells_of(body)
    lay = layout(dataset, [body])
    out = []
    for line in lay.lines or [None]:
        for col in lay.columns:
            if col.split is not None and body.get("split") != col.split:
                continue
            key = _resolve(_cell(col, line), cells)
            if key in cells and key not in out:
                out.append(key)
    return out


def cells_of(run: Any) -> dict[str, Any]:
    """A run's values by cell key: metrics.json "metrics" as they are ("referring/J&F",
    "segmentation/J") and every breakdown value as "<group>=<value>/<metric>"
    ("is_sentence=false/gIoU", "segmentation/level=1/J"). A leaderboard row (a flat dict whose
    columns are cell keys) is returned as it is."""
    body = run.to_json() if hasattr(run, "to_json") else dict(run)
    if "metrics" not in body or not isinstance(body["metrics"], Mapping):
        return body
    out = dict(body["metrics"])
    for group, rows in (body.get("breakdown") or {}).items():
        if not isinstance(rows, Mapping):
            continue
        for name, values in rows.items():
            if isinstance(values, Mapping):
                out.update({f"{group}={name}/{k}": v for k, v in values.items() if k != "n" and not k.endswith("_n")})
    return out


def _cell(col: Column, line: tuple[str, str] | None) -> str:
    if line is None:
        return col.cell
    task, metric = line
    if "{task}" in col.cell:
        return col.cell.format(task=task, metric=metric)
    return col.cell.format(metric=metric)


# the tag of a metric that a protocol variant computes under another rule than the reference's
# ("J&F[failed-zero]"): never shown in the reference's column
VARIANT_TAG = re.compile(r"\[failed-[^\]]*\]")


def _resolve(key: str, cells: Mapping[str, Any]) -> str:
    """`key`, or the tagged key the run reports for it ("R" -> "R[binarized]", marked not comparable);
    never a variant's key (VARIANT_TAG: "J&F[failed-zero]" is not the reference's J&F)."""
    if key in cells:
        return key
    tagged = [k for k in cells if re.sub(r"\[[^\]]*\]", "", k) == key and not VARIANT_TAG.search(k)]
    return tagged[0] if tagged else key


def companion_keys(body: Mapping[str, Any]) -> list[str]:
    """The metrics of a metrics.json body that are its headline's under the protocol's other rule
    (a run writes both numbers: "J&F[failed-zero]" beside the headline "J&F", "J&F" beside
    "J&F[failed-zero]"), in the order "metrics" holds them; [] for a protocol without variants. A
    leaderboard row has a column for each, with its interval."""
    values = body.get("metrics") if isinstance(body.get("metrics"), Mapping) else {}
    headline = [k for k in _headlines(body) if k in values]
    bases = {re.sub(r"\[[^\]]*\]", "", k) for k in headline}
    return [k for k in values if k not in headline and "/" not in k and re.sub(r"\[[^\]]*\]", "", k) in bases
            and (VARIANT_TAG.search(k) or any(VARIANT_TAG.search(h) for h in headline))]




def variant_mark(run: Mapping[str, Any]) -> str:
    """The mark every table puts on a run of a protocol variant (" [variant: failed=zero]"), "" for
    the reference's protocol: its line is apart from the model's reference runs, and its headline is
    not the number the reference prints."""
    variant = variant_of(run)
    return f" [variant: {variant}]" if variant else ""


@dataclass
class Line:
    """One line of the table: the method, its values by column index (text in the column's unit),
    and where it comes from."""

    method: str
    values: dict[int, str] = field(default_factory=dict)
    source: str = ""
    mark: str = ""        # "" for runs; "verified" / "unverified" for published rows
    what: str = ""        # the metric of a long layout's line ("J", "m_vIoU"), with its task
    notes: dict[int, str] = field(default_factory=dict)  # column index -> why its value is not comparable
    evidence: str = ""    # a published row's evidence level (rvt_bench.leaderboards.paper.evidence)
    variant: str = ""     # the protocol's named variant it was scored under ("" = the benchmark's reference rule)


def variant_of(row: Mapping[str, Any]) -> str:
    """The protocol variant a run's headline follows (metrics.json "variant", a leaderboard row's
    `variant` column: "failed=zero", a named variant such as "segzero"; else metrics.json
    protocol_variants["variant"]) or a published row's (its `variant` column); "" for the
    benchmark's reference rule or a row written before the column existed."""
    if isinstance(row.get("variant"), str) and row["variant"].strip():
        return row["variant"].strip()
    found = row.get("protocol_variants")
    if isinstance(found, str):
        import json

        try:
            found = json.loads(found)
        except ValueError:
            found = None
    return str(found.get("variant") or "") if isinstance(found, Mapping) else ""


def _variant_mark(line: Line) -> str:
    return f" [variant: {line.variant}]" if line.variant else ""


NOT_COMPARABLE = "‡"  # the mark of a run's value its own warning calls not comparable to published ones


def not_comparable(run: Mapping[str, Any]) -> dict[str, str]:
    """{metric key: why, and the comparable variant} of a run (metrics.json "not_comparable", a
    leaderboard row's JSON column); {} when none."""
    found = run.get("not_comparable")
    if isinstance(found, str) and found.startswith("{"):
        import json

        found = json.loads(found)
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, Mapping) else {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _show(key: str, value: float, digits: int) -> str:
    return f"{100 * value:.{digits}f}" if unit(key) == "%" else f"{value:.{digits + 2}f}"


def _interval(run: Mapping[str, Any], key: str) -> tuple[float, float] | None:
    ci = (run.get("ci") or {}).get(key) if isinstance(run.get("ci"), Mapping) else None
    if isinstance(ci, Mapping) and _number(ci.get("low")) is not None and _number(ci.get("high")) is not None:
        return float(ci["low"]), float(ci["high"])
    low, high = _number(run.get(f"{key} ci_low")), _number(run.get(f"{key} ci_high"))  # a leaderboard row
    return (low, high) if low is not None and high is not None else None


def _run_label(run: Mapping[str, Any]) -> str:
    label = str(run.get("label") or run.get("model") or "run")
    if variant_mark(run) and not label.endswith(variant_mark(run)):
        label += variant_mark(run)
    source = run.get("data_source")
    if isinstance(source, str) and source.startswith("{"):  # a leaderboard row keeps it as JSON
        import json

        source = json.loads(source)
    if isinstance(source, Mapping) and source.get("label"):
        label += f" [{source['label']}]"
    return label


def _run_lines(lay: Layout, runs: list[Mapping[str, Any]], digits: int, with_ci: bool) -> list[Line]:
    """Runs merged by label (splits of one model share a line); a label with two runs of one split
    keeps them apart, named by run."""
    by_label: dict[str, list[Mapping[str, Any]]] = {}
    for run in runs:
        by_label.setdefault(_run_label(run), []).append(run)
    groups: list[tuple[str, list[Mapping[str, Any]]]] = []
    for label, members in by_label.items():
        splits = [m.get("split") for m in members]
        if len(set(splits)) == len(splits):
            groups.append((label, members))
        else:
            groups += [(f"{label} ({m.get('run_name')})", [m]) for m in members]
    out = []
    for label, members in groups:
        for line in lay.lines or [None]:
            # a run's variant is in its label already (_run_label: variant_mark); Line.variant marks published rows
            row = Line(label, source=", ".join(f"run {m.get('run_name')}" for m in members if m.get("run_name")),
                       what=_what(line))
            for i, col in enumerate(lay.columns):
                for m in members:
                    if col.split is not None and m.get("split") != col.split:
                        continue
                    cells = cells_of(m)
                    key = _resolve(_cell(col, line), cells)
                    value = _number(cells.get(key))
                    if value is None:
                        continue
                    ci = _interval(m, key) if with_ci else None
                    row.values[i] = _show(key, value, digits) + ("" if ci is None else
                                                                  f" [{_show(key, ci[0], digits)}, {_show(key, ci[1], digits)}]")
                    why = not_comparable(m).get(key)
                    if why:
                        row.notes[i] = f"{key}: {why}"
                    break
            if row.values or line is None:
                out.append(row)
    return out


def _what(line: tuple[str, str] | None) -> str:
    return "" if line is None else f"{line[0]} {line[1]}"


# --- published rows ---------------------------------------------------------------------------

_LEVEL = re.compile(r"^(?:video (?P<task>segmentation|grounding|vqa|summarization|summary) )?level (?P<level>\d+)$")


def published_cell(row: Mapping[str, str], lay: Layout) -> tuple[str, tuple[str, str] | None] | None:
    """(cell key, long-layout line or None) a published row fills in `lay`, or None when it is no
    cell of the layout (an ablation, a category x level value, a latency)."""
    subset, metric = row.get("subset", "").strip().lower(), row.get("metric", "").strip()
    if lay.lines is not None:
        m = _LEVEL.match(subset)
        if m is None:
            return None
        task = {"summary": "summarization"}.get(m.group("task") or "segmentation", m.group("task") or "segmentation")
        line = (task, metric)
        return (f"{task}/level={m.group('level')}/{metric}", line) if line in lay.lines else None
    if subset not in lay.subsets:
        return None
    key = lay.subsets[subset] + metric
    split = (row.get("split") or "").split(" ", 1)[0] or None
    for col in lay.columns:  # a value goes only where its source says: an unstated split fits no split's column
        if col.cell == key and (col.split is None or col.split == split):
            return key, None
    return None


def outside_reason(row: Mapping[str, str], lay: Layout) -> str:
    """Why a published row is listed under `lay`'s table, not in it: "ablation", "protocol not
    stated" or "split not stated" (its subset or split says so, or it names no split where the
    columns are per split), "split not in this table", "unit does not fit its column", "metric not
    in this table", else "breakdown not in this table"."""
    subset, split = row.get("subset", "").lower(), (row.get("split") or "").strip()
    if row.get("setting"):
        return "ablation"
    if "protocol not stated" in subset or "protocol not stated" in split.lower():
        return "protocol not stated"
    split_columns = any(col.split is not None for col in lay.columns)
    if "split not stated" in split.lower() or (split_columns and not split):
        return "split not stated"
    placed = published_cell(row, lay)
    if placed is not None:
        return "unit does not fit its column"
    if lay.lines is None and subset in lay.subsets:
        key = lay.subsets[subset] + row.get("metric", "").strip()
        if any(col.cell == key for col in lay.columns):
            return "split not in this table"
        return "metric not in this table"
    return "breakdown not in this table"


def published_value(row: Mapping[str, str], key: str) -> str | None:
    """The printed value in the unit of `key`'s column, or None when its unit does not fit:
    percent as printed; a fraction as the percentage it equals (decimal arithmetic: "0.837" ->
    "83.7"); a score only in a score column."""
    printed, kind = row["value_printed"].strip(), row.get("unit", "").strip()
    if unit(key) == "%":
        if kind == "percent":
            return printed
        if kind == "fraction":
            digits = len(printed.split(".", 1)[1]) if "." in printed else 0
            return str((Decimal(printed) * 100).quantize(Decimal(1).scaleb(-max(digits - 2, 0))))
        return None
    return printed if kind == "score" else None


def _published_lines(lay: Layout, published: list[Mapping[str, str]]) -> tuple[list[Line], list[Mapping[str, str]]]:
    """Lines of the published rows (one per paper, table and model) and the rows outside the layout."""
    lines: dict[tuple, Line] = {}
    outside = []
    for row in published:
        placed = published_cell(row, lay)
        value = published_value(row, placed[0]) if placed else None
        if placed is None or value is None:
            outside.append(row)
            continue
        key, line = placed
        ident = (row["paper_id"], row["model"], row["status"], _what(line), variant_of(row))
        target = lines.setdefault(ident, Line(row["model"], mark=row["status"], what=_what(line), evidence=evidence(row),
                                              variant=variant_of(row)))
        table = row["table"].split(" (", 1)[0]
        table = "(table not known)" if table == "unknown" else table
        target.source = (f"{target.source}; {table}" if target.source and table not in target.source
                         else target.source or f"{row['paper_id']} {table}")
        for i, col in enumerate(lay.columns):
            split = (row.get("split") or "").split(" ", 1)[0] or None
            if _cell(col, line) == key and (col.split is None or col.split == split):
                target.values[i] = value
    # verified rows first, then as the files list them; a method two papers print alike shown once
    return _merged(sorted(lines.values(), key=lambda line: line.mark != "verified"), lay), outside


def _merged(lines: list[Line], lay: Layout) -> list[Line]:
    """`lines` with a method that two papers print with the same values shown once (LISA's Table 2
    and Seg-Zero's Table 10 both print LAVT, ReLA and LISA-7B): a later line of the same method,
    mark and metric whose columns are all among an earlier line's (or the other way round), each
    with the same value, joins it, its source added ("...; arXiv:2503.06520 Table 10 prints 3 of
    these values, the same"). Lines that differ in any shared value stay apart."""
    out: list[Line] = []
    for line in lines:
        for kept in out:
            if (kept.method, kept.mark, kept.what) != (line.method, line.mark, line.what):
                continue
            small, big = (line, kept) if set(line.values) <= set(kept.values) else (kept, line)
            if not set(small.values) <= set(big.values) or any(big.values[i] != v for i, v in small.values.items()):
                continue
            what = "these values" if len(small.values) == len(big.values) else f"{len(small.values)} of these values"
            kept.source = f"{big.source}; {small.source} prints {what}, the same"
            kept.values = dict(big.values)
            kept.evidence = "; ".join(dict.fromkeys(e for e in (big.evidence, small.evidence) if e))
            break
        else:
            out.append(line)
    return out


# --- rendering --------------------------------------------------------------------------------

def paper_table(runs: Any, fmt: str = "markdown", published: list[Mapping[str, str]] | None = None,
                digits: int = 1, with_ci: bool = True, dataset: str | None = None) -> str:
    """The table of `runs` (one metrics.json body, RunMetrics or leaderboard row, or a list of them,
    all of one benchmark) in the benchmark's layout (module docstring), with `published` rows
    below the runs; `dataset` names the benchmark when neither runs nor published rows do (its
    empty layout). fmt: "markdown" or "latex" (booktabs: \\toprule, \\midrule, \\bottomrule, one
    \\cmidrule per header group). Raises ValueError for another fmt or runs of several benchmarks."""
    if fmt not in FORMATS:
        raise ValueError(f"table format must be one of {FORMATS}, got {fmt!r}")
    runs = [runs] if isinstance(runs, Mapping) or hasattr(runs, "to_json") else list(runs or [])
    bodies = [r.to_json() if hasattr(r, "to_json") else dict(r) for r in runs]
    datasets = {str(b.get("dataset")) for b in bodies}
    if len(datasets) > 1:
        raise ValueError(f"one table per benchmark: got runs of {sorted(datasets)}")
    dataset = datasets.pop() if datasets else dataset or str((published or [{}])[0].get("dataset", ""))
    lay = layout(dataset, bodies)
    run_lines = _run_lines(lay, bodies, digits, with_ci)
    # a row of a paper's ablation tables (its `setting`, leaderboards/paper/README.md) is shown apart
    published = list(published or [])
    paper_lines, outside = _published_lines(lay, [r for r in published if not r.get("setting")])
    ablation_lines, ablation_outside = _published_lines(lay, [r for r in published if r.get("setting")])
    render = _latex if fmt == "latex" else _markdown
    return render(lay, run_lines, paper_lines, outside + ablation_outside, ablation_lines)


def _heads(lay: Layout) -> list[tuple[str, int]]:
    """Consecutive header groups with their widths."""
    out: list[tuple[str, int]] = []
    for col in lay.columns:
        if out and out[-1][0] == col.head:
            out[-1] = (col.head, out[-1][1] + 1)
        else:
            out.append((col.head, 1))
    return out


def _col_title(col: Column) -> str:
    return " ".join(p for p in (col.head, col.label) if p)


def _unit_note(lay: Layout) -> str:
    """The units line; CIDEr named only where the table has a CIDEr value (not a percentage)."""
    names = [c.label + " " + c.cell for c in lay.columns] + [" ".join(line) for line in lay.lines or ()]
    cider = " (CIDEr as its score)" if any("cider" in n.lower() for n in names) else ""
    return f"Values in %{cider}; runs: value [95% bootstrap CI]."


_BREAKS = re.compile("[\t\n\v\f\r\x1c-\x1e\x85\u2028\u2029]+")


def markdown_cell(text: Any) -> str:
    """`text` as one markdown table cell: line breaks as spaces, "|" escaped (a cell of a published
    row or a run name cannot end its row or add one), other control characters as escapes."""
    return printable(_BREAKS.sub(" ", str(text))).replace("|", "\\|")


def _markdown_row(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(markdown_cell(c) for c in cells) + " |"


def _markdown_line(lay: Layout, line: Line) -> str:
    method = (line.method if not line.mark else f"{line.method} (paper, {line.mark})") + _variant_mark(line)
    cells = [line.values.get(i, NA) + (f" {NOT_COMPARABLE}" if i in line.notes else "") for i in range(len(lay.columns))]
    source = line.source + (f" ({line.evidence})" if line.evidence else "")
    return _markdown_row([method, *([line.what] if lay.lines is not None else []), *cells, source])


def _markdown(lay: Layout, runs: list[Line], paper: list[Line], outside: list[Mapping[str, str]],
              ablations: list[Line] = ()) -> str:
    long = lay.lines is not None
    head = ["method", *(["metric"] if long else []), *(_col_title(c) for c in lay.columns), "source"]
    rule = "|---" + "|---" * (len(head) - 2) + "|---|"
    lines = [f"**{lay.caption}.** {_unit_note(lay)} Published rows: as printed in their source, "
             "marked verified (checked against the paper's text) or unverified, with how the value is known "
             "(paper text; authors' README or code; secondary source, named; digest only). A value sits only in "
             "the column its source states (a row whose split or protocol is not stated is listed below the table). "
             "[variant: name]: scored under the benchmark's protocol variant of that name (its YAML `variants`), "
             "not its reference rule."]
    if lay.note:
        lines.append(printable(lay.note))
    if outside and not paper and not ablations:
        lines.append(f"No published row fills these columns: all {len(outside)} are listed below the table "
                     f"({_reason_counts(lay, outside)}).")
    lines += ["", _markdown_row(head), rule]
    lines += [_markdown_line(lay, line) for line in runs + paper]
    notes = _comparability_notes(runs)
    if notes:
        lines += [""] + [printable(_BREAKS.sub(" ", f"{NOT_COMPARABLE} {line.method}, {note}: not comparable to the published values."))
                         for line, note in notes]
    if ablations:
        lines += ["", "Published rows of ablation tables (a paper's variants in its ablation setting, not its main "
                      "result; not comparable to the rows above):", "", _markdown_row(head), rule]
        lines += [_markdown_line(lay, line) for line in ablations]
    if outside:
        lines += ["", f"Published rows outside this layout ({_reason_counts(lay, outside)}):", "",
                  "| model | paper | table | split | subset | metric | value as printed | unit | mark | why not in the table |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        lines += [_markdown_row([r['model'], r['paper_id'], r['table'], r.get('split', ''), r['subset'], r['metric'],
                                 r['value_printed'], r.get('unit', ''), f"{r['status']}{', ablation' if r.get('setting') else ''}",
                                 outside_reason(r, lay)])
                  for r in outside]
    return "\n".join(lines)


def _reason_counts(lay: Layout, outside: list[Mapping[str, str]]) -> str:
    """"protocol not stated: 4; ablation: 2": why the rows under the table are there, with counts."""
    counts: dict[str, int] = {}
    for row in outside:
        reason = outside_reason(row, lay)
        counts[reason] = counts.get(reason, 0) + 1
    return "; ".join(f"{reason}: {n}" for reason, n in counts.items())


_LATEX_SPECIAL = {"&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", "$": r"\$", "{": r"\{", "}": r"\}",
                  "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}"}


def latex_escape(text: str) -> str:
    """`text` with LaTeX's special characters escaped (J&F -> J\\&F), line breaks as spaces (a blank
    line inside a cell ends the tabular's paragraph) and other control characters as their escapes."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in printable(_BREAKS.sub(" ", str(text))))


def _latex_value(text: str) -> str:
    if " [" in text:  # "52.3 [50.1, 54.6]": the interval small, after the value
        value, ci = text.split(" [", 1)
        return f"{value}\\,{{\\scriptsize[{ci}}}"
    return latex_escape(text)


def _comparability_notes(runs: list[Line]) -> list[tuple[Line, str]]:
    """(line, "<key>: why; comparable: <variant>") for every marked cell of the runs, once each."""
    out: list[tuple[Line, str]] = []
    for line in runs:
        for i in sorted(line.notes):
            if (line, line.notes[i]) not in out:
                out.append((line, line.notes[i]))
    return out


def _latex(lay: Layout, runs: list[Line], paper: list[Line], outside: list[Mapping[str, str]],
           ablations: list[Line] = ()) -> str:
    long = lay.lines is not None
    lead = 2 if long else 1
    spec = "l" * lead + "c" * len(lay.columns) + "l"
    out = ["\\begin{table}[t]", "\\centering", "\\small", f"\\begin{{tabular}}{{{spec}}}", "\\toprule"]
    heads = _heads(lay)
    if any(h for h, _ in heads) and any(c.label for c in lay.columns):
        row, rules, at = [""] * lead, [], lead + 1
        for head, width in heads:
            row.append(f"\\multicolumn{{{width}}}{{c}}{{{latex_escape(head)}}}" if width > 1 else latex_escape(head))
            if head:
                rules.append(f"\\cmidrule(lr){{{at}-{at + width - 1}}}")
            at += width
        out.append(" & ".join(row + [""]) + " \\\\")
        out.append(" ".join(rules))
        sub = [latex_escape(c.label) for c in lay.columns]
    else:
        sub = [latex_escape(_col_title(c)) for c in lay.columns]
    out.append(" & ".join(["Method", *(["Metric"] if long else []), *sub, "Source"]) + " \\\\")
    out.append("\\midrule")
    for block in (runs, paper):
        if not block:
            continue
        if block is paper and runs:
            out.append("\\midrule")
        for line in block:
            method = latex_escape(line.method + _variant_mark(line)) + ("" if line.mark != "unverified" else "$^\\dagger$")
            cells = [(_latex_value(line.values[i]) + ("$^\\ddagger$" if i in line.notes else "")) if i in line.values
                     else "--" for i in range(len(lay.columns))]
            source = latex_escape(line.source + (f" ({line.mark}; {line.evidence})" if line.mark else ""))
            out.append(" & ".join([method, *([latex_escape(line.what)] if long else []), *cells, source]) + " \\\\")
    out += ["\\bottomrule", "\\end{tabular}"]
    note = latex_escape(f"{lay.caption}. {_unit_note(lay)}")
    for line, text in _comparability_notes(runs):
        note += f" $^\\ddagger${latex_escape(line.method)}, {latex_escape(text)}: not comparable to the published values."
    if any(line.mark == "unverified" for line in paper):
        note += " $^\\dagger$Published value not checked against the paper's text (transcribed from a secondary source)."
    out += [f"\\caption{{{note}}}", "\\end{table}"]
    if lay.note:
        out.append(f"% {printable(lay.note)}")
    if outside:
        out.append(f"% {len(outside)} published rows outside this layout ({_reason_counts(lay, outside)}): "
                   f"rvt-bench render {lay.dataset} (markdown) lists them")
    if ablations:
        out.append(f"% {len(ablations)} published rows of ablation tables left out: rvt-bench render {lay.dataset} (markdown) lists them")
    return "\n".join(out)


def group_cell(group: str, value: Any, metric: str) -> str:
    """The cell key of a breakdown value: group_cell("is_sentence", False, "gIoU") -> "is_sentence=false/gIoU"."""
    return f"{group}={group_key(value)}/{metric}"
