"""Where the files shipped with rvt-bench lie: Hydra's config groups (conf/), the bundled demo, and
the git checkout when the code runs from one (None for a wheel install)."""
from __future__ import annotations

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
