"""The folders a run writes to (run.root, leaderboard.dir), tried with a real temporary file before
the first sample: a leaderboard.dir that is a file (/dev/null) or a file system that takes no files
(/proc/self) used to be found only after all model work, as a traceback (issue 34). Every problem
is one line: a config error (exit status 2) for a path that cannot be a folder of files, the
machine's own stop (no space, read-only, permission: rvt_bench.harness.stops.OS_STOPS) otherwise.
"""
from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from omegaconf import DictConfig

from rvt_bench.core.printable import printable
from rvt_bench.core.types import ConfigError
from rvt_bench.harness.stops import OS_STOPS

PROBE_PREFIX = ".rvt-bench-write-check."


def try_folder(path: str | Path, setting: str) -> None:
    """Write, then remove, a temporary file in the folder `path`, or, while it does not exist yet,
    in the nearest folder above it that does (where the run will create it): nothing is created or
    left behind, so shards starting together on a fresh root do not race. setting: the config key
    that named it (in the message). Raises ConfigError (one line, naming the setting) when it
    cannot hold files (a file, a pseudo file system such as /proc); the OSError itself for the
    machine's own stops (OS_STOPS: ENOSPC, EROFS, EACCES...), which the runner turns into their
    one-line stop."""
    where = Path(path).absolute()
    probe = next((p for p in (where, *where.parents) if p.exists()), Path("/"))
    try:
        if not probe.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, f"{printable(probe)} is not a directory")
        fd, name = tempfile.mkstemp(prefix=PROBE_PREFIX, dir=probe)
        try:
            os.write(fd, b"\n")
        finally:
            os.close(fd)
            os.unlink(name)
    except OSError as exc:
        if exc.errno in OS_STOPS:
            raise
        raise ConfigError(f"{setting}={printable(path)} cannot hold files ({exc.strerror or exc}); set {setting} to a "
                          f"writable directory") from None


def try_outputs(cfg: DictConfig) -> None:
    """`try_folder` for every folder this run will write to: run.root, and leaderboard.dir when
    the run publishes (leaderboard.publish, a full run). Raises as `try_folder`."""
    try_folder(cfg.run.root, "run.root")
    if cfg.leaderboard.publish and cfg.run.limit is None:
        try_folder(cfg.leaderboard.dir, "leaderboard.dir")
