"""End to end parity with VISA: `+dataset=revos +model=precomputed` on a 20-expression ReVOS-format
fixture gives the J, F, J&F, A and R that VISA's `tools/eval_revos.py` printed on the same files.

Fixture: tests/data/visa_parity/make_fixture.py (regenerated into tmp_path here, deterministic).
Expected: tests/data/visa_parity/expected_visa.json, printed by VISA @ ec158fd run unchanged on that
fixture (tests/data/visa_parity/run_visa.py). VISA prints percent; we report fractions.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from bench.runner import run
from bench.store import read_jsonl

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "visa_parity"
EXPECTED = json.loads((DATA / "expected_visa.json").read_text())
VISA_TYPES = {"referring": "referring", "reason": "reasoning"}


def _make_fixture_module():
    spec = importlib.util.spec_from_file_location("make_fixture", DATA / "make_fixture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("visa_parity")
    root, pred = _make_fixture_module().write_fixture(tmp)
    import run_bench  # noqa: F401  (registers the ${repo:} resolver the configs use)

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[
            "+dataset=revos", "+model=precomputed", f"dataset.root={root}", f"model.root={pred}",
            "model.layout=revos", f"run.root={tmp / 'runs'}", f"leaderboard.dir={tmp / 'boards'}",
        ])
    out = run(cfg)
    return out.metrics, list(read_jsonl(out.run_dir / "scores.jsonl"))


def test_fixture_has_twenty_expressions_every_one_scored_without_failure(result):
    metrics, scores = result
    assert len(EXPECTED["expressions"]) == 20
    assert metrics["n"] == 20 and metrics["failures"] == 0
    assert sorted(s["sample_id"] for s in scores) == sorted(f"{e['video']}/{e['exp_id']}" for e in EXPECTED["expressions"])


@pytest.mark.parametrize("key", ["J", "F", "A", "R"])
def test_per_expression_values_round_to_visas_csv(result, key):
    _, scores = result
    by_id = {s["sample_id"]: s for s in scores}
    for e in EXPECTED["expressions"]:
        got = by_id[f"{e['video']}/{e['exp_id']}"]
        assert round(100 * got[key], 2) == e[key], (e["video"], e["exp_id"], key)


@pytest.mark.parametrize("visa_type", ["referring", "reason", "overall"])
@pytest.mark.parametrize("key", ["J", "F", "A", "R", "JF"])
def test_per_type_and_overall_match_visa(result, visa_type, key):
    metrics, _ = result
    ours = "J&F" if key == "JF" else key
    prefix = "" if visa_type == "overall" else VISA_TYPES[visa_type] + "/"
    assert metrics["metrics"][prefix + ours] == pytest.approx(EXPECTED["results"][visa_type][key] / 100, abs=1e-12)


def _one_frame_sample(foreground):
    from bench import masks
    from bench.types import Sample, Target

    gt = np.zeros((4, 4), dtype=bool)
    gt[:2, :2] = True
    return Sample(id="v/0", dataset="revos", split="valid", modality="video", frames=["f.jpg"], frame_ids=["f"],
                  query="q", task="segmentation", meta={"type_id": 0},
                  target=Target(masks=[masks.encode(gt)], foreground=foreground))


def test_a_and_r_are_computed_on_binarised_masks():
    """GT 2x2, prediction 2x3 (2 false-positive pixels), foreground = the whole 4x4 frame.
    Binarised: A = 14/16, R = 1 - 2/16. (VISA on a 0/255 PNG of the same prediction gives A = 10/16
    and R = 0: see metrics/protocols/revos.py.)"""
    from bench import masks
    from bench.types import Prediction
    from metrics.protocols.revos import ReVOSProtocol

    pred = np.zeros((4, 4), dtype=bool)
    pred[:2, :3] = True
    sample = _one_frame_sample([masks.encode(np.ones((4, 4), dtype=bool))])
    rec = ReVOSProtocol().score(sample, Prediction("v/0", masks=[masks.encode(pred)]))
    assert rec["A"] == 14 / 16
    assert rec["R"] == 1 - 2 / (16 + 1e-6)


def test_r_is_left_out_without_foreground_masks():
    from bench.types import Prediction
    from metrics.protocols.revos import ReVOSProtocol

    rec = ReVOSProtocol().score(_one_frame_sample(None), Prediction("v/0"))
    assert "R" not in rec and rec["A"] == 12 / 16
    assert "R" not in ReVOSProtocol().aggregate([rec])["metrics"]
