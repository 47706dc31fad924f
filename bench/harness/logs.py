"""Logging that cannot fail loudly: a log file the disk refuses (full, read-only, gone) drops its
records silently instead of printing logging's `--- Logging error ---` traceback for each one
(issue 34: ~150 of them before the one-line stop of a resume on a full disk). The stop itself is
reported once, on the console, by the runner (rvt_bench.harness.stops)."""
from __future__ import annotations

import logging
import types


def _drop(self: logging.Handler, record: logging.LogRecord) -> None:
    """Handler.handleError of a log file: the record is lost, nothing is printed."""


def quiet_log_files(logger: logging.Logger | None = None) -> None:
    """Make every file handler of `logger` (the root logger by default: Hydra's job log, run.log)
    drop a record it cannot write instead of printing a traceback. Idempotent; console handlers
    keep logging's own behaviour."""
    for handler in (logger or logging.getLogger()).handlers:
        if isinstance(handler, logging.FileHandler) and getattr(handler.handleError, "__func__", None) is not _drop:
            handler.handleError = types.MethodType(_drop, handler)  # type: ignore[method-assign]
