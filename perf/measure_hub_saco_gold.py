"""Measure how lmms-eval's SA-Co/Gold copy yasserDahou/saco-gold (refused by +dataset=saco_gold) differs
from the release's annotation files (facebook/SACo-Gold, what the loader reads), subset by subset.
Not a test; needs both: the release's JSONs (dataset.root of +dataset=saco_gold) and the parquet copy
(a local download, or its hub id fetched once through the Hugging Face cache; only the columns below
are read, never the images). docs/benchmarks/saco_gold.md "Hub copies".

The copy's schema is taken from lmms-eval's tasks/saco/utils.py (EvolvingLMMs-Lab/lmms-eval@75571cfe):
id, image, expression, human_1_masks, human_2_masks, human_3_masks (lists of COCO RLE), count; split
names metaclip, sa1b, attributes, crowded, food, sport, wiki_common. A row is matched to a release pair
by (expression == text_input, the RLE counts of human_1/2/3 == those of annotators a/b/c, as
multisets, crowd annotations included). Per subset it prints:
- pairs in the release (annotator a's file), the pairs the cgF1 evaluator scores (exhaustive for a,
  b and c), negative pairs; rows in the copy, negative rows;
- rows matched to a pair; of them, rows whose pair the evaluator leaves out (not exhaustive) and
  rows whose pair has a crowd annotation (a mask the evaluator ignores, an instance in the copy);
- rows matching no pair, and scored pairs with no row.

    python perf/measure_hub_saco_gold.py --gt GT_FOLDER [--hub yasserDahou/saco-gold | DIR] [--subsets crowded,food]
    python perf/measure_hub_saco_gold.py --tiny [--work DIR]   # offline, on the test fixture
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HUB_SPLIT = {"metaclip_nps": "metaclip", "sa1b_nps": "sa1b", "attributes": "attributes", "crowded": "crowded",
             "fg_food": "food", "fg_sports_equipment": "sport", "wiki_common": "wiki_common"}
COLUMNS = ["id", "expression", "human_1_masks", "human_2_masks", "human_3_masks"]


def _counts(rles) -> tuple:
    return tuple(sorted(str((r or {}).get("counts")) for r in (rles or [])))


def release_pairs(gt: Path, subset: str) -> dict:
    """pair id -> {"key", "scored", "crowd", "negative"} from the release's three files of `subset`."""
    from rvt_bench.loaders.saco_gold import gt_file

    data = {a: json.loads((gt / gt_file(subset, a)).read_text()) for a in "abc"}
    anns = {a: {} for a in "abc"}
    for a in "abc":
        for ann in data[a]["annotations"]:
            anns[a].setdefault(ann["image_id"], []).append(ann)
    recs = {a: {img["id"]: img for img in data[a]["images"]} for a in "abc"}
    out = {}
    for pid, img in recs["a"].items():
        per = [anns[a].get(pid, []) for a in "abc"]
        out[pid] = {"key": (img["text_input"], *(_counts([x["segmentation"] for x in p]) for p in per)),
                    "scored": bool(img.get("is_instance_exhaustive")) and all(  # CGF1Evaluator's exhaustiveness filter
                        recs[a].get(pid, {}).get("is_instance_exhaustive", True) for a in "bc"),
                    "crowd": any(x.get("iscrowd") for p in per for x in p),
                    "negative": not any(not x.get("iscrowd") for p in per for x in p)}
    return out


def hub_rows(hub: Path, split: str) -> list[tuple]:
    """(expression, human_1, human_2, human_3 counts) per row of the copy's `split` parquet files."""
    import pyarrow.parquet as pq

    files = sorted(p for p in hub.rglob("*.parquet") if p.name.startswith(f"{split}-") or p.parent.name == split)
    rows = []
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=256, columns=COLUMNS):
            for r in batch.to_pylist():
                rows.append((r["expression"], *(_counts(r[f"human_{k}_masks"]) for k in (1, 2, 3))))
    return rows


def measure(gt: Path, hub: Path, subset: str) -> dict:
    pairs, rows = release_pairs(gt, subset), hub_rows(hub, HUB_SPLIT[subset])
    by_key: dict = {}
    for pid, p in pairs.items():
        by_key.setdefault(p["key"], []).append(pid)
    matched, unmatched, used = [], 0, Counter()
    for key in rows:
        ids = by_key.get(key, [])
        if used[key] < len(ids):
            matched.append(ids[used[key]])
            used[key] += 1
        else:
            unmatched += 1
    got = set(matched)
    return {"subset": subset, "split": HUB_SPLIT[subset], "pairs": len(pairs),
            "scored": sum(p["scored"] for p in pairs.values()),
            "negative_pairs": sum(p["negative"] for p in pairs.values()), "rows": len(rows),
            "negative_rows": sum(not any(k[1:]) for k in rows), "matched": len(matched),
            "matched_not_scored": sum(not pairs[i]["scored"] for i in matched),
            "matched_with_crowd": sum(pairs[i]["crowd"] for i in matched), "unmatched_rows": unmatched,
            "scored_without_row": sum(p["scored"] and pid not in got for pid, p in pairs.items())}


def report(r: dict) -> None:
    print(f"{r['subset']} (copy's split {r['split']}): release {r['pairs']} pairs, {r['scored']} scored by the evaluator, "
          f"{r['negative_pairs']} negative; copy {r['rows']} rows, {r['negative_rows']} without masks")
    print(f"  rows matched to a pair {r['matched']}: of them not scored by the evaluator {r['matched_not_scored']}, "
          f"with a crowd annotation {r['matched_with_crowd']}; rows matching no pair {r['unmatched_rows']}; "
          f"scored pairs without a row {r['scored_without_row']}")


def tiny(work: Path) -> tuple[Path, Path]:
    """The saco parity fixture (the release side) and a copy built as lmms-eval's schema says, one row
    per pair of annotator a's file (crowd masks kept, no exhaustiveness flag), one row dropped."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sys.path.insert(0, str(REPO))
    from rvt_bench.loaders.saco_gold import gt_file
    from tests.precomputed_runs import load_script

    load_script(REPO / "tests" / "data" / "saco_parity" / "make_fixture.py", "saco_make_fixture").write_fixture(work / "gt")
    data = {a: json.loads((work / "gt" / gt_file("metaclip_nps", a)).read_text()) for a in "abc"}
    rows = []
    for n, img in enumerate(data["a"]["images"][1:]):
        masks = [[ann["segmentation"] for ann in data[a]["annotations"] if ann["image_id"] == img["id"]] for a in "abc"]
        rows.append({"id": n, "image": {"bytes": b"", "path": img["file_name"]}, "expression": img["text_input"],
                     "human_1_masks": masks[0], "human_2_masks": masks[1], "human_3_masks": masks[2],
                     "count": max(len(m) for m in masks)})
    (work / "hub" / "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), work / "hub" / "data" / "metaclip-00000-of-00001.parquet")
    return work / "gt", work / "hub"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gt", help="the folder of the release's gold_*_merged_<a|b|c>_release_test.json")
    ap.add_argument("--hub", default="yasserDahou/saco-gold", help="a local download of the copy, or its hub id")
    ap.add_argument("--revision", default=None, help="hub revision (default main)")
    ap.add_argument("--subsets", default=",".join(HUB_SPLIT))
    ap.add_argument("--tiny", action="store_true", help="offline, on the test fixture (subset metaclip_nps)")
    ap.add_argument("--work", help="where --tiny writes its files (default: a temporary folder)")
    args = ap.parse_args(argv)
    if args.tiny:
        gt, hub = tiny(Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="measure_hub_saco_")))
        subsets = ["metaclip_nps"]
    elif not args.gt:
        ap.error("--gt is required (or --tiny)")
    else:
        gt, hub = Path(args.gt), Path(args.hub)
        subsets = [s.strip() for s in args.subsets.split(",") if s.strip()]
        if not hub.is_dir():
            from huggingface_hub import snapshot_download

            hub = Path(snapshot_download(args.hub, repo_type="dataset", revision=args.revision,
                                         allow_patterns=["*.parquet", "README.md"]))
    for subset in subsets:
        report(measure(gt, hub, subset))
    return 0


if __name__ == "__main__":
    sys.exit(main())
