"""Is run B better than run A? Per headline metric: both values, the delta (B - A), its 95% paired
bootstrap interval, a paired permutation p-value over the samples both runs scored, and the
per-sample wins / losses / ties. With more runs, each is compared with the first (the baseline).

    rvt-bench compare RUN_A RUN_B [RUN_C ...] [--B 1000] [--seed 0] [--union] [--html OUT.html]

By default the runs are compared over the samples both scored: a sample one run's protocol rule
excludes (MeViS's dropped expressions) is compared in neither, and the output says how many were left
out and why; --union compares every sample, each failure counted as the protocol's failure rule scores
it (the [failed-...] keys). A metric whose interval rests on few videos or images gets a caveat.

A run is its directory (its full run's metrics.json, else its largest `run.limit` run's
metrics.limitN.json) or one metrics[.limitN].json file of it. A comparison involving a `run.limit`
run is marked partial: it covers the samples both runs scored, the first N of the dataset.
All runs must be of the same dataset and split (the protocol is built from RUN_A's config.yaml).
Fractions are printed in percent, their delta in percentage points (pp); CIDEr in its own score
scale. Corpus-level caption metrics (BLEU-n, CIDEr) are recomputed on every bootstrap draw and
every permutation (rvt_bench.metrics.estimators.CorpusEstimator); they are compared only when both runs have
the same references. Each metric's estimator is the one its protocol declares (`Protocol.estimator`).
Beyond the headline, every other cell of the benchmark's paper table (referring / reasoning, A, R,
short / long, levels) is compared the same way where its estimator is cheap (not corpus metrics on a
subset). Runs are labelled by display name (model.name) and run name. --html writes ONE
self-contained page for all runs: per run against the baseline, the table, the samples that flipped
(right -> wrong, wrong -> right, with both scores) and, per headline metric that is a mean of
per-sample values, a paired plot (each shared sample: A's value against B's; the largest changes
named by sample id).
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from hydra.utils import instantiate

from rvt_bench.harness.names import load_run_config
from rvt_bench.harness import bootstrap
from rvt_bench.core.printable import printable
from rvt_bench.core.records import ScoreRecord, excluded_reasons
from rvt_bench.core.store import read_jsonl, read_run_json
from rvt_bench.core.units import unit
from rvt_bench.core.types import RunStoreError
from rvt_bench.harness.table_cis import _subset
from rvt_bench.harness.view import resampling_groups
from rvt_bench.leaderboards.tables import cell_keys
from rvt_bench.metrics.estimators import CorpusEstimator


_LIMIT = re.compile(r"^metrics\.limit(\d+)\.json$")


def results_files(run: Path) -> tuple[Path, Path, int | None]:
    """(metrics file, scores file, run.limit or None) of a run directory or of one of its metrics
    files: the full run's when it has one, else its largest run.limit run's. Raises RunStoreError
    when there is no scored result."""
    if run.is_file():
        limit = _LIMIT.match(run.name)
        if run.name != "metrics.json" and limit is None:
            raise RunStoreError(f"{run}: not a metrics.json or metrics.limitN.json file")
        n = int(limit.group(1)) if limit else None
        return run, run.with_name("scores.jsonl" if n is None else f"scores.limit{n}.jsonl"), n
    if (run / "metrics.json").is_file() and (run / "scores.jsonl").is_file():
        return run / "metrics.json", run / "scores.jsonl", None
    limits = sorted((int(m.group(1)) for p in run.glob("metrics.limit*.json") if (m := _LIMIT.match(p.name))
                     and (run / f"scores.limit{m.group(1)}.jsonl").is_file()), reverse=True)
    if limits:
        return run / f"metrics.limit{limits[0]}.json", run / f"scores.limit{limits[0]}.jsonl", limits[0]
    raise RunStoreError(f"{run}: no metrics.json / scores.jsonl, nor a run.limit run's metrics.limitN.json "
                        f"(not a scored run directory)")


def _load(run: Path) -> tuple[dict, list[dict], Path, int | None]:
    metrics_path, scores_path, limit = results_files(run)
    if not scores_path.is_file():
        raise RunStoreError(f"{metrics_path}: its scores file {scores_path.name} is missing")
    run_dir = metrics_path.parent
    return read_run_json(metrics_path), list(read_jsonl(scores_path)), run_dir, limit


def compare(run_a: str | Path, run_b: str | Path, b: int = bootstrap.DEFAULT_B,
            seed: int = bootstrap.DEFAULT_SEED, per_sample: bool = False, union: bool = False) -> dict[str, Any]:
    """{"a", "b": run dirs, "n_shared", "only_a", "only_b": sample counts, "left_out": [why, count]
    of every sample not compared, "mode": "shared" | "union", "metrics": [PairedResult as dict or
    {"key", "reason"}], "partial": why only part of the samples is compared, or None}.

    By default the runs are compared over the samples both SCORED: a sample one run's protocol rule
    excludes (metrics.json "excluded_samples": MeViS's dropped expressions...) or that its protocol's
    estimator leaves out is compared in neither, and "left_out" says how many and why. union: every
    sample both runs have a record of, each scored by the protocol that counts every failure
    (Protocol.counting_failures: a dropped expression is 0; its keys say so, "J&F[failed-zero]").
    per_sample: also "per_sample": {key: {"a": {sample id: value}, "b": {...}}} for the metrics that
    are means of per-sample values (what the paired plot draws). Raises RunStoreError when the runs
    are of different datasets."""
    (ma, ra, dir_a, limit_a), (mb, rb, dir_b, limit_b) = _load(Path(run_a)), _load(Path(run_b))
    if (ma.get("dataset"), ma.get("split")) != (mb.get("dataset"), mb.get("split")):
        raise RunStoreError(f"cannot compare {ma.get('dataset')}/{ma.get('split')} with {mb.get('dataset')}/{mb.get('split')}")
    cfg = load_run_config(dir_a / "config.yaml")
    protocol = instantiate(cfg.dataset.protocol)  # imports the modules of its units' values: records read after it
    if union:
        protocol = protocol.counting_failures()
    ra, rb = [ScoreRecord.from_json(r) for r in ra], [ScoreRecord.from_json(r) for r in rb]
    ids_a, ids_b = {r.sample_id for r in ra}, {r.sample_id for r in rb}
    shared = ids_a & ids_b
    left_out: dict[str, int] = {}
    if not union:  # the samples each run's protocol rule excluded are scored in neither
        for name, body in (("A", ma), ("B", mb)):
            for sid, why in excluded_reasons(body).items():
                if sid in shared:
                    shared.discard(sid)
                    left_out[f"excluded by {name}'s protocol rule: {why}"] = left_out.get(
                        f"excluded by {name}'s protocol rule: {why}", 0) + 1
    ra, rb = [r for r in ra if r.sample_id in shared], [r for r in rb if r.sample_id in shared]
    headline = list(protocol.headline)
    only_a, only_b = len(ids_a - ids_b), len(ids_b - ids_a)
    if only_a:
        left_out["scored in A only (no record in B)"] = only_a
    if only_b:
        left_out["scored in B only (no record in A)"] = only_b
    rows: list[dict[str, Any]] = []
    values: dict[str, dict[str, dict[str, float]]] = {}
    # the headline, then every other cell of the benchmark's paper table (sub-splits, A, R, levels)
    keys = headline + [k for k in cell_keys(str(ma.get("dataset")), ma) if k not in headline]
    for key in keys:
        metric, sa = (key, ra) if key in headline else _subset(key, ra)
        _, sb = (key, rb) if key in headline else _subset(key, rb)
        ea, eb = ((protocol.estimator(metric, sa), protocol.estimator(metric, sb)) if sa and sb
                  else ("no shared samples in this subset",) * 2)
        if not isinstance(ea, str) and not isinstance(eb, str) and _kept_ids(ea) != _kept_ids(eb):
            # one run's estimator leaves out samples the other's keeps (a metrics.json written before
            # its excluded samples were listed): compared over those both keep
            both = _kept_ids(ea) & _kept_ids(eb)
            why = f"left out of one run's {key} by its protocol"
            left_out[why] = len((_kept_ids(ea) | _kept_ids(eb)) - both)
            sa, sb = [r for r in sa if r.sample_id in both], [r for r in sb if r.sample_id in both]
            ea, eb = ((protocol.estimator(metric, sa), protocol.estimator(metric, sb)) if sa and sb
                      else ("no shared samples in this subset",) * 2)
        if key not in headline and isinstance(ea, CorpusEstimator):
            ea = "corpus-level metric: not compared per subset"
        if isinstance(ea, str) or isinstance(eb, str):
            rows.append({"key": key, "reason": ea if isinstance(ea, str) else eb})
            continue
        if per_sample and key in headline and hasattr(ea, "per_sample") and hasattr(eb, "per_sample"):
            values[key] = {"a": ea.per_sample(), "b": eb.per_sample()}
        try:
            rows.append({**bootstrap.paired(ea, eb, b, seed).__dict__, "key": key, "clusters": bootstrap.n_clusters(ea)})
        except ValueError as exc:  # e.g. a corpus metric over different references
            rows.append({"key": key, "reason": str(exc)})
    partial = [f"{name}: run.limit={n} (the first {n} samples)" for name, n in (("A", limit_a), ("B", limit_b)) if n]
    out = {"a": str(run_a), "b": str(run_b), "name_a": display_name(ma), "name_b": display_name(mb),
           "mode": "union" if union else "shared", "n_shared": len(shared), "only_a": only_a, "only_b": only_b,
           "left_out": sorted(left_out.items()), "metrics": rows, "partial": "; ".join(partial) or None,
           "flips": flips(ra, rb)}
    if per_sample:
        out["per_sample"] = values
    return out


def _kept_ids(est: Any) -> set[str]:
    """The sample ids an estimator averages (its strata's, or a corpus estimator's)."""
    if isinstance(est, CorpusEstimator):
        return set(est.ids)
    return {i for s in est.strata for i in s.ids}


FEW_CLUSTERS = 20  # below this many independent units the percentile bootstrap interval is too narrow


def caveat(row: dict[str, Any]) -> str:
    """The note a compared metric gets when its interval rests on few independent units (FEW_CLUSTERS)
    or disagrees with the permutation test; "" otherwise."""
    m = row.get("clusters")
    if not isinstance(m, int) or m >= FEW_CLUSTERS:
        return ""
    excludes_zero = row["low"] > 0 or row["high"] < 0
    note = (f"only {m} independent units (videos/images) were resampled: the percentile bootstrap interval is "
            "too narrow with so few, read the permutation p")
    if excludes_zero and row["p_value"] >= 0.05:
        note += f" (the interval excludes 0, p = {row['p_value']:.2f} does not)"
    return note


def display_name(metrics: dict[str, Any]) -> str:
    """A run's label: its display name (metrics.json "model", model.name) and its run name."""
    return f"{metrics.get('model') or 'run'} ({metrics.get('run_name') or '?'})"


def flips(ra: list[ScoreRecord], rb: list[ScoreRecord]) -> list[dict[str, Any]]:
    """The shared samples whose result is correct in one run and not in the other
    (ScoreRecord.correct: IoU > 0.5, the judge's verdict...), right -> wrong first, then wrong -> right,
    each by sample id: {"sample_id", "a", "b": the samples' own scores (ScoreRecord.sample_score, None
    when it has none), "a_correct", "b_correct"}."""
    by_b = {r.sample_id: r for r in rb}
    out = []
    for r in ra:
        other = by_b.get(r.sample_id)
        if other is None:
            continue
        ca, cb = r.correct(), other.correct()
        if ca is None or cb is None or ca == cb:
            continue
        out.append({"sample_id": r.sample_id, "a": r.sample_score(), "b": other.sample_score(), "a_correct": ca,
                    "b_correct": cb})
    return sorted(out, key=lambda f: (not f["a_correct"], f["sample_id"]))


def compare_many(runs: list[str | Path], b: int = bootstrap.DEFAULT_B, seed: int = bootstrap.DEFAULT_SEED,
                 per_sample: bool = False, union: bool = False) -> list[dict[str, Any]]:
    """`compare(runs[0], run)` for every later run: each against the first, the baseline. Raises
    ValueError for fewer than two runs, RunStoreError as `compare`."""
    if len(runs) < 2:
        raise ValueError("compare needs at least two runs (the first is the baseline)")
    results = [compare(runs[0], run, b, seed, per_sample, union) for run in runs[1:]]
    names = [results[0]["name_a"], *(r["name_b"] for r in results)]
    if len(set(names)) < len(names):  # two runs of one name and run name: tell them apart by position
        names = [f"{n} #{k}" for k, n in enumerate(names)]
        for r, name in zip(results, names[1:]):
            r["name_a"], r["name_b"] = names[0], name
    return results


def _show(key: str, value: float, signed: bool = False) -> str:
    if unit(key) == "score":
        return f"{value:+.3f}" if signed else f"{value:.3f}"
    return f"{100 * value:+.2f}" if signed else f"{100 * value:.2f}"


def format_comparison(result: dict[str, Any]) -> str:
    """Markdown table: | metric | unit | A | B | delta B-A | 95% CI | p | n | wins/losses/ties |;
    fractions in percent (delta and interval in pp), CIDEr as a score."""
    p = printable  # run names, paths, metric keys and reasons are data: their control characters as escapes
    partial = [f"PARTIAL comparison: {p(result['partial'])}"] if result.get("partial") else []
    lines = [f"A: {p(result.get('name_a', 'run A'))}  {p(result['a'])}", f"B: {p(result.get('name_b', 'run B'))}  {p(result['b'])}", *partial,
             *samples_lines(result), "",
             "| metric | unit (delta) | A | B | delta B-A | 95% CI of delta | p (permutation) | n | B wins / losses / ties |",
             "|---|---|---:|---:|---:|---|---:|---:|---|"]
    for r in result["metrics"]:
        key = r["key"]
        if "reason" in r:
            lines.append(f"| {p(key)} | | n/a | n/a | n/a | n/a | n/a | | {p(r['reason'])} |")
            continue
        shown = "score" if unit(key) == "score" else "% (pp)"
        lines.append(f"| {p(key)} | {shown} | {_show(key, r['a'])} | {_show(key, r['b'])} | {_show(key, r['delta'], True)} | "
                     f"[{_show(key, r['low'], True)}, {_show(key, r['high'], True)}] | {r['p_value']:.4f} | {r['n']} | "
                     f"{r['wins']} / {r['losses']} / {r['ties']} |")
    return "\n".join(lines + _methods([result]) + _caveats([result]))


def samples_lines(result: dict[str, Any]) -> list[str]:
    """What the comparison is over: the samples compared and, one line each, those left out and why."""
    if result.get("mode") == "union":
        head = (f"compared over the union: {result['n_shared']} samples both runs have a record of, every failure "
                "counted (a dropped sample scores as a failure: the protocol's [failed-...] keys)")
    else:
        head = (f"compared over the samples both runs scored: {result['n_shared']} "
                "(--union: every sample, failures counted as the protocol's failure rule)")
    return [head] + [f"  left out: {count} {printable(why)}" for why, count in result.get("left_out") or []]


def _caveats(results: list[dict[str, Any]]) -> list[str]:
    """A note per metric whose interval rests on few independent units (compare.caveat)."""
    notes = list(dict.fromkeys(f"caveat: {printable(row['key'])}: {caveat(row)}" for r in results for row in r["metrics"]
                               if "reason" not in row and caveat(row)))
    return (["", "95% CI of delta: paired percentile bootstrap; p: paired permutation test."] + notes) if notes else []


def _methods(results: list[dict[str, Any]]) -> list[str]:
    """One line per metric group saying what the paired bootstrap and permutation test resampled."""
    groups = resampling_groups([(row["key"], row.get("resampled", "")) for r in results for row in r["metrics"]])
    return (["", "Resampled (bootstrap draws and permutation swaps):"] +
            [f"- {printable(', '.join(keys))}: {printable(how)}" for keys, how in groups]) if groups else []


def format_many(results: list[dict[str, Any]]) -> str:
    """Several runs against the baseline in one markdown table: per headline metric the baseline's
    line, then each run's value, delta, 95% CI of the delta, p, n and wins / losses / ties."""
    if len(results) == 1:
        return format_comparison(results[0])
    p = printable  # run names, paths, metric keys and reasons are data: their control characters as escapes
    lines = [f"baseline: {p(results[0].get('name_a', 'baseline'))}  {p(results[0]['a'])}"]
    lines += [f"run {k}: {p(r.get('name_b', f'run {k}'))}  {p(r['b'])}" + (f"  PARTIAL: {p(r['partial'])}" if r.get("partial") else "")
              for k, r in enumerate(results, 1)]
    for k, r in enumerate(results, 1):
        lines += [f"run {k}: " + line.lstrip() for line in samples_lines(r)]
    lines += ["", "Each run against the baseline over the samples both scored (baseline: its value on those samples).", "",
              "| metric | run | unit (delta) | baseline | run | delta vs baseline | 95% CI of delta | p (permutation) | n | "
              "wins / losses / ties |", "|---|---|---|---:|---:|---:|---|---:|---:|---|"]
    keys = list(dict.fromkeys(row["key"] for r in results for row in r["metrics"]))
    for key in keys:
        shown = "score" if unit(key) == "score" else "% (pp)"
        for k, r in enumerate(results, 1):
            row = next((x for x in r["metrics"] if x["key"] == key), None)
            if row is None or "reason" in row:
                lines.append(f"| {p(key)} | {p(r.get('name_b', f'run {k}'))} | | n/a | n/a | n/a | n/a | n/a | | {p(row['reason']) if row else 'not reported'} |")
                continue
            lines.append(f"| {p(key)} | {p(r.get('name_b', f'run {k}'))} | {shown} | {_show(key, row['a'])} | {_show(key, row['b'])} | {_show(key, row['delta'], True)} | "
                         f"[{_show(key, row['low'], True)}, {_show(key, row['high'], True)}] | {row['p_value']:.4f} | "
                         f"{row['n']} | {row['wins']} / {row['losses']} / {row['ties']} |")
    return "\n".join(lines + _methods(results) + _caveats(results))


def main(argv: list[str] | None = None) -> None:
    from rvt_bench.harness.cli import exit_on_known_errors

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", metavar="RUN", help="run directories or metrics[.limitN].json files; the first is the baseline")
    ap.add_argument("--B", type=int, default=bootstrap.DEFAULT_B, help="bootstrap replicates and permutations")
    ap.add_argument("--seed", type=int, default=bootstrap.DEFAULT_SEED)
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--union", action="store_true",
                    help="compare every sample both runs have a record of, each failure counted as the protocol's "
                         "failure rule scores it (a dropped sample is 0), instead of the samples both runs scored")
    ap.add_argument("--html", default=None, metavar="OUT",
                    help="also write ONE page for all runs to OUT: per run against the baseline, the table, the samples that flipped and a paired plot per metric")
    args = ap.parse_args(argv)
    if len(args.runs) < 2:
        ap.error("give at least two runs (the first is the baseline)")
    results = exit_on_known_errors(lambda: compare_many(args.runs, args.B, args.seed, per_sample=bool(args.html),
                                                        union=args.union))
    if args.html:
        from rvt_bench.harness.report.comparison import write_many

        print(f"comparison page: {printable(write_many(results, Path(args.html)))}")  # one file for every run
    print(json.dumps(results[0] if len(results) == 1 else results, indent=2) if args.json else format_many(results))


if __name__ == "__main__":
    main()
