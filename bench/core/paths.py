"""Where the files shipped with rvt-bench lie: Hydra's config groups (conf/), the bundled demo, and
the git checkout when the code runs from one (None for a wheel install); and where rvt-bench keeps
what it builds outside a run directory (`cache_root`)."""
from __future__ import annotations

import os
from pathlib import Path

import rvt_bench.conf

PACKAGE_DIR = Path(__file__).resolve().parents[1]          # bench/ in a checkout, rvt_bench/ when installed
CONF_DIR = Path(rvt_bench.conf.__file__).resolve().parent  # conf/ in a checkout
CHECKOUT: Path | None = PACKAGE_DIR.parent if (PACKAGE_DIR.parent / "pyproject.toml").is_file() and \
    (PACKAGE_DIR.parent / "run_bench.py").is_file() else None
DEMO_DIR = (CHECKOUT / "demo") if CHECKOUT is not None else PACKAGE_DIR / "demo"


def shipped(rel: str = "") -> str:
    """Absolute path of `rel` among the shipped files (`${repo:demo}` in conf/): the checkout's, or
    the installed package's (where a wheel puts conf/ and demo/)."""
    base = CHECKOUT if CHECKOUT is not None else PACKAGE_DIR
    return str(base / rel)


CACHE_ENV = "RVT_BENCH_CACHE"


def cache_root() -> Path:
    """rvt-bench's user cache (the demo's requantised GGUF weights in gguf/, the judge's verdicts in
    judge/): $RVT_BENCH_CACHE when set and not empty, else $XDG_CACHE_HOME/rvt-bench when that is an
    absolute path (the XDG base directory rule: a relative one is ignored), else ~/.cache/rvt-bench.
    Read at each call, so a setting made before a run applies; the folder is not created here."""
    own = os.environ.get(CACHE_ENV, "")
    if own:
        return Path(own).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "rvt-bench"
    return Path.home() / ".cache" / "rvt-bench"
