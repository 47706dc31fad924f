"""The folders a run writes to are tried with a real file before the first sample
(rvt_bench.harness.outputs): `leaderboard.dir=/dev/null` or `/proc/self` used to fail only after
all model work, as a traceback, with report.html not written (issue 34)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rvt_bench.core.types import ConfigError
from rvt_bench.harness.cli import EXIT_CODES
from rvt_bench.harness.outputs import try_folder
from rvt_bench.harness.runner import run
from tests.fakes import calls, make_cfg

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("folder, why", [("/dev/null", "/dev/null is not a directory"),
                                         ("/proc/self", "No such file or directory")])
def test_a_leaderboard_dir_that_cannot_hold_files_stops_before_the_first_sample(tmp_path, folder, why):
    cfg = make_cfg(tmp_path)
    cfg.leaderboard.dir = folder
    with pytest.raises(ConfigError) as err:
        run(cfg)
    assert str(err.value) == f"leaderboard.dir={folder} cannot hold files ({why}); set leaderboard.dir to a writable directory"
    assert calls(tmp_path) == []  # no sample was predicted


def test_a_run_root_below_a_file_stops_before_the_first_sample(tmp_path):
    (tmp_path / "file").write_text("")
    cfg = make_cfg(tmp_path)
    cfg.run.root = str(tmp_path / "file" / "runs")
    with pytest.raises(ConfigError, match="^run.root=.*cannot hold files"):
        run(cfg)
    assert calls(tmp_path) == []


def test_a_partial_run_does_not_need_its_leaderboard(tmp_path):
    cfg = make_cfg(tmp_path)
    cfg.leaderboard.dir, cfg.run.limit = "/dev/null", 2
    assert run(cfg).metrics["n"] == 2


def test_trying_a_folder_leaves_nothing_behind(tmp_path):
    (tmp_path / "kept").mkdir()
    try_folder(tmp_path / "kept", "run.root")
    try_folder(tmp_path / "a" / "b", "run.root")
    assert [p.name for p in tmp_path.iterdir()] == ["kept"] and list((tmp_path / "kept").iterdir()) == []


def test_a_path_with_a_newline_is_printed_escaped(tmp_path):
    (tmp_path / "x\ny").write_text("")
    with pytest.raises(ConfigError) as err:
        try_folder(tmp_path / "x\ny", "leaderboard.dir")
    assert "\n" not in str(err.value) and "x\\ny" in str(err.value)


def test_run_bench_with_leaderboard_dir_dev_null_is_one_line_with_status_2(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "leaderboard.dir=/dev/null", "policy=scripted",
                           "policy.turns_file=examples/sandbox_probe.json", f"run.root={tmp_path / 'runs'}"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == EXIT_CODES["error"], proc.stderr[-2000:]
    shown = [ln for ln in proc.stderr.splitlines() if ln.strip() and "%|" not in ln]
    assert shown == ["error: ConfigError: leaderboard.dir=/dev/null cannot hold files (/dev/null is not a directory); "
                     "set leaderboard.dir to a writable directory"]
    assert not list((tmp_path / "runs").rglob("predictions*.jsonl"))
