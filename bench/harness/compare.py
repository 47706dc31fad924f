"""Is run B better than run A? Per headline metric: both values, the delta (B - A), its 95% paired
bootstrap interval, a paired permutation p-value over the samples both runs scored, and the
per-sample wins / losses / ties.

    python -m rvt_bench.harness.compare RUN_A RUN_B [--B 1000] [--seed 0]

Both runs must be of the same dataset and split (the protocol is built from RUN_A's config.yaml).
Fractions are printed in percent, their delta in percentage points (pp); CIDEr in its own score
scale. Corpus-level caption metrics (BLEU-n, CIDEr) are recomputed on every bootstrap draw and
every permutation (rvt_bench.harness.estimators.CorpusEstimator); they are compared only when both runs have
the same references.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hydra.utils import instantiate

from rvt_bench.harness.names import load_run_config
from rvt_bench.harness import bootstrap
from rvt_bench.harness.estimators import estimator
from rvt_bench.core.store import read_jsonl, read_run_json
from rvt_bench.core.units import unit
from rvt_bench.core.types import RunStoreError


def _load(run_dir: Path) -> tuple[dict, list[dict]]:
    metrics_path, scores_path = run_dir / "metrics.json", run_dir / "scores.jsonl"
    if not metrics_path.exists() or not scores_path.exists():
        raise RunStoreError(f"{run_dir}: no metrics.json / scores.jsonl (not a scored run directory)")
    return read_run_json(metrics_path), list(read_jsonl(scores_path))


def compare(run_a: str | Path, run_b: str | Path, b: int = bootstrap.DEFAULT_B,
            seed: int = bootstrap.DEFAULT_SEED) -> dict[str, Any]:
    """{"a", "b": run dirs, "n_shared", "only_a", "only_b": sample counts, "metrics": [PairedResult
    as dict or {"key", "reason"}]}. Raises RunStoreError when the runs are of different datasets."""
    run_a, run_b = Path(run_a), Path(run_b)
    (ma, ra), (mb, rb) = _load(run_a), _load(run_b)
    if (ma.get("dataset"), ma.get("split")) != (mb.get("dataset"), mb.get("split")):
        raise RunStoreError(f"cannot compare {ma.get('dataset')}/{ma.get('split')} with {mb.get('dataset')}/{mb.get('split')}")
    cfg = load_run_config(run_a / "config.yaml")
    protocol = instantiate(cfg.dataset.protocol)
    ids_a, ids_b = {r["sample_id"] for r in ra}, {r["sample_id"] for r in rb}
    shared = ids_a & ids_b
    ra, rb = [r for r in ra if r["sample_id"] in shared], [r for r in rb if r["sample_id"] in shared]
    rows: list[dict[str, Any]] = []
    for key in protocol.headline:
        ea, eb = estimator(protocol, key, ra), estimator(protocol, key, rb)
        if isinstance(ea, str) or isinstance(eb, str):
            rows.append({"key": key, "reason": ea if isinstance(ea, str) else eb})
            continue
        try:
            rows.append(bootstrap.paired(ea, eb, b, seed).__dict__)
        except ValueError as exc:  # e.g. a corpus metric over different references
            rows.append({"key": key, "reason": str(exc)})
    return {"a": str(run_a), "b": str(run_b), "n_shared": len(shared), "only_a": len(ids_a - shared),
            "only_b": len(ids_b - shared), "metrics": rows}


def _show(key: str, value: float, signed: bool = False) -> str:
    if unit(key) == "score":
        return f"{value:+.3f}" if signed else f"{value:.3f}"
    return f"{100 * value:+.2f}" if signed else f"{100 * value:.2f}"


def format_comparison(result: dict[str, Any]) -> str:
    """Markdown table: | metric | unit | A | B | delta B-A | 95% CI | p | n | wins/losses/ties |;
    fractions in percent (delta and interval in pp), CIDEr as a score."""
    lines = [f"A: {result['a']}", f"B: {result['b']}",
             f"shared samples: {result['n_shared']} (only in A: {result['only_a']}, only in B: {result['only_b']})", "",
             "| metric | unit (delta) | A | B | delta B-A | 95% CI of delta | p (permutation) | n | B wins / losses / ties |",
             "|---|---|---:|---:|---:|---|---:|---:|---|"]
    for r in result["metrics"]:
        key = r["key"]
        if "reason" in r:
            lines.append(f"| {key} | | n/a | n/a | n/a | n/a | n/a | | {r['reason']} |")
            continue
        shown = "score" if unit(key) == "score" else "% (pp)"
        lines.append(f"| {key} | {shown} | {_show(key, r['a'])} | {_show(key, r['b'])} | {_show(key, r['delta'], True)} | "
                     f"[{_show(key, r['low'], True)}, {_show(key, r['high'], True)}] | {r['p_value']:.4f} | {r['n']} | "
                     f"{r['wins']} / {r['losses']} / {r['ties']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from rvt_bench.harness.cli import exit_on_known_errors

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_a")
    ap.add_argument("run_b")
    ap.add_argument("--B", type=int, default=bootstrap.DEFAULT_B, help="bootstrap replicates and permutations")
    ap.add_argument("--seed", type=int, default=bootstrap.DEFAULT_SEED)
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    result = exit_on_known_errors(lambda: compare(args.run_a, args.run_b, args.B, args.seed))
    print(json.dumps(result, indent=2) if args.json else format_comparison(result))


if __name__ == "__main__":
    main()
