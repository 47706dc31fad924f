"""Shared by the benchmarks' parity tests: a fixture generator loaded from its file under tests/data
(they are scripts, not a package), and a precomputed run of a benchmark through the real config."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent


def load_script(path: Path, name: str) -> ModuleType:
    """The Python file `path` imported as module `name` (registered in sys.modules, as dataclasses
    need to find their module)."""
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_precomputed(dataset: str, tmp: Path, root: Path, pred: Path, *extra: str):
    """`+dataset=<dataset> +model=precomputed` on `root` and `pred`, runs and boards under `tmp`:
    conf/config.yaml composed as the command line does, then the runner (its RunResult)."""
    from hydra import compose, initialize_config_dir

    import run_bench  # noqa: F401  (registers the ${repo:} resolver the configs use)
    from rvt_bench.harness.runner import run

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[
            f"+dataset={dataset}", "+model=precomputed", f"dataset.root={root}", f"model.root={pred}",
            f"run.root={tmp / 'runs'}", f"leaderboard.dir={tmp / 'boards'}", *extra])
    return run(cfg)
