#!/usr/bin/env python
"""Build the documentation site as CI does: `python scripts/build_docs.py [--out DIR]`.

The API pages are rendered from rvt_bench as a wheel lays it out (its folders are mapped into the
package by pyproject.toml, so the checkout itself has no `rvt_bench/` directory): the package is
installed without dependencies into a scratch directory that mkdocstrings reads, then
`mkdocs build --strict` writes the site (default: site/). Exit status: mkdocs's.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def source_copy(dest: Path) -> Path:
    """Copy the checkout's files (tracked, and untracked ones git does not ignore) to `dest`, so that
    setuptools' build/ and egg-info land there and not in the checkout. Returns `dest`."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.splitlines()
    for name in names:
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    return dest


def build(out: Path) -> int:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        print(f'error: the site needs MkDocs: {sys.executable} -m pip install -e ".[docs]"', file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="rvt-bench-api-") as tmp:
        src = source_copy(Path(tmp) / "src")
        # --no-build-isolation: the environment's setuptools, nothing downloaded
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--disable-pip-version-check", "--target", str(Path(tmp) / "pkg"), str(src)],
                       check=True, cwd=tmp)
        env = {**os.environ, "RVT_BENCH_API_SRC": str(Path(tmp) / "pkg")}
        return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
                               "-d", str(out)], env=env).returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "site", help="where the site goes (default: site/)")
    return build(ap.parse_args(argv).out.resolve())


if __name__ == "__main__":
    sys.exit(main())
