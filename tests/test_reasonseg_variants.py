"""ReasonSeg's named protocol variants (issue 42 item 2): `dataset.protocol.variant=segzero` gives
the number Seg-Zero's own scripts print on a LISA-format fixture with ignore regions, an empty-union
sample and failed samples; the default still gives LISA's. Expected numbers:
tests/data/segzero/segzero_scoring.json, written by tests/data/segzero/reference/run_segzero_scoring.py
(Seg-Zero @42a3345 and LISA @3cb2d43 functions run on the fixture)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rvt_bench.core import benchmark
from rvt_bench.core.masks import encode
from rvt_bench.core.types import Prediction, Sample, Target
from rvt_bench.metrics.protocols import ReasonSegProtocol

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "segzero"
EXPECTED = json.loads((DATA / "segzero_scoring.json").read_text())


def run(tmp_path, *overrides):
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "+dataset=reasonseg", f"dataset.root={DATA / 'reasonseg'}",
                           "dataset.split=val", "+model=precomputed", f"model.root={DATA / 'predictions'}",
                           f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}", "run.bootstrap.B=0",
                           *overrides], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1].removeprefix("run directory: "))
    return run_dir, json.loads((run_dir / "metrics.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("variants")
    return run(tmp, "dataset.protocol.variant=segzero"), run(tmp), tmp


def test_segzero_variant_gives_the_number_seg_zeros_scripts_print(runs):
    (run_dir, metrics), _, _ = runs
    assert metrics["metrics"]["gIoU"] == pytest.approx(EXPECTED["gIoU"], abs=1e-12)
    assert f"{metrics['metrics']['gIoU']:.4f}" == EXPECTED["printed"].rsplit(" ", 1)[-1]
    assert "cIoU" not in metrics["metrics"]  # calculate_iou.py prints none
    assert metrics["protocol_variants"]["variant"] == "segzero"
    records = {r["sample_id"]: r for r in map(json.loads, (run_dir / "scores.jsonl").read_text().splitlines())}
    for name, theirs in EXPECTED["per_sample"].items():
        ours = records[name]["values"]["mask_iou"]
        if theirs["kept"]:
            assert (ours["I"], ours["U"]) == (theirs["intersection"], theirs["union"]), name
        else:
            assert ours["U"] == 0 and not records[name]["failed"], name
    assert metrics["excluded"] == {"empty-union samples (Seg-Zero's rule)": 1}


def test_default_still_gives_lisas_number_on_the_same_fixture(runs):
    _, (_, metrics), _ = runs
    assert metrics["metrics"]["gIoU"] == pytest.approx(EXPECTED["lisa"]["gIoU"], abs=1e-6)
    assert metrics["metrics"]["cIoU"] == pytest.approx(EXPECTED["lisa"]["cIoU"], abs=1e-6)
    assert metrics["metrics"]["gIoU"] != pytest.approx(EXPECTED["gIoU"], abs=1e-3)
    assert metrics["protocol_variants"].get("variant") is None


def test_the_variant_is_in_the_fingerprint_and_the_leaderboard_row(runs):
    import pandas as pd

    (seg_dir, seg), (lisa_dir, lisa), tmp = runs
    assert seg["fingerprint"] != lisa["fingerprint"] and seg_dir != lisa_dir
    board = pd.read_csv(tmp / "boards" / "reasonseg.csv", dtype={"fingerprint": str}, keep_default_na=False)
    assert dict(zip(board["fingerprint"], board["variant"])) == {seg["fingerprint"]: "segzero", lisa["fingerprint"]: ""}


def test_an_unknown_variant_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"variant must be null .* \['segzero'\], got 'lisa2'"):
        ReasonSegProtocol(variant="lisa2")


def test_the_yaml_declares_exactly_the_protocols_variants():
    assert set(benchmark.variants("reasonseg")) == set(ReasonSegProtocol.variants)
    assert benchmark.variants("revos") == {}


def test_ignore_counts_as_target_and_only_unfailed_empty_unions_are_left_out():
    import numpy as np

    def sample(sid, gt, ignore):
        return Sample(id=sid, dataset="reasonseg", split="val", modality="image", frames=["x.jpg"], frame_ids=["x"],
                      query="q", task="segmentation", target=Target(masks=[encode(gt)], ignore=[encode(ignore)]))

    gt, ignore, pred = (np.zeros((4, 4), bool) for _ in range(3))
    gt[0, :2], ignore[1, :2], pred[:2, 0] = True, True, True
    p = ReasonSegProtocol(variant="segzero")
    r = p.score(sample("a", gt, ignore), Prediction("a", masks=[encode(pred)]))
    assert (r.values["mask_iou"].I, r.values["mask_iou"].U) == (2, 4)  # LISA's rule: I 1, U 2
    empty = np.zeros((4, 4), bool)
    left = p.score(sample("b", empty, empty), Prediction("b", masks=[encode(empty)]))
    failed = p.score(sample("c", empty, empty), Prediction("c", error={"kind": "parse", "message": "x"}))
    assert p.aggregate([r, left])["metrics"]["gIoU"] == 0.5
    assert p.aggregate([r, left, failed])["metrics"]["gIoU"] == 0.25


def test_render_marks_the_run_and_seg_zeros_published_rows_with_their_variant(runs):
    from rvt_bench.leaderboards.render import render

    (_, seg), (_, lisa), tmp = runs
    text = render("reasonseg", tmp / "boards")
    runs_table, paper_table = text.split("**ReasonSeg", 1)
    line = {name: next(x for x in runs_table.splitlines() if f"| {name} |" in x) for name in (seg["run_name"], lisa["run_name"])}
    assert "[variant: segzero]" in line[seg["run_name"]].split(f"| {seg['run_name']} |")[0]
    assert "[variant" not in line[lisa["run_name"]]  # the default: no mark
    assert "| Seg-Zero-7B (paper, verified) [variant: segzero] |" in paper_table
    assert "| VisionReasoner-7B (paper, verified) [variant: segzero] |" in paper_table
    assert "| LISA-7B-LLaVA1.5 (paper, verified) |" in paper_table  # a copy of LISA's value keeps LISA's rule
    assert "Seg-Zero-7B [variant: segzero]" in render("reasonseg", tmp / "boards", fmt="latex")


def test_published_rows_of_seg_zero_and_visionreasoner_say_their_variant():
    from rvt_bench.leaderboards.paper import paper_rows

    rows = paper_rows("reasonseg")
    own = [r for r in rows if r["model"].startswith(("Seg-Zero", "VisionReasoner"))]
    assert own and all(r["variant"] == "segzero" for r in own)
    assert all(r["variant"] == "" for r in rows if r["paper_id"] == "arXiv:2308.00692")


def test_a_published_row_naming_an_undeclared_variant_is_refused(tmp_path):
    import csv

    from rvt_bench.core.types import DatasetFormatError
    from rvt_bench.leaderboards.paper import COLUMNS, read

    path = tmp_path / "x.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, COLUMNS)
        writer.writeheader()
        writer.writerow({**{c: "x" for c in COLUMNS}, "dataset": "reasonseg", "value_printed": "50.0", "setting": "",
                         "variant": "segzer0"})
    with pytest.raises(DatasetFormatError, match=r"row 1 .*variant 'segzer0' is not one that benchmark 'reasonseg' declares"):
        read(path)
