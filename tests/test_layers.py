"""The package layers of docs/architecture.md, read from the source: core imports nothing of ours,
plugins (loaders, metrics, adapters) import only what is below them, the orchestrator (harness) sits
on top, and no two packages import each other; the harness knows no model: of the adapters it
imports the interface (adapters/base.py) only."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# layer -> its folder in the repository; each is imported as rvt_bench.<layer>
FOLDERS = {"core": "bench/core", "loaders": "bench/loaders", "harness": "bench/harness",
           "metrics": "metrics", "adapters": "adapters", "leaderboards": "leaderboards"}
# package -> the packages of ours it may import (the layers, bottom to top)
ALLOWED = {
    "core": set(),
    "loaders": {"core"},
    "metrics": {"core"},
    "adapters": {"core", "metrics"},
    "leaderboards": {"core", "metrics"},
    "harness": {"core", "loaders", "metrics", "adapters", "leaderboards"},
}


# of the adapters, what harness and core may import: the adapter interface
ADAPTER_INTERFACE = "rvt_bench.adapters.base"


def imported_modules(package: str) -> dict[str, set[str]]:
    """{imported module (dotted, "rvt_bench." prefixed where ours): {importing file, ...}} over every
    .py file of `package`, lazy imports inside functions included; `from a import b` counts as
    a.b (b may be a module)."""
    out: dict[str, set[str]] = {}
    for path in (REPO / FOLDERS[package]).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                out.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return out


def imported_names(path: Path) -> list[str]:
    """The absolute module names a .py file imports, lazy imports inside functions included."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def package_imports() -> dict[str, dict[str, set[str]]]:
    """{package: {imported package: {importing module file, ...}}} over every .py file, lazy
    imports inside functions included."""
    out: dict[str, dict[str, set[str]]] = {p: {} for p in ALLOWED}
    for package in ALLOWED:
        for name, files in imported_modules(package).items():
            parts = name.split(".")
            top = parts[1] if parts[0] == "rvt_bench" and len(parts) > 1 else parts[0]
            if top in ALLOWED and top != package:
                out[package].setdefault(top, set()).update(files)
    return out


def sandbox_imports() -> dict[str, list[str]]:
    """{module file of adapters/sandbox: [what it imports of ours outside core and the sandbox]}:
    the sandbox runs code and knows no model (no twin, no policy, no rollout)."""
    out: dict[str, list[str]] = {}
    for path in (REPO / "adapters" / "sandbox").rglob("*.py"):
        wrong = [n for n in imported_names(path) if n.split(".")[0] in ("rvt_bench", *ALLOWED)
                 and not n.startswith(("rvt_bench.core", "rvt_bench.adapters.sandbox"))]
        if wrong:
            out[str(path.relative_to(REPO))] = wrong
    return out


def beyond_the_interface(package: str) -> dict[str, list[str]]:
    """What `package` imports under rvt_bench.adapters other than the interface module (or names
    from it): {module: [files]}."""
    return {name: sorted(files) for name, files in imported_modules(package).items()
            if name.startswith("rvt_bench.adapters") and not name.startswith(ADAPTER_INTERFACE + ".")
            and name != ADAPTER_INTERFACE}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_the_layers_below_it(package):
    imports = package_imports()[package]
    wrong = {dep: sorted(files) for dep, files in imports.items() if dep not in ALLOWED[package]}
    assert not wrong, f"{package} imports {wrong}"


@pytest.mark.parametrize("package", ["harness", "core"])
def test_harness_and_core_import_of_the_adapters_only_the_interface(package):
    assert beyond_the_interface(package) == {}


def test_no_two_packages_import_each_other():
    imports = package_imports()
    cycles = sorted((a, b) for a in imports for b in imports[a] if a < b and a in imports.get(b, {}))
    assert not cycles


def test_the_layer_check_sees_a_planted_upward_import(tmp_path, monkeypatch):
    # the checker itself must be able to fail: plant core -> harness in a copy and look again
    for folder in FOLDERS.values():
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "bench" / "core" / "bad.py").write_text("def f():\n    from rvt_bench.harness import runner\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert package_imports()["core"] == {"harness": {"bench/core/bad.py"}}


def test_the_interface_check_sees_a_planted_model_import(tmp_path, monkeypatch):
    for folder in FOLDERS.values():
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "bench" / "harness" / "ok.py").write_text("from rvt_bench.adapters.base import Adapter\n")
    (tmp_path / "bench" / "harness" / "bad.py").write_text(
        "def f():\n    from rvt_bench.adapters.dtr1 import tags\n    import rvt_bench.adapters.twin.dag\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert beyond_the_interface("harness") == {"rvt_bench.adapters.dtr1.tags": ["bench/harness/bad.py"],
                                               "rvt_bench.adapters.twin.dag": ["bench/harness/bad.py"]}


def test_the_sandbox_imports_only_core_and_itself():
    assert sandbox_imports() == {}


def test_the_sandbox_check_sees_a_planted_twin_import(tmp_path, monkeypatch):
    (tmp_path / "adapters" / "sandbox").mkdir(parents=True)
    (tmp_path / "adapters" / "sandbox" / "bad.py").write_text(
        "def f():\n    from rvt_bench.adapters.twin.schema import Twin\n    import rvt_bench.core.types\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert sandbox_imports() == {"adapters/sandbox/bad.py": ["rvt_bench.adapters.twin.schema"]}
