"""Measure how gRefCOCO's hub copy FudanCVL/gRefCOCO (read by `dataset.hf_dataset`) differs from the
release as ReLA's datasets directory holds it (OneDrive / Google Drive, dataset.root of +dataset=grefcoco).
Not a test; needs both (the hub copy: a local download, or its hub id fetched once through the Hugging
Face cache, only grefs(unc).json and instances.json). docs/benchmarks/grefcoco.md "Hub copies".

It prints the sha256 of both files on each side ("identical" when equal), and per split (val,
testA, testB) the samples each side's loader gives (sentences), the no-target ones, the data errors,
and the sample ids, queries or GT masks that differ.

    python perf/measure_hub_grefcoco.py --release DATASETS_DIR --images COCO_TRAIN2014 [--hub FudanCVL/gRefCOCO | DIR]
    python perf/measure_hub_grefcoco.py --tiny [--work DIR]   # offline, on the test fixture
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILES = ("grefs(unc).json", "instances.json")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def measure(release: Path, images: Path, hub: str, split: str) -> dict:
    from rvt_bench.loaders.grefcoco import GRefCOCODataset

    a = GRefCOCODataset(release, split, images=str(images))
    b = GRefCOCODataset(None, split, images=str(images), hf_dataset=hub)
    ka = {s.id: (s.query, s.target.masks, s.meta["no_target"]) for s in a}
    kb = {s.id: (s.query, s.target.masks, s.meta["no_target"]) for s in b}
    common = set(ka) & set(kb)
    return {"split": split, "release": len(a), "hub": len(b), "release_no_target": sum(v[2] for v in ka.values()),
            "hub_no_target": sum(v[2] for v in kb.values()), "release_errors": len(a.errors),
            "hub_errors": len(b.errors), "only_release": len(set(ka) - set(kb)), "only_hub": len(set(kb) - set(ka)),
            "query_differs": sum(ka[k][0] != kb[k][0] for k in common),
            "gt_differs": sum(ka[k][1] != kb[k][1] or ka[k][2] != kb[k][2] for k in common),
            "revision": (b.data_source or {}).get("revision", "")}


def report(r: dict) -> None:
    print(f"  {r['split']:5s} release {r['release']} sentences ({r['release_no_target']} no-target, {r['release_errors']} "
          f"data errors); hub {r['hub']} ({r['hub_no_target']} no-target, {r['hub_errors']} data errors); only in the "
          f"release {r['only_release']}, only on the hub {r['only_hub']}; query differs {r['query_differs']}, GT "
          f"differs {r['gt_differs']}")


def tiny(work: Path) -> tuple[Path, Path, str]:
    """The grefcoco parity fixture (the release) and a hub folder holding its files, one sentence edited."""
    sys.path.insert(0, str(REPO))
    from tests.precomputed_runs import load_script

    root = load_script(REPO / "tests" / "data" / "grefcoco_parity" / "make_fixture.py",
                       "grefcoco_make_fixture").write_fixture(work / "datasets")
    hub = work / "hub"
    hub.mkdir(parents=True, exist_ok=True)
    shutil.copy(root / "grefcoco" / "instances.json", hub)
    refs = json.loads((root / "grefcoco" / "grefs(unc).json").read_text())
    first = next(r for r in refs if r.get("split") == "val")
    first["sentences"][0] = {**first["sentences"][0], "raw": first["sentences"][0]["raw"] + " (edited)"}
    (hub / "grefs(unc).json").write_text(json.dumps(refs))
    return root, root / "images" / "train2014", str(hub)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", help="ReLA's datasets directory (grefcoco/grefs(unc).json, grefcoco/instances.json)")
    ap.add_argument("--images", help="the COCO train2014 folder (default <release>/images/train2014)")
    ap.add_argument("--hub", default="FudanCVL/gRefCOCO", help="hub id or a local copy of the repository")
    ap.add_argument("--revision", default=None)
    ap.add_argument("--splits", default="val,testA,testB")
    ap.add_argument("--tiny", action="store_true", help="offline, on the test fixture")
    ap.add_argument("--work", help="where --tiny writes its files (default: a temporary folder)")
    args = ap.parse_args(argv)
    if args.tiny:
        work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="measure_hub_grefcoco_"))
        os.environ["HF_HUB_OFFLINE"] = "1"
        release, images, hub = tiny(work)
    elif not args.release:
        ap.error("--release is required (or --tiny)")
    else:
        release = Path(args.release)
        images = Path(args.images) if args.images else release / "images" / "train2014"
        hub = args.hub
        if not Path(hub).is_dir():
            from huggingface_hub import snapshot_download

            hub = snapshot_download(hub, repo_type="dataset", revision=args.revision,
                                    allow_patterns=[*FILES, *(f"grefcoco/{f}" for f in FILES)])
    import logging

    logging.getLogger("rvt_bench").setLevel(logging.ERROR)  # data errors: counted below
    hub_dir = Path(hub) if (Path(hub) / FILES[0]).is_file() else Path(hub) / "grefcoco"
    print(f"release {release}; hub copy {hub}")
    for name in FILES:
        a, b = sha256(release / "grefcoco" / name), sha256(hub_dir / name)
        print(f"  {name}: release sha256 {a[:16]}, hub {b[:16]} -> {'identical' if a == b else 'DIFFERENT'}")
    for split in [s.strip() for s in args.splits.split(",") if s.strip()]:
        report(measure(release, images, str(hub), split))
    return 0


if __name__ == "__main__":
    sys.exit(main())
