"""One rule for a missing package (bench/harness/stops.py install_hint): the line names the project's
extra (`pip install -e ".[tensorboard]"`) and the exit status is 7 in a single run and in a sweep."""
import subprocess
import sys
from pathlib import Path

import pytest

from rvt_bench.harness.cli import EXIT_CODES

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("sweep", [False, True])
def test_a_missing_logger_package_names_its_extra_with_one_exit_status(tmp_path, sweep):
    hide = tmp_path / "hide"  # tensorboard made missing: its import fails as an uninstalled one does
    (hide / "tensorboard").mkdir(parents=True)
    (hide / "tensorboard" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'tensorboard'\", name='tensorboard')\n")
    (tmp_path / "preds").mkdir()
    cmd = [sys.executable, str(REPO / "run_bench.py"), *(["-m"] if sweep else []), "+dataset=reasonseg",
           f"dataset.root={REPO / 'demo/reasonseg'}", "+model=precomputed", f"model.root={tmp_path / 'preds'}",
           "logger=tensorboard", f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}",
           *(["hydra.sweep.dir=" + str(tmp_path / "sweep"), "run.limit=1,2"] if sweep else [])]
    env = {"PYTHONPATH": f"{hide}:{REPO}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == EXIT_CODES["missing_package"], proc.stderr[-3000:]
    assert 'pip install -e ".[tensorboard]"' in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
