#!/usr/bin/env python
"""Measure what Seg-Zero's hub copy of ReasonSeg (Ricky06662/ReasonSeg_val|_test) changes in gIoU
and cIoU, on a fixture: LISA's files (tests/hub_fixtures.py: ignore shapes on 3 of 4 val images, one of
them EXIF-rotated) scored as LISA scores them, and the same files converted as Seg-Zero's
create_reasonseg_hf.py converts them (ignore pixels -> target, masks at the un-rotated size,
text[0]), scored with the same predictions.

    .venv/bin/python scripts/reasonseg_hub_effect.py

Prints, per prediction set, gIoU and cIoU (%) of: LISA's files (all rows), LISA's files on the rows
the copy keeps (the rotated one left out, as Seg-Zero's evaluation drops it), and the copy.
The fixture's numbers say how each difference acts, not how large it is on the real splits: that
depends on how many of the 200 / 779 images have ignore shapes or EXIF rotations, which could not
be counted here (docs/benchmarks/reasonseg.md "Data by hub id").
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rvt_bench.adapters.precomputed import PrecomputedAdapter  # noqa: E402
from rvt_bench.core.types import Prediction  # noqa: E402
from rvt_bench.loaders.reasonseg import ReasonSegDataset  # noqa: E402
from rvt_bench.metrics.protocols.reasonseg import ReasonSegProtocol  # noqa: E402
from tests.hub_fixtures import reasonseg_predictions, segzero_parquet, write_lisa_reasonseg  # noqa: E402


def scores(samples, predict) -> tuple[float, float]:
    protocol = ReasonSegProtocol()
    records = [protocol.score(s, predict(s)) for s in samples]
    m = protocol.aggregate(records)["metrics"]
    return 100 * m["gIoU"], 100 * m["cIoU"]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        import os

        os.environ["HF_HOME"] = str(base / "hf")
        root = write_lisa_reasonseg(base / "data")
        copy = segzero_parquet(root, "val", base / "repo")
        official = list(ReasonSegDataset(root, "val"))
        hub = list(ReasonSegDataset(None, "val", hf_dataset=str(copy)))
        kept = {s.id for s in hub}
        official_kept = [s for s in official if s.id in kept]
        png = PrecomputedAdapter(reasonseg_predictions(root, "val", base / "pred"), layout="reasonseg")

        def lisa_target(s):  # the target exactly as LISA labels it (1), ignore regions left out
            return Prediction(s.id, task="segmentation", masks=[by_id[s.id].target.masks[0]])

        by_id = {s.id: s for s in official}
        ignored = sum(1 for s in official if s.target.ignore[0] is not None)
        print(f"fixture: {len(official)} images ({ignored} with ignore shapes, 1 EXIF-rotated); the copy keeps {len(hub)}")
        print("| predictions | LISA's files, all rows | LISA's files, rows the copy keeps | Seg-Zero hub copy |")
        print("|---|---|---|---|")
        for name, predict in (("target shifted 1 px + half of each ignore region", png.predict),
                              ("exactly LISA's target (label 1)", lisa_target)):
            cells = [scores(samples, predict) for samples in (official, official_kept, hub)]
            print(f"| {name} | " + " | ".join(f"gIoU {g:.2f} / cIoU {c:.2f}" for g, c in cells) + " |")


if __name__ == "__main__":
    main()
