"""Logging that cannot fail loudly (rvt_bench.harness.logs): a log file the disk refuses drops its
records; the console gets the run's own lines and, for a stop, exactly one (issue 34: a resume on a
full disk printed ~150 `--- Logging error ---` tracebacks before its one-line stop)."""
from __future__ import annotations

import errno
import io
import logging

import pytest

from rvt_bench.harness.cli import EXIT_CODES, exit_on_known_errors
from rvt_bench.harness.runner import run
from tests.fakes import make_cfg


class FullDisk(io.TextIOBase):
    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture
def full_log_file(tmp_path):
    """A file handler on the root logger (as Hydra's job log is) whose disk is full."""
    handler = logging.FileHandler(tmp_path / "job.log", delay=True)
    handler.stream = FullDisk()
    root = logging.getLogger()
    level, root.level = root.level, logging.INFO
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def test_a_log_file_on_a_full_disk_prints_no_logging_traceback(tmp_path, full_log_file, capsys):
    result = run(make_cfg(tmp_path))
    assert result.metrics["n"] == 6
    assert "Logging error" not in capsys.readouterr().err


def test_a_stop_with_a_full_log_file_is_one_line(tmp_path, full_log_file, capsys, monkeypatch):
    import rvt_bench.harness.rundir as rundir

    run(make_cfg(tmp_path))  # the first run; the resume below meets the full disk
    capsys.readouterr()

    def full(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device", "config.yaml")

    monkeypatch.setattr(rundir, "claim_run_dir", full)
    cfg = make_cfg(tmp_path)
    cfg.run.name = "other"  # a new run directory: claimed, and refused by the disk
    with pytest.raises(SystemExit) as exit_:
        exit_on_known_errors(lambda: run(cfg))
    assert exit_.value.code == EXIT_CODES["no_space"]
    err = capsys.readouterr().err
    shown = [ln for ln in err.replace("\r", "\n").splitlines() if ln.strip() and "%|" not in ln]  # progress bars aside
    assert len(shown) == 1 and shown[0].startswith("error: no space left on the device"), shown
    assert "Logging error" not in err


def test_a_failure_that_echoes_a_huge_answer_is_bounded_with_a_count():
    from rvt_bench.core.types import Prediction

    answer = "ids " + ",".join(str(i) for i in range(200_000)) + " are not in the twin"
    message = Prediction.failure("s", "parse", answer).error["message"]
    assert message == f"{answer[:2000]}... ({len(answer) - 2000:,} more characters)"


def test_a_run_root_with_a_newline_is_printed_escaped(tmp_path, capsys):
    from rvt_bench.harness.main import _report

    root = tmp_path / "a\nb"
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(self.format(record))

    from rvt_bench.core.printable import escape_log_args

    keep = Keep()
    logging.getLogger().addHandler(keep)
    level, logging.getLogger().level = logging.getLogger().level, logging.INFO
    try:
        escape_log_args()
        cfg = make_cfg(tmp_path)
        cfg.run.root = str(root)
        result = run(cfg)
        _report(result)
    finally:
        logging.getLogger().removeHandler(keep)
        logging.getLogger().setLevel(level)
    out = capsys.readouterr().out
    assert f"run directory: {tmp_path}/a\\nb/" in out and "a\nb" not in out
    assert records and not any("a\nb" in r for r in records) and any("a\\nb" in r for r in records)
