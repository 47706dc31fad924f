"""The page of `rvt-bench compare RUN_A RUN_B --html OUT`: the paired table and, per metric that is
a mean of per-sample values, a paired plot of the shared samples (charts.paired_chart). One file,
charts inline, opens from any disk."""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from rvt_bench.core.units import unit


def _cell(key: str, value: float, signed: bool = False) -> str:
    if unit(key) == "score":
        return f"{value:+.3f}" if signed else f"{value:.3f}"
    return f"{100 * value:+.2f} pp" if signed else f"{100 * value:.2f} %"


def write_comparison(result: dict[str, Any], out: str | Path) -> Path:
    """Write the page for a `compare(..., per_sample=True)` result to `out`; returns its path."""
    from rvt_bench.harness.report.charts import paired_chart

    rows, charts = [], []
    for r in result["metrics"]:
        key = html.escape(r["key"])
        if "reason" in r:
            rows.append(f"<tr><td>{key}</td><td colspan='7'>n/a: {html.escape(r['reason'])}</td></tr>")
            continue
        rows.append(f"<tr><td>{key}</td><td>{_cell(r['key'], r['a'])}</td><td>{_cell(r['key'], r['b'])}</td>"
                    f"<td>{_cell(r['key'], r['delta'], True)}</td><td>[{_cell(r['key'], r['low'], True)}, "
                    f"{_cell(r['key'], r['high'], True)}]</td><td>{r['p_value']:.4f}</td><td>{r['n']}</td>"
                    f"<td>{r['wins']} / {r['losses']} / {r['ties']}</td></tr>")
        values = (result.get("per_sample") or {}).get(r["key"])
        if values:
            svg = paired_chart(r["key"], values["a"], values["b"], "run A", "run B", percent=unit(r["key"]) == "%")
            if svg:
                charts.append(f"<section class='chart'>{svg}</section>")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>rvt-bench comparison</title>
<style>body {{ font-family: system-ui, sans-serif; margin: 1em 1.5em; color: #222; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ccc; padding: 1px 6px; white-space: nowrap; }}
.charts {{ display: flex; flex-wrap: wrap; gap: 1em; }} .chart svg {{ max-width: 100%; height: auto; }}
.meta {{ color: #555; font-size: .9em; }}</style></head><body>
<h1>Run B against run A</h1>
<p class="meta">A: {html.escape(result['a'])}<br>B: {html.escape(result['b'])}<br>shared samples: {result['n_shared']}
(only in A: {result['only_a']}, only in B: {result['only_b']}); deltas in percentage points (pp), CIDEr as a score;
95% CI: paired bootstrap; p: paired permutation test; resampled: {html.escape("; ".join(dict.fromkeys(r["resampled"] for r in result["metrics"] if "resampled" in r)) or "n/a")}.</p>
<table id="comparison"><tr><th>metric</th><th>A</th><th>B</th><th>delta B-A</th><th>95% CI of delta</th><th>p</th><th>n</th>
<th>B wins / losses / ties</th></tr>
{''.join(rows)}</table>
<div class="charts">{''.join(charts)}</div>
</body></html>
"""
    out = Path(out)
    out.write_text(page, encoding="utf-8")
    return out
