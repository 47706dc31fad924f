"""rvt_bench.harness.signals in a fresh interpreter each (signal dispositions are per process and
inherited): a stop after a finished command, the next job of a sweep, a signal ignored at start."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rvt_bench.harness.signals import SAID

REPO = Path(__file__).resolve().parent.parent

# the first job of a sweep ends (exit_on_known_errors quiets the signals), the second starts and is
# sent the signal: it must stop with its one line (ignored, the job would sleep on and print)
NEXT_JOB = """
import os, signal, sys, time
from rvt_bench.harness import signals
from rvt_bench.harness.cli import exit_on_known_errors
exit_on_known_errors(lambda: None)
assert all(signal.getsignal(s) is signal.SIG_IGN for s in signals.SIGNALS)
exit_on_known_errors(lambda: (os.kill(os.getpid(), int(sys.argv[1])), time.sleep(5)))
print("not stopped")
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_the_next_job_of_a_sweep_stops_on_a_signal_again(sig):
    proc = subprocess.run([sys.executable, "-c", NEXT_JOB, str(int(sig))], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 128 + sig and proc.stdout == "", proc.stdout + proc.stderr[-2000:]
    assert proc.stderr.startswith(f"stopped: {SAID[sig]}"), proc.stderr[-2000:]


IGNORED = """
import signal
from rvt_bench.harness import signals
previous = signals.install()
print(signal.getsignal(signal.SIGHUP) is signal.SIG_IGN, signal.getsignal(signal.SIGTERM) is signal.SIG_IGN)
"""


def test_a_signal_ignored_when_the_process_started_stays_ignored():
    """nohup: SIGHUP ignored from the start stays so; SIGTERM, not ignored, is handled."""
    proc = subprocess.run([sys.executable, "-c", IGNORED], cwd=REPO, capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    assert proc.returncode == 0 and proc.stdout.split() == ["True", "False"], proc.stdout + proc.stderr[-2000:]


def test_a_stop_during_the_imports_cannot_be_swallowed_by_a_library():
    """The imports' stop line raised SystemExit from inside whatever module was importing; one that
    guards its import with `except BaseException` swallowed it and the run went on with Ctrl-C
    ignored (a full suite once ran the whole demo after the Ctrl-C, exit 0)."""
    code = textwrap.dedent("""
        import os, signal, time
        from rvt_bench.harness import signals
        signals.during_import()
        try:  # a library's guarded import
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(2)
        except BaseException:
            pass
        print("went on")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, (proc.returncode, proc.stdout, proc.stderr[-500:])
    assert "went on" not in proc.stdout
    assert proc.stderr.strip().splitlines() == ["stopped: interrupted (Ctrl-C) while starting; nothing was written"]
