#!/usr/bin/env python
"""Evaluate a model on a reasoning-visual-task benchmark (the same as the `rvt-bench` command).

    python run_bench.py                                   # DT-R1 (embedded tiny policy) on the bundled demo
    python run_bench.py +dataset=revos +model=dtr1 dataset.root=DIR dataset.split=valid
    python run_bench.py -m model.max_rounds=2,4           # a Hydra sweep: one run directory and row per point
    python run_bench.py --list                            # benchmarks, models, policies, perception, judges

The last line printed names the run directory (config.yaml, manifest.json, predictions.jsonl,
scores.jsonl, metrics.json, report.html; docs/architecture.md "Run directory"). The code is
rvt_bench.harness.main.
"""
from rvt_bench.harness.main import console

if __name__ == "__main__":
    console()
