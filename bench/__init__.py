"""rvt-bench: an evaluation harness for reasoning visual tasks (docs/architecture.md).

The installed package `rvt_bench` is this folder (`bench/`: core, loaders, harness) plus the
top-level `adapters/`, `metrics/`, `leaderboards/`, `conf/` and `demo/` folders, mapped by
pyproject.toml's `[tool.setuptools.package-dir]` (docs/architecture.md "Layers").
"""
