"""How numbers are shown: files hold fractions in [0, 1]; printed values are percent ("%") unless
the metric is an unbounded score (CIDEr) or a count. Used by the summary, the report and the
leaderboard renderer alike."""
from __future__ import annotations

import math
from typing import Any

NA = "n/a"


def pct(value: Any, digits: int = 2) -> str:
    """A fraction as a percentage string without the unit ("32.70"); ints as they are; None/NaN "n/a"."""
    if value is None or isinstance(value, str):
        return NA
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return NA if not math.isfinite(value) else f"{100 * value:.{digits}f}"
    return str(value)


# Metrics that are scores, not fractions (pycocoevalcap's CIDEr-D is scaled by 10: 0 to 10).
SCORE_METRICS = ("CIDEr",)


def unit(key: str) -> str:
    """"%" for a fraction metric (printed x100), "score" for unbounded scores (CIDEr), as stored."""
    return "score" if key.rsplit("/", 1)[-1].startswith(SCORE_METRICS) else "%"


def _is_fraction(key: str, value: Any) -> bool:
    # counts (judge_n, n) are integers; every other float metric of the protocols is a fraction
    return isinstance(value, float) and unit(key) == "%" and not key.rsplit("/", 1)[-1].endswith("_n")


def show(key: str, value: Any, digits: int) -> str:
    if _is_fraction(key, value) or value is None:
        return pct(value, digits)
    return f"{value:.{digits + 2}f}" if isinstance(value, float) else str(value)


def ci_text(ci: dict | None, digits: int = 1, key: str = "") -> str:
    """"[low, high]" in the metric's unit (percent for fractions), or "n/a" (reason in metrics.json "ci")."""
    if not ci or ci.get("low") is None:
        return NA
    return f"[{show(key, ci['low'], digits)}, {show(key, ci['high'], digits)}]"
