"""Several runs at once: `+suite=NAME` (rvt_bench.harness.suite), the table every multirun ends with
(rvt_bench.harness.sweep_table) and `rvt-bench compare` over run.limit runs and several runs. The
command line is run as a user runs it, on fixtures in the benchmarks' own formats."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rvt_bench.harness.suite import Outcome, run_suite, suite_table
from tests import hub_fixtures as fx

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """ReasonSeg (val, test), ReVOS (valid) and LLM-Seg40K (validation) in their release layouts, with
    prediction PNGs in one folder per benchmark (preds_<dataset name>)."""
    base = tmp_path_factory.mktemp("suite")
    root = fx.write_lisa_reasonseg(base / "data")
    for split in ("val", "test"):
        fx.reasonseg_predictions(root, split, base / "preds_reasonseg")
    sys.path.insert(0, str(REPO / "tests" / "data" / "visa_parity"))
    try:
        from make_fixture_raw import write_fixture
    finally:
        sys.path.pop(0)
    revos_root, pred = write_fixture(base / "revos")
    pred.rename(base / "preds_revos")
    from tests.test_datasets_llmseg40k import MASKS, write_llmseg40k

    llm = write_llmseg40k(base / "llm")
    (base / "preds_llmseg40k").mkdir()
    for (image, k), mask in MASKS.items():
        Image.fromarray(np.roll(mask, 1, 0).astype(np.uint8) * 255).save(base / "preds_llmseg40k" / f"{Path(image).stem}_{k}.png")
    return {"base": base, "reasonseg": root, "revos": revos_root, "llmseg40k": llm}


def cli(*args, cwd):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


def test_a_suite_runs_every_benchmark_and_prints_one_table_with_all_of_them(data):
    base = data["base"]
    out = cli("+model=precomputed", "+suite=reasoning_seg", f"model.root={base}/preds_${{dataset.name}}",
              f"suite.datasets.reasonseg.root={data['reasonseg']}", f"suite.datasets.revos.root={data['revos']}",
              f"suite.datasets.llmseg40k.root={data['llmseg40k']}", f"run.root={base / 'runs'}",
              f"leaderboard.dir={base / 'boards'}", "run.bootstrap.B=50", "run.report=false", cwd=base)
    assert out.returncode == 0, out.stderr[-3000:]
    table = out.stdout[out.stdout.index("## suite reasoning_seg: 4 of 4 benchmarks ran"):]
    rows = [line.split(" | ")[:3] for line in table.splitlines() if line.startswith("| ") and "run directory" not in line]
    assert {(r[0][2:], r[1]) for r in rows[:9]} == {("reasonseg", "val"), ("reasonseg", "test"), ("revos", "valid"),
                                                    ("llmseg40k", "validation")}
    # then each benchmark in its paper's layout: ReasonSeg's val and test runs on one line
    assert "**ReasonSeg, in LISA's Table 1 layout" in table and "**ReVOS (valid), in VISA's layout" in table
    lisa_line = next(line for line in table.splitlines() if line.startswith("| precomputed |") and "run-" not in line)
    assert lisa_line.count(" – ") == 0  # val, test short / long / overall all filled
    assert sorted(p.name for p in (base / "boards").glob("*.csv")) == ["llmseg40k.csv", "reasonseg.csv", "revos.csv"]
    # every cell of VISA's table has its interval, not only the headline (bench/harness/table_cis.py)
    import json

    revos = json.loads(next((base / "runs" / "revos" / "precomputed").glob("*/metrics.json")).read_text())
    for key in ("referring/J", "reasoning/F", "R"):
        ci = revos["ci"][key]
        assert ci["low"] <= revos["metrics"][key] <= ci["high"] and ci["B"] == 50, key


def test_a_failed_benchmark_is_a_line_of_the_table_and_the_others_run():
    class Done:
        def __init__(self, name):
            self.metrics = {"headline": ["gIoU"], "metrics": {"gIoU": 0.5}, "ci": {}, "n": 3, "failures": 0}
            self.run_dir = f"/runs/{name}"

    def compose(overrides):
        name = next(o.split("=", 1)[1] for o in overrides if o.startswith("+dataset="))
        if name == "revos":
            raise FileNotFoundError("no ReVOS here")
        from omegaconf import OmegaConf

        return OmegaConf.create({"dataset": {"name": name}})

    from omegaconf import OmegaConf

    suite = OmegaConf.create({"name": "s", "benchmarks": [{"dataset": "reasonseg", "split": "val"},
                                                         {"dataset": "revos", "split": "valid"},
                                                         {"dataset": "llmseg40k", "split": "validation"}],
                              "datasets": {"revos": {"root": "/data/ReVOS", "protocol": {"variant": "binarized"}}}})
    outcomes = run_suite(suite, ["+model=m", "+suite=s", "dataset.root=/x"], compose, lambda cfg: Done(cfg.dataset.name))
    assert [o.error for o in outcomes] == ["", "FileNotFoundError: no ReVOS here (a bug: traceback in the log)", ""]
    assert outcomes[1].overrides == ["+model=m", "+dataset=revos", "dataset.split=valid", "dataset.root=/data/ReVOS",
                                     "dataset.protocol.variant=binarized"]
    table = suite_table("s", outcomes)
    assert "2 of 3 benchmarks ran" in table and "| revos | valid | FAILED |" in table


@pytest.fixture(scope="module")
def sweep(data):
    """A four-point multirun (two splits, one missing, x two run.limit values), run once for the
    tests that read its table and its runs, in whatever order they run."""
    base = data["base"]
    return cli("-m", "+dataset=reasonseg", "+model=precomputed", f"model.root={base}/preds_reasonseg",
               f"dataset.root={data['reasonseg']}", "dataset.split=val,nope", "run.limit=1,2", f"run.root={base / 'sweep'}",
               "run.bootstrap.B=50", "run.report=false", cwd=base)


def test_a_multirun_ends_with_one_table_of_its_points_and_a_failed_point_stops_nothing(data, sweep):
    base, out = data["base"], sweep
    assert out.returncode == 2 and "error: 2 runs of the sweep failed" in out.stderr, out.stderr[-3000:]
    table = out.stdout[out.stdout.index("## sweep: 4 points"):]
    lines = [line for line in table.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| dataset.split | run.limit | benchmark | gIoU | cIoU | n |")
    assert [line.split(" | ")[:2] for line in lines[1:]] == [["| val", "1"], ["| val", "2"], ["| nope", "1"], ["| nope", "2"]]
    assert "no split 'nope'" in lines[3]
    assert list((base / "sweep" / ".hydra" / "multirun").rglob("points.md"))


def test_compare_takes_run_limit_runs_as_partial_and_several_runs_against_the_first(data, sweep):
    from rvt_bench.harness.compare import compare_many, format_many

    run_dir = next((data["base"] / "sweep" / "reasonseg" / "precomputed").iterdir())
    # a directory without a full run stands for its largest run.limit run (here run.limit=2)
    results = compare_many([run_dir, run_dir / "metrics.limit1.json", run_dir / "metrics.limit2.json"], b=50)
    assert [r["partial"] for r in results] == ["A: run.limit=2 (the first 2 samples); B: run.limit=1 (the first 1 samples)",
                                               "A: run.limit=2 (the first 2 samples); B: run.limit=2 (the first 2 samples)"]
    assert [r["n_shared"] for r in results] == [1, 2]
    text = format_many(results)
    # runs are labelled by display name and run name; three runs of one run directory by position too
    assert "PARTIAL" in text and re.search(r"\| gIoU \| precomputed \([0-9a-f]+\) #2 \|", text)


def test_an_unsandboxed_benchmark_is_marked_in_the_suite_table():
    metrics = {"metrics": {"gIoU": 0.5}, "ci": {}, "headline": ["gIoU"], "n": 2, "failures": 0}
    table = suite_table("s", [Outcome("reasonseg", "val", metrics, "runs/a", sandbox="none"),
                              Outcome("revos", "valid", {**metrics, "metrics": {"J&F": 0.4}, "headline": ["J&F"]},
                                      "runs/b", sandbox="bwrap")])
    assert "WARNING: model-written code ran UNSANDBOXED (isolation=none) in: reasonseg" in table
    assert "| reasonseg [UNSANDBOXED] | val | gIoU |" in table and "| revos | valid | J&F |" in table


def _fixture_module(folder: str, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"suite_{folder}_{name}", REPO / "tests" / "data" / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_video_suite_runs_its_six_benchmarks_and_prints_one_table(tmp_path):
    # ReVOS, MeViS valid_u, Ref-DAVIS17, ReasonVOS, Ref-SAV, Long-RVOS: each benchmark's own exact-format
    # fixture, with its predictions in one folder per benchmark (preds_<dataset name>)
    import json

    from tests import mevis_fixture

    fixture_module = _fixture_module
    roots = {}
    roots["revos"], pred = fixture_module("visa_parity", "make_fixture_raw").write_fixture(tmp_path / "revos")
    pred.rename(tmp_path / "preds_revos")
    roots["mevis"], pred = mevis_fixture.write(tmp_path / "mevis")
    pred.rename(tmp_path / "preds_mevis")
    roots["ref_davis17"], pred = fixture_module("ref_davis17_parity", "make_fixture").write_fixture(tmp_path / "davis")
    pred.rename(tmp_path / "preds_ref_davis17")
    roots["reasonvos"], pred = fixture_module("reasonvos_parity", "make_fixture").write_fixture(tmp_path / "reasonvos")
    pred.rename(tmp_path / "preds_reasonvos")
    for name, folder in (("ref_sav", "ref_sav_eval"), ("long_rvos", "long_rvos")):
        module = fixture_module(f"{name}_parity", "make_fixture")
        roots[name] = tmp_path / folder
        module.write_fixture(roots[name])
        module.write_predictions(roots[name], tmp_path / f"preds_{name}")
    out = cli("+model=precomputed", "+suite=video_seg", f"model.root={tmp_path}/preds_${{dataset.name}}",
              *(f"suite.datasets.{name}.root={root}" for name, root in roots.items()),
              f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'lb'}", "run.report=false", cwd=tmp_path)
    assert "## suite video_seg: 6 of 6 benchmarks ran" in out.stdout, out.stdout[-3000:] + out.stderr[-3000:]
    table = out.stdout[out.stdout.index("## suite video_seg"):]
    # each row is its benchmark's own reference number on its fixture (printed by the reference code:
    # tests/data/parity/mevis_eval_printed.json, ref_davis17_parity/expected_visa.json, reasonvos_parity/expected.json,
    # ref_sav_parity/reference/expected_sa2va.json, long_rvos_parity/reference/expected_long_rvos.json)
    sav = json.loads((REPO / "tests/data/ref_sav_parity/reference/expected_sa2va.json").read_text())["results"]
    lrv = json.loads((REPO / "tests/data/long_rvos_parity/reference/expected_long_rvos.json").read_text())
    for row in ("| mevis | valid_u | J&F | 48.4 |", "| ref_davis17 | valid | J&F | 35.5 |", "| reasonvos | test | J&F | 57.6 |",
                "| revos | valid | J&F |", f"| ref_sav | valid | J&F | {sav['overall']['JF']:.1f} |",
                f"| long_rvos | valid | J&F | {100 * lrv['overall']['J&F']:.1f} |"):
        assert row in table, table[:2000]



def test_the_referring_suite_runs_grefcoco_and_gseval_beside_refcoco(tmp_path):
    # gRefCOCO val/testA/testB and GSEval mask mode: their fixtures and predictions (model.root per
    # benchmark); RefCOCO's data not given, so its eight splits are lines saying so and the others run
    import json
    import shutil

    g = _fixture_module("grefcoco_parity", "make_fixture")
    groot = g.write_fixture(tmp_path / "grefcoco")
    g.write_predictions(groot, tmp_path / "preds_grefcoco")
    s = _fixture_module("gseval_parity", "make_fixture")
    s.write_fixture(tmp_path / "gseval")
    s.write_predictions(tmp_path / "gseval", tmp_path / "preds_gseval")
    out = cli("+model=precomputed", "+suite=referring_seg", f"model.root={tmp_path}/preds_${{dataset.name}}",
              f"suite.datasets.grefcoco.root={groot}", f"suite.datasets.gseval.root={tmp_path / 'gseval'}",
              f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'lb'}", "run.report=false",
              "run.bootstrap.B=20", cwd=tmp_path)
    assert "## suite referring_seg: 4 of 12 benchmarks ran" in out.stdout, out.stdout[-3000:] + out.stderr[-3000:]
    table = out.stdout[out.stdout.index("## suite referring_seg"):]
    assert table.count("no data: set suite.datasets.refcoco.root=DIR") == 8
    rela = json.loads((REPO / "tests/data/grefcoco_parity/reference/expected_rela.json").read_text())
    for split in ("val", "testA", "testB"):
        assert f"| grefcoco | {split} | cIoU | {rela[split]['results']['grefcoco']['cIoU']:.1f} |" in table, table[:3000]
    gs = json.loads((REPO / "tests/data/gseval_parity/reference/expected_gseval.json").read_text())["mask"]
    assert f"| gseval | mask | gIoU | {100 * gs['overall_giou']:.1f} |" in table, table[:3000]


def test_the_concept_suite_scores_every_subset_of_saco_gold(tmp_path):
    # SA-Co/Gold's fixture (the metaclip subset's files) written under each subset's file and dump names;
    # each subset is its own run and gives the reference's oracle numbers
    import json
    import shutil

    module = _fixture_module("saco_parity", "make_fixture")
    gt, pred = tmp_path / "gt", tmp_path / "pred"
    module.write_fixture(gt)
    module.write_predictions(pred)
    from rvt_bench.loaders.saco_gold import SUBSETS, gt_file

    for subset in SUBSETS:
        for a in "abc":
            if subset != "metaclip_nps":
                shutil.copy(gt / gt_file("metaclip_nps", a), gt / gt_file(subset, a))
        dump = pred / f"gold_{subset}" / "dumps" / f"gold_{subset}" / "coco_predictions_segm.json"
        if not dump.exists():
            dump.parent.mkdir(parents=True)
            shutil.copy(pred / module.DUMP, dump)
    out = cli("+model=precomputed", "+suite=concept_seg", f"model.root={pred}", f"suite.datasets.saco_gold.root={gt}",
              f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'lb'}", "run.report=false",
              "run.bootstrap.B=20", cwd=tmp_path)
    assert "## suite concept_seg: 7 of 7 benchmarks ran" in out.stdout, out.stdout[-3000:] + out.stderr[-3000:]
    want = json.loads((REPO / "tests/data/saco_parity/reference/expected_cgf1.json").read_text())["abc"]["metrics"]
    runs = sorted((tmp_path / "runs" / "saco_gold" / "precomputed").glob("*/metrics.json"))
    bodies = {json.loads(p.read_text())["split"]: json.loads(p.read_text()) for p in runs}
    assert sorted(bodies) == sorted(SUBSETS)
    for subset, body in bodies.items():
        assert body["metrics"]["cgF1"] == pytest.approx(want["cgF1"], abs=1e-9), subset
