"""Why each failed sample failed, across finished runs of one model, as the model's adapter tells it.

    rvt-bench attribute RUN_DIR [RUN_DIR ...] [--json OUT] [--examples 3]

The runs' config.yaml name the adapter class (model._target_); every run must name the same one.
Its `attribute` (rvt_bench.adapters.base.Adapter.attribute) labels the failures and says which runs
it compares (DT-R1: format, plan, perception or reasoning, from runs that differ in decoding and
perception); a model without an attribution stops with one line saying so.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rvt_bench.adapters.base import Adapter
from rvt_bench.core.store import write_atomic
from rvt_bench.core.types import RvtBenchError


class NotAttributable(RvtBenchError):
    """Runs whose model has no failure attribution, or runs of different models."""

    kind = "attribution"


def adapter_class(run_dirs: list[str]) -> type[Adapter]:
    """The Adapter subclass every run's config.yaml names as model._target_. Raises NotAttributable
    when a run has no config.yaml, the runs name different classes, or the target is no Adapter class."""
    from hydra.utils import get_object

    from rvt_bench.harness.names import load_run_config

    targets = set()
    for run_dir in run_dirs:
        path = Path(run_dir) / "config.yaml"
        if not path.is_file():
            raise NotAttributable(f"{run_dir}: expected a finished run directory with config.yaml")
        targets.add(str(load_run_config(path).model.get("_target_", "")))
    if len(targets) != 1:
        raise NotAttributable(f"the runs are of different models ({sorted(targets)}); attribution compares runs of one model")
    target = targets.pop()
    try:
        cls = get_object(target)
    except Exception as exc:  # an unimportable target: one line naming it
        raise NotAttributable(f"model._target_ {target!r} cannot be imported: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Adapter)):
        raise NotAttributable(f"model._target_ {target!r} is not an Adapter class; attribution asks the adapter class")
    return cls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rvt-bench attribute", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run directories of the same model on the same samples")
    parser.add_argument("--json", dest="json_out", help="also write the labels to this JSON file")
    parser.add_argument("--examples", type=int, default=3, help="examples printed per label")
    args = parser.parse_args(argv)
    try:
        cls = adapter_class(args.runs)
        result = cls.attribute([Path(r) for r in args.runs], args.examples)
        if result is None:
            raise NotAttributable(f"model {cls.__name__} has no failure attribution (Adapter.attribute)")
    except RvtBenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(result.text)
    if args.json_out:
        write_atomic(args.json_out, json.dumps(result.data, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
