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

from rvt_bench.harness.runner import run
from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.store import read_jsonl
from rvt_bench.metrics.protocols.revos import ReVOSValues

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
    return out.metrics, [ScoreRecord.from_json(r) for r in read_jsonl(out.run_dir / "scores.jsonl")]


def test_fixture_has_twenty_expressions_every_one_scored_without_failure(result):
    metrics, scores = result
    assert len(EXPECTED["expressions"]) == 20
    # n: the expressions the headline averages; ReVOS's no-target ones are excluded from it, counted apart
    assert metrics["n"] + sum((metrics.get("excluded") or {}).values()) == 20 and metrics["failures"] == 0
    assert sorted(s.sample_id for s in scores) == sorted(f"{e['video']}/{e['exp_id']}" for e in EXPECTED["expressions"])


@pytest.mark.parametrize("key", ["J", "F", "A", "R"])
def test_per_expression_values_round_to_visas_csv(result, key):
    _, scores = result
    by_id = {s.sample_id: s.of(ReVOSValues) for s in scores}
    for e in EXPECTED["expressions"]:
        got = by_id[f"{e['video']}/{e['exp_id']}"]
        assert round(100 * getattr(got, key), 2) == e[key], (e["video"], e["exp_id"], key)


@pytest.mark.parametrize("visa_type", ["referring", "reason", "overall"])
@pytest.mark.parametrize("key", ["J", "F", "A", "R", "JF"])
def test_per_type_and_overall_match_visa(result, visa_type, key):
    metrics, _ = result
    ours = "J&F" if key == "JF" else key
    prefix = "" if visa_type == "overall" else VISA_TYPES[visa_type] + "/"
    assert metrics["metrics"][prefix + ours] == pytest.approx(EXPECTED["results"][visa_type][key] / 100, abs=1e-12)


# --- raw pixel values and broken submissions (make_fixture_raw.py, expected_visa_raw.json) ------------

EXPECTED_RAW = json.loads((DATA / "expected_visa_raw.json").read_text())


def _run_raw(tmp, *overrides):
    spec = importlib.util.spec_from_file_location("make_fixture_raw", DATA / "make_fixture_raw.py")
    module = importlib.util.module_from_spec(spec)
    import sys

    sys.path.insert(0, str(DATA))  # make_fixture_raw imports make_fixture's helpers
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(DATA))
    root, pred = module.write_fixture(tmp)
    import run_bench  # noqa: F401

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[
            "+dataset=revos", "+model=precomputed", f"dataset.root={root}", f"model.root={pred}",
            "model.layout=revos", f"run.root={tmp / 'runs'}", f"leaderboard.dir={tmp / 'boards'}", *overrides,
        ])
    out = run(cfg)
    out.root = root
    records = (ScoreRecord.from_json(r) for r in read_jsonl(out.run_dir / "scores.jsonl"))
    return out.metrics, {s.sample_id: s.of(ReVOSValues) for s in records}, out


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    return _run_raw(tmp_path_factory.mktemp("visa_raw"))


@pytest.mark.parametrize("key", ["J", "F", "A", "R"])
def test_raw_per_expression_values_round_to_visas_csv(raw, key):
    """0/255, 0/128, multi-valued and RGB PNGs, overlapping annos, and broken expressions (VISA: 0)."""
    _, scores, _ = raw
    for e in EXPECTED_RAW["expressions"]:
        got = scores[f"{e['video']}/{e['exp_id']}"]
        assert round(100 * np.float64(getattr(got, key)), 2) == e[key], (e["video"], e["exp_id"], key)


@pytest.mark.parametrize("visa_type", ["referring", "reason", "overall"])
@pytest.mark.parametrize("key", ["J", "F", "A", "R", "JF"])
def test_raw_per_type_and_overall_match_visa(raw, visa_type, key):
    metrics, _, _ = raw
    ours = "J&F" if key == "JF" else key
    prefix = "" if visa_type == "overall" else VISA_TYPES[visa_type] + "/"
    assert metrics["metrics"][prefix + ours] == pytest.approx(EXPECTED_RAW["results"][visa_type][key] / 100, abs=1e-12)


def test_raw_broken_expressions_are_listed_as_failures_scored_zero(raw):
    metrics, _, _ = raw
    broken = ["TAO/raw/cat-2/0", "TAO/raw/cat-2/1", "gone_video/0", "gone_video/1",
              "raw_flat/0", "raw_flat/1", "raw_flat/2"]  # wrong size, unreadable, no video, middle, first, no folder
    assert sorted(f["sample_id"] for f in metrics["failed_samples"]) == broken
    assert metrics["failed_zero"] == broken


def test_raw_run_warns_about_non_binary_pngs_and_all_empty_gt(raw):
    metrics, _, _ = raw
    text = " ".join(metrics["warnings"])
    assert "pixel values other than 0/1" in text and "variant=binarized" in text
    assert "UVO/all/raw0/5" in text  # its anno is absent in every frame


def test_raw_baseline_is_the_score_of_empty_predictions(raw):
    """An empty prediction scores J = 1 exactly on the frames whose GT is empty (none is full-frame
    here, so F likewise) and R = 1 everywhere; per type, VISA's rounded mean over expressions."""
    from rvt_bench.loaders.revos import ReVOSDataset

    metrics, _, out = raw
    baseline = metrics["baseline_empty"]
    for type_id, name in [(0, "referring"), (1, "reasoning")]:
        shares = [np.mean([m is None for m in s.target.masks]) for s in ReVOSDataset(out.root) if s.meta["type_id"] == type_id]
        expected = np.mean([round(100 * np.float64(x), 2) for x in shares]) / 100
        assert baseline[f"{name}/J"] == pytest.approx(expected, abs=1e-12)
        assert baseline[f"{name}/F"] == baseline[f"{name}/J"]
    assert baseline["R"] == 1.0
    assert metrics["metrics"]["J&F"] > baseline["J&F"]


EXPECTED_BINARIZED = json.loads((DATA / "expected_visa_binarized.json").read_text())


@pytest.fixture(scope="module")
def binarized(tmp_path_factory):
    return _run_raw(tmp_path_factory.mktemp("visa_binarized"), "dataset.protocol.variant=binarized")


def test_binarized_variant_is_named_in_metrics_and_fingerprint(raw, binarized):
    metrics_visa, _, out_visa = raw
    metrics, _, out = binarized
    assert "A[binarized]" in metrics["metrics"] and "A" not in metrics["metrics"]
    assert metrics["metrics"]["J&F"] == metrics_visa["metrics"]["J&F"]  # J and F do not depend on it
    assert out.run_dir.name != out_visa.run_dir.name  # the variant is part of the run fingerprint


@pytest.mark.parametrize("key", ["J", "F", "A", "R"])
def test_binarized_per_expression_values_are_visas_on_the_same_masks_as_0_1_pngs(binarized, key):
    """variant=binarized on 0/255, 0/128, multi-valued and RGB PNGs = VISA's eval_revos.py on those
    PNGs rewritten as 0/1, with VISA's summed GT (2 where annos overlap): expected_visa_binarized.json."""
    _, scores, _ = binarized
    for e in EXPECTED_BINARIZED["expressions"]:  # a record keeps plain keys; the aggregate names the variant
        got = scores[f"{e['video']}/{e['exp_id']}"]
        assert round(100 * np.float64(getattr(got, key)), 2) == e[key], (e["video"], e["exp_id"], key)


@pytest.mark.parametrize("visa_type", ["referring", "reason", "overall"])
@pytest.mark.parametrize("key", ["A", "R"])
def test_binarized_per_type_and_overall_match_visa_on_0_1_pngs(binarized, visa_type, key):
    metrics, _, _ = binarized
    prefix = "" if visa_type == "overall" else VISA_TYPES[visa_type] + "/"
    expected = EXPECTED_BINARIZED["results"][visa_type][key] / 100
    assert metrics["metrics"][f"{prefix}{key}[binarized]"] == pytest.approx(expected, abs=1e-12)


def test_binarized_and_visa_variants_agree_on_0_1_pngs():
    """A model's mask is 0/1: the variant changes nothing there."""
    from rvt_bench.core import masks
    from rvt_bench.core.types import Prediction
    from rvt_bench.metrics.protocols.revos import ReVOSProtocol

    sample = _one_frame_sample([masks.encode(np.ones((4, 4), dtype=bool))])
    pred = np.zeros((4, 4), dtype=bool)
    pred[:2, :3] = True
    prediction = Prediction("v/0", masks=[masks.encode(pred)])
    visa, binary = ReVOSProtocol().score(sample, prediction), ReVOSProtocol(variant="binarized").score(sample, prediction)
    visa, binary = visa.of(ReVOSValues), binary.of(ReVOSValues)
    assert (visa.A, visa.R) == (binary.A, binary.R)


def _one_frame_sample(foreground):
    from rvt_bench.core import masks
    from rvt_bench.core.types import Sample, Target

    gt = np.zeros((4, 4), dtype=bool)
    gt[:2, :2] = True
    return Sample(id="v/0", dataset="revos", split="valid", modality="video", frames=["f.jpg"], frame_ids=["f"],
                  query="q", task="segmentation", meta={"type_id": 0},
                  target=Target(masks=[masks.encode(gt)], foreground=foreground))


def test_a_model_mask_counts_as_zero_one_values_in_a_and_r():
    """GT 2x2, prediction 2x3 (2 false-positive pixels), foreground = the whole 4x4 frame. A model's
    mask has values 0/1 (as VISA's index PNGs): A = 14/16, R = 1 - 2/16. (The same prediction as a
    0/255 PNG gives VISA's A = 10/16 and R = 0: test_raw_* below.)"""
    from rvt_bench.core import masks
    from rvt_bench.core.types import Prediction
    from rvt_bench.metrics.protocols.revos import ReVOSProtocol

    pred = np.zeros((4, 4), dtype=bool)
    pred[:2, :3] = True
    sample = _one_frame_sample([masks.encode(np.ones((4, 4), dtype=bool))])
    rec = ReVOSProtocol().score(sample, Prediction("v/0", masks=[masks.encode(pred)])).of(ReVOSValues)
    assert rec.A == 14 / 16
    assert rec.R == 1 - 2 / (16 + 1e-6)


def test_r_is_left_out_without_foreground_masks():
    from rvt_bench.core.types import Prediction
    from rvt_bench.metrics.protocols.revos import ReVOSProtocol

    rec = ReVOSProtocol().score(_one_frame_sample(None), Prediction("v/0"))
    assert rec.of(ReVOSValues).R is None and "R" not in rec.to_json()["values"]["revos"] and rec.of(ReVOSValues).A == 12 / 16
    assert "R" not in ReVOSProtocol().aggregate([rec])["metrics"]


def test_run_summary_prints_the_warnings_and_each_metrics_empty_baseline(raw):
    from rvt_bench.harness.runner import format_summary

    metrics, _, out = raw
    text = format_summary(out)
    assert "WARNING: " in text and "variant=binarized" in text
    baseline = metrics["baseline_empty"]["J&F"]
    row = next(line for line in text.splitlines() if line.startswith("  J&F "))
    assert f" {100 * baseline:.2f}  %" in row  # the empty-prediction column of the headline table
