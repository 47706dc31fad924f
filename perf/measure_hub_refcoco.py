"""Measure how RefCOCO's hub copy lmms-lab/RefCOCO (read by `dataset.loader.gt=hub_polygon`) differs
from LISA's protocol on the official REFER files, split by split (testA, testB). Not a test; needs the
REFER layout (dataset.root of +dataset=refcoco) and the hub copy (downloaded once through the
Hugging Face cache, or a local copy of the repository). docs/benchmarks/refcoco.md "Hub copy".

Per split it prints:
- refs and sentences on each side (LISA: REFER refcoco/unc refs of the split, every sentence; hub:
  rows, the sentences of their `answer`; rows sharing a question_id are counted, the first is
  compared), and the refs missing on either side (a hub row matches the REFER ref whose ann_id is
  its question_id, which lmms-eval reads as the annotation id);
- matched refs whose sentences differ (after LISA's strip().lower());
- for each matched ref the IoU between the hub's one-polygon mask and LISA's summed-polygons GT
  (LISA's counting: value-255 pixels ignored, an overlap pixel neither class): mean, min, and how
  many are below 1.0;
- the gIoU / cIoU (LISA's float32 protocol, rvt_bench.metrics.protocols.refcoco) that a prediction
  perfect on the hub (the hub mask of the sentence's ref) gets on LISA's GT, over the sentences of
  LISA's split whose ref has a hub row.

    python perf/measure_hub_refcoco.py --refer-root REFER_SEG [--hub lmms-lab/RefCOCO]
        [--revision a5dff0b3194715fda69b2d6a0d2aaafb41eaa407] [--splits testA,testB]
    python perf/measure_hub_refcoco.py --tiny [--work DIR]   # offline, on the test fixtures
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _by(samples, key) -> dict:
    out: dict = {}
    for s in samples:
        out.setdefault(str(s.meta[key]), []).append(s)
    return out


def measure(refer_root: str, hub: str, revision: str | None, sub: str) -> dict:
    """The figures of one split (module docstring) as a dict."""
    from rvt_bench.core.masks import decode
    from rvt_bench.core.types import Prediction
    from rvt_bench.loaders.refcoco import RefCOCODataset
    from rvt_bench.metrics.protocols.refcoco import RefCOCOProtocol

    lisa = RefCOCODataset(refer_root, f"refcoco/{sub}")
    copy = RefCOCODataset(None, f"refcoco/{sub}", gt="hub_polygon", hf_dataset=hub, hf_revision=revision)
    lisa_refs, hub_rows = _by(lisa, "ref_id"), _by(copy, "question_id")
    ann_of = {ref: str(ss[0].meta["ann_id"]) for ref, ss in lisa_refs.items()}
    matched = {ref: ann for ref, ann in ann_of.items() if ann in hub_rows}
    out = {"split": sub, "lisa_refs": len(lisa_refs), "lisa_sentences": len(lisa), "lisa_errors": len(lisa.errors),
           "hub_refs": len(hub_rows), "hub_sentences": len(copy), "hub_errors": len(copy.errors),
           "hub_shared_ids": len({s.meta["ref_index"] for s in copy}) - len(hub_rows),
           "revision": (copy.data_source or {}).get("revision", ""),
           "missing_on_hub": len(lisa_refs) - len(matched),
           "missing_in_lisa": len(set(hub_rows) - set(ann_of.values())), "matched": len(matched)}
    out["sentences_differ"] = sum(
        [s.query for s in lisa_refs[ref]] != [s.query for s in hub_rows[ann]] for ref, ann in matched.items())
    ious = []
    for ref, ann in matched.items():
        sample, row = lisa_refs[ref][0], hub_rows[ann][0]
        target, hub_mask = decode(sample.target.masks[0]), decode(row.target.masks[0])
        if target.shape != hub_mask.shape:
            ious.append(0.0)
            continue
        keep = ~decode(sample.target.ignore[0]) if sample.target.ignore[0] is not None else np.ones_like(target)
        inter = int((hub_mask & target).sum())
        union = int(((hub_mask | target) & keep).sum())
        ious.append(1.0 if union == 0 else inter / union)
    out["iou_mean"] = float(np.mean(ious)) if ious else float("nan")
    out["iou_min"] = float(np.min(ious)) if ious else float("nan")
    out["iou_below_1"] = sum(i < 1.0 for i in ious)
    protocol = RefCOCOProtocol()
    records = []
    for ref, ann in matched.items():
        hub_rle = hub_rows[ann][0].target.masks[0]
        for s in lisa_refs[ref]:
            records.append(protocol.score(s, Prediction(sample_id=s.id, task="segmentation", masks=[hub_rle])))
    if records:
        metrics = protocol.aggregate(records)["metrics"]
        out.update(perfect_giou=metrics["gIoU"], perfect_ciou=metrics["cIoU"], perfect_n=len(records))
    else:
        out.update(perfect_giou=float("nan"), perfect_ciou=float("nan"), perfect_n=0)
    return out


def report(r: dict) -> None:
    sub = r["split"]
    print(f"refcoco/{sub}  hub revision {r['revision']}")
    print(f"  {sub:6s} LISA (REFER unc): {r['lisa_refs']} refs, {r['lisa_sentences']} sentences "
          f"({r['lisa_errors']} left out as data errors); hub: {r['hub_refs']} refs (distinct question_ids), "
          f"{r['hub_sentences']} sentences ({r['hub_errors']} left out; rows sharing a question_id with "
          f"another: {r['hub_shared_ids']})")
    print(f"  {sub:6s} refs missing on the hub: {r['missing_on_hub']}; hub rows missing in LISA's split: "
          f"{r['missing_in_lisa']}; matched: {r['matched']} (sentences differ in {r['sentences_differ']})")
    print(f"  {sub:6s} hub one-polygon mask vs LISA's summed GT, IoU per matched ref: mean {r['iou_mean']:.4f} "
          f"min {r['iou_min']:.4f} below 1.0: {r['iou_below_1']} of {r['matched']}")
    print(f"  {sub:6s} perfect-on-the-hub prediction on LISA's GT: gIoU {r['perfect_giou']:.4f} "
          f"cIoU {r['perfect_ciou']:.4f} ({r['perfect_n']} sentences)")


def tiny(work: Path) -> tuple[str, str]:
    """The REFER fixture of tests/data/refcoco_parity and its lmms-lab/RefCOCO copy
    (tests/hub_fixtures.py), written under `work`: (refer_root, hub directory)."""
    sys.path.insert(0, str(REPO))
    from tests import hub_fixtures
    from tests.precomputed_runs import load_script

    make = load_script(REPO / "tests" / "data" / "refcoco_parity" / "make_fixture.py", "refcoco_make_fixture")
    root, _ = make.write_fixture(work)
    return str(root), str(hub_fixtures.lmms_refcoco_repo(root, work / "lmms_refcoco"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refer-root", help="LISA's refer_seg directory (dataset.root of +dataset=refcoco)")
    ap.add_argument("--hub", default="lmms-lab/RefCOCO", help="hub id or a local copy of the repository")
    ap.add_argument("--revision", default="a5dff0b3194715fda69b2d6a0d2aaafb41eaa407")
    ap.add_argument("--splits", default="testA,testB")
    ap.add_argument("--tiny", action="store_true", help="offline, on the test fixtures")
    ap.add_argument("--work", help="where --tiny writes its fixtures (default: a temporary folder)")
    args = ap.parse_args(argv)
    if args.tiny:
        work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="measure_hub_refcoco_"))
        os.environ["HF_HOME"] = str(work / "hf_home")  # images written out of the parquet go there
        os.environ["HF_HUB_OFFLINE"] = "1"
        refer_root, hub, revision = *tiny(work), None
    elif not args.refer_root:
        ap.error("--refer-root is required (or --tiny)")
    else:
        refer_root, hub, revision = args.refer_root, args.hub, args.revision
    import logging

    logging.getLogger("rvt_bench").setLevel(logging.ERROR)  # the variant's warning and data errors: counted below
    for sub in [s.strip() for s in args.splits.split(",") if s.strip()]:
        report(measure(refer_root, hub, revision, sub))
    return 0


if __name__ == "__main__":
    sys.exit(main())
