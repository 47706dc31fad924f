"""What the command-line entries (run_bench.py, train_dtr1.py) do with an error: every stop is one
line on stderr, and the exit status says which kind of stop it was (EXIT_CODES); the full
traceback goes to the run's log file (<run_dir>/run.log, written by rvt_bench.harness.stops) when the run
directory is known, else to Hydra's job log (<run.root>/.hydra/...), never to the terminal.
Anything that is neither our own error nor a known state of the machine is a bug and keeps its
traceback."""
from __future__ import annotations

import logging
import sys
from typing import Callable, NoReturn, TypeVar

from omegaconf.errors import MissingMandatoryValue

from rvt_bench.core.printable import printable_lines
from rvt_bench.core.secrets import scrub
from rvt_bench.core.types import RunLockedError, RunStopped, RvtBenchError, ServerUnreachableError
from rvt_bench.harness import signals
from rvt_bench.harness.stops import OS_STOPS as _OS_REASONS
from rvt_bench.harness.stops import install_hint

T = TypeVar("T")

log = logging.getLogger(__name__)

EXIT_CODES = {
    "error": 2,            # a known problem with the config or the data (RvtBenchError, a missing value)
    "locked": 3,           # another live run holds the run directory
    "no_space": 4,         # ENOSPC / EDQUOT
    "read_only": 5,        # EROFS
    "permission": 6,       # EACCES / EPERM
    "missing_package": 7,  # a Python package the chosen backend needs is not installed
    "server_down": 8,      # a policy or judge server cannot be reached
    "cannot_succeed": 9,   # the first run.stop_after_same_failures samples all failed alike: a setting to fix
    "all_failed": 10,      # a finished run whose every sample failed (not by the model's output), or that published nothing
    "interrupted": 130,    # Ctrl-C (128 + SIGINT, as shells report it)
    "terminated": 143,     # SIGTERM: scancel, timeout, docker stop (128 + 15)
    "hangup": 129,         # SIGHUP: the terminal or ssh connection went away (128 + 1)
}
"""Exit status per kind of stop (rvt_bench.core.types.STOP_REASONS plus "error"); docs/failures.md "One owner, clear stops"."""

def our_error(exc: BaseException | None) -> RvtBenchError | None:
    """The RvtBenchError behind `exc` (Hydra wraps errors raised while instantiating), if any."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, RvtBenchError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def stop_reason(exc: BaseException) -> str | None:
    """The EXIT_CODES key for `exc`, or None when it is a bug (to be shown with its traceback)."""
    if isinstance(exc, KeyboardInterrupt):
        return signals.reason(exc)
    if isinstance(exc, MissingMandatoryValue):
        return "error"
    if isinstance(exc, OSError) and exc.errno in _OS_REASONS:
        return _OS_REASONS[exc.errno]
    if isinstance(exc, ModuleNotFoundError):
        return "missing_package"
    ours = our_error(exc)
    if isinstance(ours, RunStopped):
        return ours.reason
    if isinstance(ours, RunLockedError):
        return "locked"
    if isinstance(ours, ServerUnreachableError):
        return "server_down"
    return None if ours is None else "error"


def one_line(exc: BaseException) -> str:
    """The line printed for a stop (the error's own message, flattened to one line)."""
    if isinstance(exc, KeyboardInterrupt):
        return f"{signals.said(exc)} before the run started; nothing was written"
    if isinstance(exc, MissingMandatoryValue):
        key = exc.full_key or "a required value"
        return f"{key} is required: pass {key}=... on the command line (see conf/ for what it means)"
    if isinstance(exc, ModuleNotFoundError):
        return f"the Python package {exc.name!r} is not installed: {install_hint(str(exc.name))}"
    if isinstance(exc, OSError) and exc.errno in _OS_REASONS:
        return f"{exc.strerror or exc} ({exc.filename}); set run.root to a writable directory with free space"
    ours = our_error(exc) or exc
    text = " ".join(str(ours).split("\n")[0].split()) if isinstance(ours, RunStopped) else str(ours)
    # a message may quote several reasons on indented lines (every sample failed): keep them, they name the files
    return scrub(text if isinstance(ours, RunStopped) else f"{type(ours).__name__}: {text}")


def exit_on_known_errors(call: Callable[[], T]) -> T:
    """call(); a known stop ends the process with one line on stderr and its EXIT_CODES status.
    The traceback goes to the log files only (Hydra's job log, <run.root>/.hydra/.../run_bench.log;
    the runner has already appended it to <run_dir>/run.log when the run directory was known).
    Stop signals (Ctrl-C, SIGTERM, SIGHUP) are handled while `call` runs (rvt_bench.harness.signals):
    after the first, more are ignored; once it is over they are all ignored (what is left is the
    exit cleanup, or the next job of a sweep, which handles them again)."""
    signals.install()
    try:
        return call()
    except (Exception, KeyboardInterrupt) as exc:
        reason = stop_reason(exc)
        if reason is None:
            raise
        _traceback_to_log_files(exc)
        stop(reason, one_line(exc))
    finally:
        signals.quiet()


def _traceback_to_log_files(exc: BaseException) -> None:
    """Hand the stop's traceback to the root logger's file handlers, not to its console handlers."""
    record = log.makeRecord(log.name, logging.ERROR, __file__, 0, "stopped: %s", (one_line(exc),),
                            (type(exc), exc, exc.__traceback__))
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)


def stop(reason: str, message: str) -> NoReturn:
    """Print `error: <message>` (or `stopped: ...` for a stop signal) on stderr and exit with
    EXIT_CODES[reason]. Stop signals are ignored from here on: what is left is cleanup."""
    signals.quiet()
    prefix = "stopped" if reason in signals.REASONS.values() else "error"
    _close_progress_bars()
    # names from data inside the message (a file name with a newline or an ANSI escape) are shown
    # escaped; secrets this process knows never reach the console
    print(f"{prefix}: {printable_lines(scrub(message))}", file=sys.stderr, flush=True)
    if prefix == "stopped":
        _exit_now(EXIT_CODES[reason])
    sys.exit(EXIT_CODES[reason])


def _exit_now(code: int) -> NoReturn:
    """End the process at once after a stop signal, its cleanup done: the atexit handlers (the sandbox
    pools) run and the logs and streams are flushed, but the interpreter's own finalization is skipped
    (collecting torch's and transformers' objects took ~5 s, past the 2 s a stop may take), and
    requests still in flight on daemon threads (rvt_bench.core.threads) are abandoned, not awaited."""
    import atexit
    import os

    try:
        atexit._run_exitfuncs()
    finally:
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _close_progress_bars() -> None:
    """Close progress bars an exception left open (a loop interrupted mid-way), so the stop's line
    starts on a line of its own instead of after a half-drawn bar."""
    try:
        from tqdm import tqdm
    except ImportError:
        return
    for bar in list(getattr(tqdm, "_instances", [])):
        try:
            bar.close()
        except Exception:  # a bar half torn down by the interrupt: nothing more to draw
            pass
