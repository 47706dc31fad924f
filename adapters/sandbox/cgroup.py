"""Per-sandbox totals through cgroups: memory summed over every process of the sandbox (page cache
and its tmpfs scratch included) and, where the cpu controller is writable, at most one CPU.

cgroup v2 (a writable delegated subtree with the memory controller, memory.max / memory.events) is
used where present, else cgroup v1 (memory.limit_in_bytes / memory.oom_control, cpu.cfs_quota_us);
otherwise `CgroupSet.create` returns None and the caller falls back to per-process address-space
limits (see adapters/sandbox/runner.py). Each sandbox gets directories named
``rvt-sandbox-<harness pid>-<n>`` under the harness's own cgroup; directories left by a harness
that was killed are removed by the next one (`sweep_stale`).
"""
from __future__ import annotations

import functools
import itertools
import logging
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
PREFIX = "rvt-sandbox-"
_counter = itertools.count()


@dataclass
class CgroupSet:
    """The cgroup directories of one sandbox (one per v1 hierarchy, or one v2 directory)."""

    version: int
    dirs: list[Path]
    memory: Path

    @classmethod
    def create(cls, memory_bytes: int, cpus: float | None = 1.0) -> "CgroupSet | None":
        """Make the sandbox's cgroups with these limits; None where no writable cgroup exists."""
        layout = _layout()
        if layout is None:
            return None
        version, bases = layout
        name = f"{PREFIX}{os.getpid()}-{next(_counter)}"
        made: list[Path] = []
        try:
            if version == 2:
                d = bases["memory"] / name
                d.mkdir()
                made.append(d)
                (d / "memory.max").write_text(str(memory_bytes))
                if (d / "memory.swap.max").exists():
                    (d / "memory.swap.max").write_text("0")
                if cpus and (d / "cpu.max").exists():
                    (d / "cpu.max").write_text(f"{int(cpus * 100000)} 100000")
                return cls(2, made, d)
            mem = bases["memory"] / name
            mem.mkdir()
            made.append(mem)
            (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
            if (mem / "memory.memsw.limit_in_bytes").exists():
                try:
                    (mem / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
                except OSError:
                    pass
            if cpus and "cpu" in bases:
                cpu = bases["cpu"] / name
                cpu.mkdir()
                made.append(cpu)
                (cpu / "cpu.cfs_quota_us").write_text(str(int(cpus * int((cpu / "cpu.cfs_period_us").read_text()))))
            return cls(1, made, mem)
        except OSError as exc:
            log.warning("sandbox: could not set up a cgroup (%s); memory is limited per process only", exc)
            for d in reversed(made):
                _rmdir(d)
            return None

    def procs_files(self) -> list[str]:
        """The files a process writes its pid to, to join every cgroup of the set."""
        return [str(d / "cgroup.procs") for d in self.dirs]

    def oom_kills(self) -> int:
        """Processes the kernel's OOM killer has killed in this sandbox so far."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            text = (self.memory / name).read_text()
        except OSError:
            return 0
        m = re.search(r"^oom_kill (\d+)$", text, re.M)
        return int(m.group(1)) if m else 0

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.memory / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def kill_all(self) -> None:
        """SIGKILL every process still in the sandbox's cgroup."""
        if self.version == 2 and (self.memory / "cgroup.kill").exists():
            try:
                (self.memory / "cgroup.kill").write_text("1")
                return
            except OSError:
                pass
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def remove(self) -> None:
        for d in reversed(self.dirs):
            _rmdir(d)


def _rmdir(d: Path) -> None:
    try:
        d.rmdir()
    except OSError:
        pass


@functools.lru_cache(maxsize=1)
def _layout() -> tuple[int, dict[str, Path]] | None:
    """(version, {controller: directory of this process's cgroup}) where writable, else None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    own: dict[str, str] = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            own[c] = path
    if (ROOT / "cgroup.controllers").exists() and "" in own:
        base = ROOT / own[""].lstrip("/")
        enabled = (base / "cgroup.subtree_control").read_text().split() if (base / "cgroup.subtree_control").exists() else []
        if "memory" in enabled and os.access(base, os.W_OK):
            sweep_stale([base])
            return 2, {"memory": base}
        return None
    bases: dict[str, Path] = {}
    for controller in ("memory", "cpu"):
        if controller not in own:
            continue
        for mount in (ROOT / controller, ROOT / "cpu,cpuacct"):
            d = mount / own[controller].lstrip("/")
            if (mount / "cgroup.procs").exists() and d.is_dir() and os.access(d, os.W_OK):
                bases[controller] = d
                break
    if "memory" not in bases:
        return None
    sweep_stale(list(bases.values()))
    return 1, bases


def sweep_stale(bases: list[Path]) -> None:
    """Remove sandbox cgroups of harness processes that no longer exist (a kill -9 leaves them)."""
    for base in bases:
        for d in base.glob(PREFIX + "*"):
            m = re.match(re.escape(PREFIX) + r"(\d+)-\d+$", d.name)
            if m and not Path(f"/proc/{m.group(1)}").exists():
                _rmdir(d)
