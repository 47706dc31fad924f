"""Stops by signal: Ctrl-C (SIGINT), SIGTERM (what `scancel`, `timeout` and `docker stop` send) and
SIGHUP (a dropped ssh connection) all stop a run the same way: the signal becomes a `StopSignal`
(a KeyboardInterrupt) in the main thread, the run unwinds through its normal close path (the
adapter's close, the sandboxes' cleanup at exit), and the command line prints one line saying
how much is saved, with exit status 128 + the signal's number (130, 143, 129).

One line, whatever the moment:
- while Python imports the command line (`during_import`): the line and the exit status at once;
- a second signal while the first one's stop is under way (Ctrl-C twice, `timeout` after a
  Ctrl-C) is ignored, so the cleanup that removes sandbox processes and cgroups finishes;
- once the command has returned (`quiet`), what is left is the interpreter's exit cleanup
  (atexit: sandbox pools): a signal then is ignored too.
Scoring worker processes (run.score_workers) ignore Ctrl-C and die quietly of SIGTERM / SIGHUP
(rvt_bench.metrics.protocols.base.Protocol.score_many): the main process stops the pool.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
REASONS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hangup"}
SAID = {signal.SIGINT: "interrupted (Ctrl-C)", signal.SIGTERM: "terminated (SIGTERM)", signal.SIGHUP: "hung up (SIGHUP)"}

_stopping = False
# Ignored when this process started (`nohup` ignores SIGHUP, a shell ignores Ctrl-C for its background
# jobs): their users chose that, so they stay ignored. Taken once, at import: `quiet` later sets SIG_IGN
# itself, and that must not stop the next job of a sweep from handling the signals again.
_IGNORED_AT_START = frozenset(s for s in SIGNALS if signal.getsignal(s) is signal.SIG_IGN)


class StopSignal(KeyboardInterrupt):
    """SIGTERM or SIGHUP raised in the main thread; a KeyboardInterrupt (what Ctrl-C raises), so
    every path that handles Ctrl-C handles them alike. signum: the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(SAID.get(signum, f"signal {signum}"))
        self.signum = signum


def reason(exc: BaseException) -> str:
    """The stop reason (rvt_bench.harness.cli.EXIT_CODES key) of a KeyboardInterrupt or StopSignal."""
    return REASONS.get(getattr(exc, "signum", signal.SIGINT), "interrupted")


def said(exc: BaseException) -> str:
    """'interrupted (Ctrl-C)', 'terminated (SIGTERM)' or 'hung up (SIGHUP)' for a stop's line."""
    return SAID.get(getattr(exc, "signum", signal.SIGINT), "interrupted (Ctrl-C)")


def _raise(signum: int, frame: Any) -> None:
    global _stopping
    if _stopping:  # the first signal's stop is under way: let its cleanup finish
        return
    _stopping = True
    if signum == signal.SIGINT:
        raise KeyboardInterrupt  # Python's own, as without this handler
    raise StopSignal(signum)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _set(handler: Any) -> dict[int, Any]:
    """Set `handler` for SIGNALS; the previous handlers (to restore). Nothing outside the main thread,
    and a signal ignored since the process started stays ignored (_IGNORED_AT_START)."""
    if not _main_thread():
        return {}
    return {s: signal.signal(s, handler) for s in SIGNALS if s not in _IGNORED_AT_START}


def restore(previous: dict[int, Any]) -> None:
    for s, handler in previous.items():
        signal.signal(s, handler)


def install() -> dict[int, Any]:
    """SIGINT, SIGTERM and SIGHUP raise StopSignal in the main thread from now on (the first one;
    later ones are ignored while it unwinds). Returns the previous handlers."""
    global _stopping
    _stopping = False
    return _set(_raise)


@contextmanager
def stopping() -> Iterator[None]:
    """`install` for the block (a run), the previous handlers back after it: a run started by
    submitit, a notebook or a test stops on SIGTERM the way the command line does."""
    previous = install()
    try:
        yield
    finally:
        restore(previous)


def quiet() -> None:
    """From now on every stop signal is ignored: the command has said what it had to say and
    only the exit cleanup (sandbox processes, cgroups) is left. SIG_IGN, not a Python handler:
    Python resets its own handlers to the default (death) while the interpreter shuts down."""
    _set(signal.SIG_IGN)


def during_import() -> dict[int, Any]:
    """While the command line's modules import (heavy: seconds), a stop signal prints its one line
    and exits with its status (no traceback from inside an import). Returns the previous handlers,
    for `restore` once the imports are done."""
    def stop_now(signum: int, frame: Any) -> None:
        _set(signal.SIG_IGN)
        print(f"stopped: {SAID[signum]} while starting; nothing was written", file=sys.stderr, flush=True)
        sys.stdout.flush()
        # os._exit, not SystemExit: the signal lands inside some library's import, and an import
        # guarded by `except BaseException` (or a bare except) swallowed SystemExit, so the run went on
        # with the signal ignored (seen once in a full suite: the demo ran to the end, exit 0).
        # Nothing is written yet and nothing needs cleaning up before the imports are done.
        os._exit(128 + signum)

    return _set(stop_now)
