"""Every file the harness reads outside a dataset goes through the bounded reader
(rvt_bench.core.files): a FIFO, a directory or an oversize file is refused before a byte is read,
never read until the machine runs out of memory or the run hangs (issue 34: `policy.turns_file=/dev/zero`
reached 22.5 GB). /dev/zero itself is not used here on purpose: a regression would exhaust CI's
memory instead of failing; a FIFO and an oversize file take the same path (not a regular file,
over the size cap)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

from rvt_bench.core import files
from rvt_bench.core.types import AdapterError, DatasetFormatError
from rvt_bench.harness.cli import EXIT_CODES

REPO = Path(__file__).resolve().parent.parent


@contextmanager
def fifo_at(path: Path):
    """A FIFO at `path` without a writer. Should a regression read it blocking, a watchdog opens and
    closes a writer after 10 s: the reader gets end-of-file and the test fails instead of hanging."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    blocked = []

    def unblock():
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # succeeds only while a reader has it open
            blocked.append(True)
        except OSError:
            pass

    watchdog = threading.Timer(10.0, unblock)
    watchdog.start()
    try:
        yield path
    finally:
        watchdog.cancel()
    assert not blocked, f"{path} was read as a stream (a FIFO, a device): the bounded reader was not used"


def test_read_text_refuses_a_fifo_a_directory_and_an_oversize_file(tmp_path):
    with fifo_at(tmp_path / "fifo") as fifo, pytest.raises(files.FileLimitError, match="a FIFO"):
        files.read_text(fifo)
    with pytest.raises(files.FileLimitError, match="a directory"):
        files.read_text(tmp_path)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (2 << 20))
    with pytest.raises(files.FileLimitError, match="over the 1 MB limit"):
        files.read_text(big, max_mb=1)
    (tmp_path / "latin1").write_bytes(b"caf\xe9")
    with pytest.raises(DatasetFormatError, match="not UTF-8"):
        files.read_text(tmp_path / "latin1")


def test_a_turns_file_that_is_a_fifo_is_the_policy_s_error(tmp_path):
    from rvt_bench.adapters.policy.scripted import ScriptedPolicy

    with fifo_at(tmp_path / "turns.json") as fifo, pytest.raises(AdapterError, match="not a regular file \\(a FIFO\\)"):
        ScriptedPolicy.from_file(str(fifo))


def test_a_turns_file_that_is_a_fifo_stops_the_run_in_one_line(tmp_path):
    with fifo_at(tmp_path / "turns.json") as fifo:
        proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "policy=scripted", f"policy.turns_file={fifo}",
                               "run.limit=1", f"run.root={tmp_path / 'runs'}"], cwd=REPO, capture_output=True, text=True,
                              timeout=300)
    assert proc.returncode == EXIT_CODES["error"], proc.stderr[-2000:]
    shown = [ln for ln in proc.stderr.splitlines() if ln.strip() and "%|" not in ln]
    assert len(shown) == 1 and "turns_file" in shown[0] and "(a FIFO); refused" in shown[0], shown


def test_a_judge_cache_entry_that_is_a_fifo_is_a_miss(tmp_path):
    from rvt_bench.metrics.judge import JudgeCache

    cache = JudgeCache(tmp_path)
    with fifo_at(cache.path("ab" * 32)):
        assert cache.get("ab" * 32) is None


def test_a_perception_cache_entry_that_is_a_fifo_is_recomputed(tmp_path):
    from rvt_bench.adapters.twin.cache import ToolCache

    cache = ToolCache(tmp_path)
    with fifo_at(cache.path("cd" * 32)):
        assert cache.get("cd" * 32) is None
    assert cache.stats.corrupt == 1


def test_a_sweep_point_that_is_a_fifo_is_refused(tmp_path):
    from rvt_bench.harness.sweep_table import POINT_FILE, read_points

    with fifo_at(tmp_path / "0" / POINT_FILE), pytest.raises(files.FileLimitError, match="a FIFO"):
        read_points(tmp_path)


def test_a_predictions_file_that_is_a_fifo_fails_attribution_in_one_line(tmp_path):
    from rvt_bench.adapters.dtr1.attribute import AttributionError, load_run

    (tmp_path / "config.yaml").write_text("model: {}\n")
    (tmp_path / "scores.jsonl").write_text('{"sample_id": "s", "funnel": {}}\n')
    with fifo_at(tmp_path / "predictions.jsonl"), pytest.raises(AttributionError, match="a FIFO"):
        load_run(tmp_path)


def test_a_paper_csv_that_is_a_directory_is_refused(tmp_path):
    from rvt_bench.leaderboards.paper import read

    (tmp_path / "x.csv").mkdir()
    with pytest.raises(files.FileLimitError, match="a directory"):
        read(tmp_path / "x.csv")


def test_a_lisa_checkpoint_index_that_is_oversize_is_the_adapter_s_error(tmp_path):
    from rvt_bench.adapters.lisa.weights import checkpoint_files

    index = tmp_path / "model.safetensors.index.json"
    index.touch()
    os.truncate(index, int((files.TEXT_MB + 1) * (1 << 20)))  # sparse: refused by its size, no byte read
    with pytest.raises(AdapterError, match="over the 64 MB limit"):
        checkpoint_files(tmp_path)
