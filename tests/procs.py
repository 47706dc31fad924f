"""Processes of a test: the children of a pid and which of them still run (read from /proc)."""
from __future__ import annotations

from pathlib import Path


def children_of(pid: int) -> list[int]:
    """The pids whose parent is `pid`."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
        except (OSError, IndexError, ValueError):
            pass
    return out


def running(pids: list[int]) -> list[int]:
    """The pids of `pids` that exist and are not zombies."""
    alive = []
    for pid in pids:
        try:
            if "State:\tZ" not in Path(f"/proc/{pid}/status").read_text():
                alive.append(pid)
        except OSError:
            pass
    return alive
