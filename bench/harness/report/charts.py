"""The charts of report.html, drawn by matplotlib offline as inline SVG (text kept as text, so the
page stays one file that opens from any disk, and its numbers can be searched and read by tests).

Each function returns an `<svg>` element as a string, or None when there is nothing to draw. Values
are shown in the run's units: fractions in percent (axes say "%"), counts as samples.
"""
from __future__ import annotations

import io
import itertools
import re
from typing import Sequence

from rvt_bench.core.printable import printable
from rvt_bench.core.records import AdapterReport
from rvt_bench.harness.report.breakdowns import Bar

WIDTH_IN = 4.0          # a narrow chart's width in inches (72 px per inch in the page: ~290 px)
WIDE_IN = 6.6           # a chart that fills half of a 1366 px wide page with its labels
BAR_COLOR = "#3b6fb6"
BASELINE_COLOR = "#d9480f"
TASK_COLORS = {"segmentation": "#3b6fb6", "grounding": "#2b8a3e", "vqa": "#e67700", "summarization": "#862e9c"}
_ids = itertools.count()


def _figure(height_in: float, width_in: float = WIDTH_IN):
    from matplotlib.figure import Figure

    return Figure(figsize=(width_in, height_in), dpi=72)


def _svg(fig, title: str) -> str:
    """The figure as an inline <svg> with ids made unique in the page, its title as <title>."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "rvt-bench"}):
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight", pad_inches=0.05)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    tag = f"c{next(_ids)}-"
    text = text.replace('id="', f'id="{tag}').replace("url(#", f"url(#{tag}").replace('href="#', f'href="#{tag}')
    # one <title> for the whole chart (screen readers, hover)
    return re.sub(r"(<svg[^>]*>)", lambda m: f"{m.group(1)}<title>{_escape(title)}</title>", text, count=1)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _style(ax) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(labelsize=9)


def funnel_chart(report: AdapterReport) -> str | None:
    """Horizontal bars, one per stage of the model's funnel, top to bottom: samples that reached
    it, labelled with the count and its share of n."""
    if not report.stages:
        return None
    n = max(report.n, 1)
    fig = _figure(0.32 * len(report.stages) + 0.7)
    ax = fig.add_subplot()
    labels = [s.label for s in report.stages]
    counts = [s.reached for s in report.stages]
    y = list(range(len(labels)))[::-1]
    ax.barh(y, counts, color=BAR_COLOR, height=0.65)
    for yy, c in zip(y, counts):
        ax.text(c + 0.01 * n, yy, f"{c} ({100 * c / n:.0f} %)", va="center", fontsize=9)
    ax.set_yticks(y, labels)
    ax.set_xlim(0, n * 1.28)
    ax.set_xlabel(f"samples (of n = {report.n})", fontsize=9)
    _style(ax)
    return _svg(fig, f"funnel of {report.model}: samples that passed each stage")


def breakdown_chart(bars: Sequence[Bar]) -> str | None:
    """Horizontal bars of breakdown values in %, with 95% CI whiskers and the empty-prediction
    baseline as a marker on the same row; each label names the metric and n."""
    if not bars:
        return None
    fig = _figure(0.3 * len(bars) + 1.1, WIDE_IN)
    ax = fig.add_subplot()
    y = list(range(len(bars)))[::-1]
    values = [100 * b.value for b in bars]
    ax.barh(y, values, color=BAR_COLOR, height=0.6, label="value")
    ci = [(yy, b) for yy, b in zip(y, bars) if b.low is not None and b.high is not None]
    if ci:
        # drawn from low to high around the interval's middle: a protocol's value can lie outside
        # its bootstrap interval (LISA's gIoU divides by N + 1e-5; a group of one sample)
        ax.errorbar([50 * (b.low + b.high) for _, b in ci], [yy for yy, _ in ci],
                    xerr=[50 * (b.high - b.low) for _, b in ci],
                    fmt="none", ecolor="#222", elinewidth=1.2, capsize=3, label="95% CI")
    base = [(yy, b) for yy, b in zip(y, bars) if b.baseline is not None]
    if base:
        ax.scatter([100 * b.baseline for _, b in base], [yy for yy, _ in base], marker="D", s=28,
                   color=BASELINE_COLOR, zorder=3, label="empty prediction")
    # subset names and metric keys come from the data: escaped (a lone surrogate made matplotlib raise), "$" as text
    ax.set_yticks(y, [printable(f"{b.label}, {b.key.rpartition('/')[2]} (n={b.n})") for b in bars], fontsize=9, parse_math=False)
    ax.set_xlim(0, 100)
    ax.set_xlabel("%", fontsize=9)
    ax.legend(fontsize=9, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)
    _style(ax)
    return _svg(fig, "breakdowns: value, 95% CI and empty-prediction baseline, in %")


def score_histogram(scores: dict[str, list[float]]) -> str | None:
    """Stacked histogram of per-sample scores in % (10-point bins), one colour per task.
    scores: task -> its samples' scores (fractions)."""
    scores = {t: v for t, v in scores.items() if v}
    if not scores:
        return None
    fig = _figure(2.6)
    ax = fig.add_subplot()
    edges = [10 * k for k in range(11)]
    tasks = sorted(scores)
    ax.hist([[100 * min(max(v, 0.0), 1.0) for v in scores[t]] for t in tasks], bins=edges, stacked=True,
            color=[TASK_COLORS.get(t, "#868e96") for t in tasks], label=[f"{t} ({len(scores[t])})" for t in tasks],
            edgecolor="white")
    ax.set_xlim(0, 100)
    ax.set_xticks(edges)
    ax.set_xlabel("per-sample score (%)", fontsize=9)
    ax.set_ylabel("samples", fontsize=9)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=9, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    _style(ax)
    return _svg(fig, "per-sample scores in %, by task")


LABELLED_IDS = 8  # samples named on a paired plot


def paired_chart(key: str, a: dict[str, float], b: dict[str, float], name_a: str, name_b: str,
                 percent: bool = True) -> str | None:
    """Scatter of per-sample values of two runs over their shared samples (x: A, y: B), with the
    diagonal; points above it are samples B does better on; the LABELLED_IDS samples that changed most
    are named by id. percent: values are fractions shown in %."""
    shared = sorted(set(a) & set(b))
    if not shared:
        return None
    k = 100.0 if percent else 1.0
    xs, ys = [k * a[s] for s in shared], [k * b[s] for s in shared]
    top = max([*xs, *ys, 1e-9]) if not percent else 100.0
    fig = _figure(WIDTH_IN * 0.8)
    ax = fig.add_subplot()
    ax.plot([0, top], [0, top], color="#adb5bd", lw=1)
    wins = sum(y > x for x, y in zip(xs, ys))
    losses = sum(y < x for x, y in zip(xs, ys))
    # samples at 0 or 100 sit on the axes: drawn unclipped, translucent where they pile up
    ax.scatter(xs, ys, s=30, color=BAR_COLOR, alpha=0.6, edgecolors="white", linewidths=0.5, clip_on=False, zorder=3)
    # the samples that changed most, named by id (at most LABELLED_IDS)
    changed = sorted((abs(y - x), s, x, y) for s, x, y in zip(shared, xs, ys) if y != x)[::-1][:LABELLED_IDS]
    # named in a column right of the plot, in the order of their points' heights, evenly spaced (labels
    # beside the points overlapped where points lie close), each joined to its point by a thin line
    for slot, (_, sid, x, y) in enumerate(sorted(changed, key=lambda c: (c[3], c[1]))):
        ax.annotate(printable(sid), (x, y), xycoords="data", textcoords=("axes fraction", "axes fraction"),
                    xytext=(1.04, (slot + 0.5) / max(len(changed), 1)), fontsize=6, color="#495057", va="center",
                    zorder=4, parse_math=False, annotation_clip=False,
                    arrowprops={"arrowstyle": "-", "color": "#ced4da", "lw": 0.5, "shrinkA": 0, "shrinkB": 2})
    unit = " (%)" if percent else ""
    # run names and metric keys are data (metrics.json): control characters, format characters
    # (\u202e) and lone surrogates (on which matplotlib's font code raises) as escapes, "$" as text
    ax.set_xlabel(f"{printable(name_a)}{unit}", fontsize=9, parse_math=False)
    ax.set_ylabel(f"{printable(name_b)}{unit}", fontsize=9, parse_math=False)
    pad = 0.03 * top
    ax.set_xlim(-pad, top + pad)
    ax.set_ylim(-pad, top + pad)
    ax.set_title(f"{printable(key)}: B better on {wins}, worse on {losses}, tied on {len(shared) - wins - losses} "
                 f"of {len(shared)}", fontsize=9, parse_math=False)
    _style(ax)
    return _svg(fig, f"{printable(key)} per sample: run A against run B")
