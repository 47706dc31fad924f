"""The distribution installs one import name, `rvt_bench` (docs/architecture.md "One installed
name"): the wheel's top level, every module of the mapped folders inside it, the shipped data
(conf/, demo/, report template, paper rows) and the `rvt-bench` command."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# folder in the repository -> its path inside the wheel
MAPPED = {"bench": "rvt_bench", "adapters": "rvt_bench/adapters", "metrics": "rvt_bench/metrics",
          "leaderboards": "rvt_bench/leaderboards", "conf": "rvt_bench/conf", "demo": "rvt_bench/demo"}


def build_docs():
    """scripts/build_docs.py as a module (it copies the checkout for builds)."""
    spec = importlib.util.spec_from_file_location("build_docs", REPO / "scripts" / "build_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    src = build_docs().source_copy(tmp_path_factory.mktemp("src"))  # build/ and egg-info land there
    # the build backend of the environment (no download)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--disable-pip-version-check", "-q", "-w", str(out), str(src)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (path,) = out.glob("rvt_bench-*.whl")
    return path


@pytest.fixture(scope="module")
def wheel_names(wheel) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def test_the_wheel_installs_one_top_level_import_name(wheel_names):
    tops = {name.split("/")[0] for name in wheel_names if ".dist-info/" not in name}
    assert tops == {"rvt_bench"}


def test_every_module_of_the_mapped_folders_is_in_the_wheel(wheel_names):
    # a package missing from pyproject.toml's explicit list would silently drop its modules
    expected = set()
    for folder, target in MAPPED.items():
        for path in (REPO / folder).rglob("*.py"):
            if "__pycache__" not in path.parts:
                expected.add(f"{target}/{path.relative_to(REPO / folder).as_posix()}")
    assert sorted(expected - wheel_names) == []


def test_the_wheel_ships_conf_demo_templates_and_paper_rows(wheel_names):
    for folder in ("conf", "demo"):
        files = [p for p in (REPO / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        missing = [str(p.relative_to(REPO)) for p in files
                   if f"{MAPPED[folder]}/{p.relative_to(REPO / folder).as_posix()}" not in wheel_names]
        assert missing == []
    assert "rvt_bench/harness/report/template.html.j2" in wheel_names
    assert any(n.startswith("rvt_bench/leaderboards/paper/") and n.endswith(".csv") for n in wheel_names)


def test_the_wheel_declares_the_rvt_bench_command(wheel, wheel_names):
    (entry_points,) = [n for n in wheel_names if n.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as zf:
        text = zf.read(entry_points).decode()
    assert "[console_scripts]" in text and "rvt-bench = rvt_bench.harness.main:console" in text


def test_rvt_bench_list_runs_from_the_installed_command():
    command = Path(sys.executable).parent / "rvt-bench"
    proc = subprocess.run([str(command), "--list"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "+dataset=revos" in proc.stdout and "+model=dtr1" in proc.stdout


def test_the_documentation_site_builds_strictly(tmp_path):
    # mkdocs --strict: a broken link, a page missing from the nav or an API page whose module cannot
    # be read fails the build (scripts/build_docs.py, as CI runs it)
    assert build_docs().build(tmp_path / "site") == 0
    assert (tmp_path / "site" / "api" / "records" / "index.html").read_text().count("AdapterReport") > 0
