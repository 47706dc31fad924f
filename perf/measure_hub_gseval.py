"""Measure how GroundingSuite-Eval's hub copy hustvl/GSEval differs from the file the GitHub repository
ships (hustvl/GroundingSuite GroundingSuite-Eval.jsonl, what +dataset=gseval reads). Not a test; needs
both: the GitHub file, and the hub copy (a local download, or a hub id fetched once through the
Hugging Face cache). docs/benchmarks/gseval.md "Hub copies".

For every JSONL / JSON / parquet file of the hub copy holding records with an `idx`, it prints:
- records on each side, idx missing on the hub, idx only on the hub, idx repeated;
- for the idx both hold, how many differ in each field the evaluator or the loader reads
  (image_path, class_id, label, caption, box [to 1e-6], segmentation [size and counts]) and one
  example of each;
- "identical" when every record equals the GitHub file's (then that folder can be dataset.root).

    python perf/measure_hub_gseval.py --github GroundingSuite-Eval.jsonl --hub DIR_OR_ID [--revision REV]
    python perf/measure_hub_gseval.py --tiny [--work DIR]   # offline, on the test fixture
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIELDS = ("image_path", "class_id", "label", "caption", "box", "segmentation")


def read_records(path: Path) -> list[dict] | None:
    """The file's records (dicts), or None when it holds none with an idx."""
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            rows = pq.read_table(path).to_pylist()
        elif path.suffix == ".jsonl":
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        else:
            data = json.loads(path.read_text())
            rows = data if isinstance(data, list) else next((v for v in data.values() if isinstance(v, list)), [])
    except (OSError, ValueError) as exc:
        print(f"  {path.name}: unreadable ({type(exc).__name__}: {exc})"[:300])
        return None
    rows = [r for r in rows if isinstance(r, dict) and "idx" in r]
    return rows or None


def same(field: str, a, b) -> bool:
    if field == "box":
        try:
            return len(a) == len(b) and all(abs(float(x) - float(y)) <= 1e-6 for x, y in zip(a, b))
        except (TypeError, ValueError):
            return a == b
    if field == "segmentation" and isinstance(a, dict) and isinstance(b, dict):
        return list(a.get("size") or []) == list(b.get("size") or []) and str(a.get("counts")) == str(b.get("counts"))
    return a == b


def compare(github: list[dict], hub: list[dict]) -> dict:
    """The figures of one hub file against the GitHub records (module docstring), as a dict."""
    g = {str(r["idx"]): r for r in github}
    h: dict = {}
    repeated = 0
    for r in hub:
        repeated += str(r["idx"]) in h
        h.setdefault(str(r["idx"]), r)
    common = [k for k in g if k in h]
    differ = {f: [k for k in common if not same(f, g[k].get(f), h[k].get(f))] for f in FIELDS}
    return {"github": len(github), "hub": len(hub), "missing_on_hub": len(set(g) - set(h)),
            "only_on_hub": len(set(h) - set(g)), "repeated_on_hub": repeated, "common": len(common),
            "differ": {f: len(v) for f, v in differ.items()},
            "examples": {f: (v[0], g[v[0]].get(f), h[v[0]].get(f)) for f, v in differ.items() if v}}


def report(name: str, r: dict) -> None:
    print(f"  {name}: GitHub {r['github']} records, hub {r['hub']} (idx repeated on the hub: {r['repeated_on_hub']}); "
          f"missing on the hub {r['missing_on_hub']}, only on the hub {r['only_on_hub']}, both {r['common']}")
    print("    differing fields: " + ", ".join(f"{f} {n}" for f, n in r["differ"].items()))
    for f, (idx, a, b) in r["examples"].items():
        print(f"    e.g. idx {idx} {f}: GitHub {str(a)[:80]!r} hub {str(b)[:80]!r}")
    if not r["missing_on_hub"] and not r["only_on_hub"] and not r["repeated_on_hub"] and not any(r["differ"].values()):
        print("    identical to the GitHub file")


def tiny(work: Path) -> tuple[Path, Path]:
    """The gseval parity fixture's JSONL (the GitHub side) and a hub folder holding it with one
    record dropped and one label changed, under `work`."""
    sys.path.insert(0, str(REPO))
    from tests.precomputed_runs import load_script

    make = load_script(REPO / "tests" / "data" / "gseval_parity" / "make_fixture.py", "gseval_make_fixture")
    make.write_fixture(work / "github")
    github = work / "github" / "GroundingSuite-Eval.jsonl"
    rows = [json.loads(line) for line in github.read_text().splitlines() if line.strip()]
    rows = rows[1:]
    rows[0] = {**rows[0], "label": rows[0]["label"] + " (edited)"}
    (work / "hub").mkdir(parents=True, exist_ok=True)
    (work / "hub" / "gseval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return github, work / "hub"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--github", help="GroundingSuite-Eval.jsonl from github.com/hustvl/GroundingSuite")
    ap.add_argument("--hub", default="hustvl/GSEval", help="a local download of the hub copy, or its hub id")
    ap.add_argument("--revision", default=None, help="hub revision (default main)")
    ap.add_argument("--tiny", action="store_true", help="offline, on the test fixture")
    ap.add_argument("--work", help="where --tiny writes its files (default: a temporary folder)")
    args = ap.parse_args(argv)
    if args.tiny:
        github, hub = tiny(Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="measure_hub_gseval_")))
    elif not args.github:
        ap.error("--github is required (or --tiny)")
    else:
        github, hub = Path(args.github), Path(args.hub)
        if not hub.is_dir():
            from huggingface_hub import snapshot_download

            hub = Path(snapshot_download(args.hub, repo_type="dataset", revision=args.revision,
                                         allow_patterns=["*.json", "*.jsonl", "*.parquet", "README.md"]))
    base = read_records(github)
    if not base:
        print(f"{github}: no records with an idx")
        return 1
    print(f"GitHub file {github}; hub copy {hub}")
    found = 0
    for path in sorted(p for p in hub.rglob("*") if p.suffix in (".json", ".jsonl", ".parquet") and p.is_file()):
        rows = read_records(path)
        if rows:
            found += 1
            report(str(path.relative_to(hub)), compare(base, rows))
    if not found:
        print("  the hub copy holds no JSON / JSONL / parquet file of records with an idx; its files: "
              + ", ".join(sorted(str(p.relative_to(hub)) for p in hub.rglob("*") if p.is_file())[:20]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
