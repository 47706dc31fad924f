"""The preflight checks what each backend needs before the first sample, perception weights
included: weights neither in the local Hugging Face cache nor reachable stop the run with one
line naming the model id (not a failure of every sample)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rvt_bench.adapters.twin.backends.depth_anything import DepthAnythingBackend
from rvt_bench.core.types import AdapterError

REPO = Path(__file__).resolve().parent.parent
ABSENT = "rvt-bench-tests/no-such-model"


def test_hub_weights_not_cached_and_no_hub_is_one_error_naming_the_model(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(AdapterError, match=f"{ABSENT}.*not in the local Hugging Face cache and HF_HUB_OFFLINE is set"):
        DepthAnythingBackend(model_id=ABSENT).preflight()


def test_a_missing_local_weights_directory_is_named(tmp_path):
    with pytest.raises(AdapterError, match="does not exist"):
        DepthAnythingBackend(model_id=str(tmp_path / "weights")).preflight()


def test_an_existing_local_directory_or_built_model_passes(tmp_path):
    DepthAnythingBackend(model_id=str(tmp_path)).preflight()
    DepthAnythingBackend.tiny().preflight()  # components already built: nothing to fetch


def test_foundation_perception_checks_only_enabled_tools(monkeypatch):
    from rvt_bench.adapters.twin.foundation import FoundationPerception

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    absent = DepthAnythingBackend(model_id=ABSENT)
    FoundationPerception(depth=absent, disable=["DepthAnything2"]).preflight()
    with pytest.raises(AdapterError, match=ABSENT):
        FoundationPerception(depth=absent).preflight()


def test_run_bench_with_foundation_perception_and_no_weights_stops_before_the_first_sample(tmp_path):
    env = {**__import__("os").environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "perception=foundation",
                           f"perception.sam2.model_id={ABSENT}", f"run.root={tmp_path / 'runs'}", "run.limit=1"],
                          cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert ABSENT in proc.stderr and "Traceback" not in proc.stderr
    assert not list((tmp_path / "runs").rglob("predictions.jsonl"))
