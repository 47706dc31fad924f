"""The page of `rvt-bench compare RUN_A RUN_B [RUN_C ...] --html OUT`: per run against the baseline,
the paired table, the samples that flipped and, per metric that is a mean of per-sample values, a
paired plot of the shared samples (charts.paired_chart). One file for all runs, charts inline, opens
from any disk."""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from rvt_bench.core.printable import printable_text
from rvt_bench.core.units import unit
from rvt_bench.harness.compare import caveat, samples_lines
from rvt_bench.harness.view import resampling_groups


def _h(text: Any) -> str:
    """Data (run names, sample ids, metric keys) as page text: HTML-escaped, its control characters
    visible as escapes (rvt_bench.core.printable.printable_text), as in report.html."""
    return html.escape(printable_text(text))


def _cell(key: str, value: float, signed: bool = False) -> str:
    if unit(key) == "score":
        return f"{value:+.3f}" if signed else f"{value:.3f}"
    return f"{100 * value:+.2f} pp" if signed else f"{100 * value:.2f} %"


def _score(value: Any) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _section(result: dict[str, Any], anchor: str) -> str:
    """One run against the baseline: the paired table, the flipped samples and the paired plots."""
    from rvt_bench.harness.report.charts import paired_chart

    name_a, name_b = result.get("name_a", "run A"), result.get("name_b", "run B")
    rows, charts = [], []
    for r in result["metrics"]:
        key = _h(r["key"])
        if "reason" in r:
            rows.append(f"<tr><td>{key}</td><td colspan='7'>n/a: {_h(r['reason'])}</td></tr>")
            continue
        rows.append(f"<tr><td>{key}</td><td>{_cell(r['key'], r['a'])}</td><td>{_cell(r['key'], r['b'])}</td>"
                    f"<td>{_cell(r['key'], r['delta'], True)}</td><td>[{_cell(r['key'], r['low'], True)}, "
                    f"{_cell(r['key'], r['high'], True)}]</td><td>{r['p_value']:.4f}</td><td>{r['n']}</td>"
                    f"<td>{r['wins']} / {r['losses']} / {r['ties']}</td></tr>")
        values = (result.get("per_sample") or {}).get(r["key"])
        if values:
            svg = paired_chart(r["key"], values["a"], values["b"], name_a, name_b, percent=unit(r["key"]) == "%")
            if svg:
                charts.append(f"<section class='chart'>{svg}</section>")
    flips = result.get("flips") or []
    flip_rows = "".join(
        f"<tr><td>{_h(f['sample_id'])}</td><td>{'right -> wrong' if f['a_correct'] else 'wrong -> right'}</td>"
        f"<td class='num'>{_score(f['a'])}</td><td class='num'>{_score(f['b'])}</td></tr>" for f in flips)
    groups = resampling_groups([(r["key"], r.get("resampled", "")) for r in result["metrics"]])
    methods = "<ul class='meta resampled'>" + ("".join(f"<li>{_h(', '.join(keys))}: {_h(how)}</li>"
                                                       for keys, how in groups) or "<li>n/a</li>") + "</ul>"
    partial = f"<br><b>PARTIAL</b>: {_h(result['partial'])}" if result.get("partial") else ""
    cautions = list(dict.fromkeys(f"{r['key']}: {caveat(r)}" for r in result["metrics"] if "reason" not in r and caveat(r)))
    notes = ("<ul class='meta warn caveats'>" + "".join(f"<li>{_h(c)}</li>" for c in cautions) + "</ul>") if cautions else ""
    return f"""<section id="{anchor}"><h2>{_h(name_b)} against {_h(name_a)}</h2>
<p class="meta">A: {_h(name_a)}: {_h(result['a'])}<br>B: {_h(name_b)}: {_h(result['b'])}{partial}<br>
{'<br>'.join(_h(line.strip()) for line in samples_lines(result))}<br>deltas in percentage
points (pp), CIDEr as a score; 95% CI: paired percentile bootstrap; p: paired permutation test; resampled (bootstrap draws and permutation swaps):</p>{methods}{notes}
<table class="comparison"><tr><th>metric</th><th>A</th><th>B</th><th>delta B-A</th><th>95% CI of delta</th><th>p</th><th>n</th>
<th>B wins / losses / ties</th></tr>
{''.join(rows)}</table>
<h3>Samples that flipped ({len(flips)})</h3>
<table class="flips"><tr><th>sample</th><th>A -> B</th><th>score A</th><th>score B</th></tr>
{flip_rows or "<tr><td colspan='4'>none: every shared sample is right or wrong in both runs</td></tr>"}</table>
<div class="charts">{''.join(charts)}</div></section>"""


def write_many(results: list[dict[str, Any]], out: str | Path) -> Path:
    """Write ONE page for `compare_many(..., per_sample=True)` results (each run against the
    baseline, one section each) to `out`; returns its path."""
    title = "rvt-bench comparison: " + ", ".join(
        [results[0].get("name_a", "baseline"), *(r.get("name_b", "run") for r in results)])
    sections = "".join(_section(r, f"run{k}") for k, r in enumerate(results, 1))
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{_h(title)}</title>
<style>body {{ font-family: system-ui, sans-serif; margin: 1em 1.5em; color: #222; }}
table {{ border-collapse: collapse; margin-bottom: .8em; }} td, th {{ border: 1px solid #ccc; padding: 1px 6px; white-space: nowrap; }}
.num {{ text-align: right; }}
.charts {{ display: flex; flex-wrap: wrap; gap: 1em; }} .chart svg {{ max-width: 100%; height: auto; }}
.meta {{ color: #555; font-size: .9em; }} .warn {{ color: #8a5300; }}</style></head><body>
<h1>{_h(title)}</h1>
{sections}
</body></html>
"""
    out = Path(out)
    out.write_text(page, encoding="utf-8")
    return out


def write_comparison(result: dict[str, Any], out: str | Path) -> Path:
    """Write the page for one `compare(..., per_sample=True)` result to `out`; returns its path."""
    return write_many([result], out)
