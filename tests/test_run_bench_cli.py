"""The command line a user types: `python run_bench.py ...` through Hydra, with the real embedded
tiny policy (SmolLM2 GGUF shipped in a pip package; nothing downloaded). Small datasets (two demo
images copied into a ReasonSeg-format root) keep it to seconds per run."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parent.parent
SMALL = ["coffee_cup", "chelsea_nose"]


@pytest.fixture(scope="module")
def small_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("reasonseg")
    for split_dir in ("val", "val/instances"):
        (root / split_dir).mkdir(parents=True, exist_ok=True)
    for name in SMALL:
        for suffix in (".jpg", ".json"):
            shutil.copy(REPO / "demo/reasonseg/val" / f"{name}{suffix}", root / "val")
        shutil.copy(REPO / "demo/reasonseg/val/instances" / f"{name}.json", root / "val/instances")
    return root


def bench(*args, cwd=REPO):
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def run_dir_of(proc) -> Path:
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("run directory: "), last
    return Path(last.removeprefix("run directory: "))


def test_run_then_rerun_does_no_model_work(small_root, tmp_path):
    args = ["+dataset=reasonseg", f"dataset.root={small_root}", "dataset.split=val", "+model=dtr1",
            "model.max_total_tokens=192", "model.max_new_tokens=96",
            f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}"]
    first = bench(*args)
    run_dir = run_dir_of(first)
    for name in ("config.yaml", "manifest.json", "predictions.jsonl", "scores.jsonl", "metrics.json"):
        assert (run_dir / name).exists(), name
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["n"] == 2 and 0.0 <= metrics["parse_rate"] <= 1.0
    assert "gIoU" in first.stdout
    body = (run_dir / "metrics.json").read_text()
    preds = (run_dir / "predictions.jsonl").read_text()

    second = bench(*args)
    assert run_dir_of(second) == run_dir
    assert "no model work" in second.stdout + second.stderr
    assert (run_dir / "metrics.json").read_text() == body
    assert (run_dir / "predictions.jsonl").read_text() == preds
    board = pd.read_csv(tmp_path / "boards" / "reasonseg.csv")
    assert len(board) == 1 and board["policy"][0] == "smollm2:llama_cpp"


def test_multirun_over_two_settings_writes_two_rows(small_root, tmp_path):
    bench("-m", "+dataset=reasonseg", f"dataset.root={small_root}", "+model=dtr1",
          "model.max_new_tokens=96", "model.max_total_tokens=96,128",
          f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}")
    board = pd.read_csv(tmp_path / "boards" / "reasonseg.csv", dtype={"fingerprint": str})
    assert len(board) == 2 and board["fingerprint"].nunique() == 2


def test_run_name_and_roots_are_honoured(small_root, tmp_path):
    proc = bench("+dataset=reasonseg", f"dataset.root={small_root}", "+model=dtr1", "run.name=first-try",
                 "model.max_total_tokens=64", f"run.root={tmp_path / 'r'}", f"leaderboard.dir={tmp_path / 'b'}")
    assert run_dir_of(proc) == tmp_path / "r" / "reasonseg" / "dtr1" / "first-try"
    assert (tmp_path / "b" / "reasonseg.csv").exists()


@pytest.mark.parametrize("args, expect", [
    ([], ["name: demo", "_target_: rvt_bench.adapters.dtr1.adapter.DTR1Adapter"]),
    (["+dataset=revos", "+model=dtr1", "dataset.root=/data/ReVOS", "dataset.split=valid"],
     ["name: revos", "root: /data/ReVOS", "split: valid"]),
])
def test_config_composes(args, expect):
    out = bench(*args, "--cfg", "job").stdout
    for line in expect:
        assert line in out


@pytest.mark.parametrize("dataset, expected", [("revos", "JPEGImages/<video>/<frame>.jpg"),
                                               ("reasonseg", "<split>/<name>.json"),
                                               ("llmseg40k", "split/<split>.json"),
                                               ("rvtbench", "<split>.jsonl")])
def test_missing_dataset_root_says_what_to_fix_in_one_line(tmp_path, dataset, expected):
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), f"+dataset={dataset}",
                           f"dataset.root={tmp_path / 'nope'}", f"run.root={tmp_path / 'runs'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1, proc.stderr  # one line, its layout and download included
    assert "DatasetFormatError" in proc.stderr and "nope" in proc.stderr and expected in proc.stderr
    assert "the data is published at" in proc.stderr


def test_a_backend_that_cannot_run_stops_once_with_the_setting_to_fix(tmp_path):
    # An OpenAI-compatible server that is not running (nothing listens on port 9): one message
    # naming policy.base_url, before any sample, instead of every sample failing.
    tok = tmp_path / "tok"
    from tests.tiny_models import build_tokenizer

    build_tokenizer(tok)
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "policy=openai", "policy.model=dtr1",
                           "policy.base_url=http://127.0.0.1:9/v1", f"policy.tokenizer={tok}", "policy.max_retries=0",
                           f"run.root={tmp_path / 'runs'}", "run.limit=2"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 8, proc.stderr[-2000:]  # rvt_bench.harness.cli.EXIT_CODES["server_down"]
    assert "policy.base_url=http://127.0.0.1:9/v1 cannot be reached" in proc.stderr and "Traceback" not in proc.stderr
    assert not list((tmp_path / "runs").rglob("predictions.jsonl"))


@pytest.mark.parametrize("argv, expect", [
    (["policy.decoding=free", "-m"], ["-m", "policy.decoding=free", "+dataset=demo", "+model=dtr1"]),
    (["+dataset=revos", "--cfg", "job", "--resolve"], ["--cfg", "job", "--resolve", "+dataset=revos", "+model=dtr1"]),
    (["--info", "defaults", "run.limit=2", "+model=jit"], ["--info", "defaults", "run.limit=2", "+model=jit", "+dataset=demo"]),
])
def test_flags_and_overrides_in_any_order_parse_as_hydra_expects(argv, expect):
    from rvt_bench.harness.main import with_default_groups

    assert with_default_groups(argv) == expect


def test_cfg_after_an_override_prints_the_resolved_config():
    out = bench("+dataset=revos", "dataset.root=/data/ReVOS", "--cfg", "job", "--resolve").stdout
    assert "name: revos" in out and "root: /data/ReVOS" in out and "${" not in out


HELPERS = ["rvt_bench.harness.compare", "rvt_bench.harness.report", "rvt_bench.harness.visualize",
           "rvt_bench.harness.attribute", "rvt_bench.harness.catalog", "rvt_bench.leaderboards.render",
           "tests.tiny_models", "tests.lisa_tiny", "tests.tiny_vlm", "tests.data.visa_parity.make_fixture",
           "tests.data.visa_parity.make_fixture_raw"]


@pytest.mark.parametrize("module", HELPERS)
def test_every_python_m_helper_answers_help_and_writes_nothing(module, tmp_path):
    proc = subprocess.run([sys.executable, "-m", module, "--help"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout and list(tmp_path.iterdir()) == []
