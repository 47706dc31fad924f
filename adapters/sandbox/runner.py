"""Run model-written code (DT-R1's ``<execute>`` blocks) in a separate, resource-limited process.

The code never runs in the harness process. Each call starts ``python -I adapters/sandbox/child.py``
in a fresh temporary working directory with a clean environment (no secrets such as
OPENAI_API_KEY), in its own process group, under ``resource.setrlimit`` limits on CPU time, address
space, file size and core dumps (and no new processes once the child has imported its libraries),
and kills the whole group at the wall-clock timeout. As in the DT-R1 paper (arXiv 2511.12365),
stdout comes back truncated and an error comes back as its last traceback line only.

Isolation (`isolation="auto"`, the default, uses it wherever the kernel allows it, as here and in
CI): the child runs under util-linux `unshare` in new network, PID and mount namespaces - no network
at all (not even loopback), its own /proc (the harness's environment, secrets included, is not
visible through /proc/<pid>/environ), the whole filesystem read-only except its working directory,
and every process it starts dies with it (PID namespace); all capabilities are dropped (setpriv)
before the code starts, so it cannot undo any of this from inside. Reads are not restricted: the code can
read what the harness can. Where namespaces are unavailable, "auto" falls back to the rlimits
above with a warning; "namespaces" refuses to run instead; "none" skips them.
"""
from __future__ import annotations

import functools
import json
import logging
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from adapters.twin.schema import Twin
from bench.types import SandboxError

log = logging.getLogger(__name__)

CHILD = Path(__file__).with_name("child.py")
ISOLATION = ("auto", "namespaces", "none")
_UNSHARE = ["unshare", "--net", "--pid", "--fork", "--mount-proc", "--propagation", "private", "--kill-child"]
# After the mounts, every capability is dropped before the code runs: without CAP_SYS_ADMIN it can
# neither undo the read-only mounts, unmount the private /proc, nor join the harness's namespaces.
_DROP_CAPS = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--no-new-privs"]
# Runs as PID 1 of the new namespaces: make / read-only except the working directory, then exec.
_MOUNTS = (
    'set -e; W="$1"; shift; '
    'mount --bind "$W" "$W"; mount --bind / /; mount -o remount,bind,ro /; mount -o remount,bind,rw "$W"; '
    '(mount --bind /dev/shm /dev/shm && mount -o remount,bind,ro /dev/shm) 2>/dev/null || true; '
    'cd "$W"; exec "$@"'  # cd again: the inherited cwd still points into the old, now read-only, mount
)
REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_FILE_BYTES = 64 * 2**20
"""Largest file (stdout included: it is a file) the code may write; bounds a print flood."""
TRUNCATION_MARK = "\n...[output truncated]"
# Single-threaded numeric libraries: thread pools reserve address space (RLIMIT_AS) and threads
# cannot be created once RLIMIT_NPROC is 0.
_CLEAN_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


@dataclass
class SandboxResult:
    """ok: the code ran to the end. output: its stdout (at most max_output_chars characters, a
    truncation mark included) or, when ok is False, the error's last line only. error: None, or the
    same one line (an exception's "Type: message", or why the process was stopped).
    duration_s: wall-clock seconds of the process, start-up included."""

    ok: bool
    output: str
    error: str | None
    duration_s: float


def run_code(code: str, twin: Twin, timeout_s: float = 10.0, memory_mb: int = 2048,
             max_output_chars: int = 2000, isolation: str = "auto") -> SandboxResult:
    """Run ``code`` in a sandbox process that sees ``twin`` (dict: twin.to_llm_dict() unabridged),
    ``masks`` (instance id -> (T, H, W) bool numpy array, decoded lazily), ``np``, ``cv2``, ``math``
    and ``json``.

    timeout_s: wall-clock limit in seconds for the whole process (interpreter start-up and library
    imports included, ~0.5 s); the process group is killed with SIGKILL at the limit, and CPU time is
    capped at ceil(timeout_s) + 1 s. memory_mb: address-space limit in MiB (an allocation beyond it
    raises MemoryError in the code). Failures of the code are results (ok=False), not exceptions;
    raises SandboxError only when the sandbox itself cannot start (or when isolation="namespaces"
    and the kernel refuses namespaces).
    """
    if isolation not in ISOLATION:
        raise SandboxError(f"sandbox isolation {isolation!r}: expected one of {ISOLATION}")
    use_ns = isolation == "namespaces" or (isolation == "auto" and namespaces_available())
    if isolation == "namespaces" and not namespaces_available():
        raise SandboxError("sandbox isolation 'namespaces' requested but unshare(1) cannot create namespaces here")
    workdir = Path(tempfile.mkdtemp(prefix="rvt-sandbox-"))
    try:
        (workdir / "twin.json").write_text(json.dumps(twin.to_llm_dict()))
        rles = {str(inst.id): {str(t): twin.masks[fr.mask] for t, fr in inst.frames.items()}
                for inst in twin.instances}
        (workdir / "masks.json").write_text(json.dumps(rles))
        (workdir / "code.py").write_text(code)
        cpu_s = math.ceil(timeout_s) + 1
        limits = [
            (resource.RLIMIT_CPU, (cpu_s, cpu_s + 1)),
            (resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20)),
            (resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES)),
            (resource.RLIMIT_CORE, (0, 0)),
        ]
        env = dict(_CLEAN_ENV, HOME=str(workdir), TMPDIR=str(workdir))
        start = time.monotonic()
        with open(workdir / "stdout.txt", "wb") as out, open(workdir / "stderr.txt", "wb") as err:
            try:
                argv = [sys.executable, "-I", str(CHILD), str(workdir), str(REPO_ROOT)]
                if use_ns:
                    argv = [*_UNSHARE, "sh", "-c", _MOUNTS, "sandbox", str(workdir), *_DROP_CAPS, *argv]
                proc = subprocess.Popen(
                    argv,
                    cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                    start_new_session=True, preexec_fn=lambda: _set_limits(limits),
                )
            except OSError as exc:
                raise SandboxError(f"could not start the sandbox process: {exc}") from exc
            timed_out = False
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            _kill_group(proc)  # also after a normal exit: a forked grandchild must not outlive the call
        duration = time.monotonic() - start
        error = _error_line(workdir, proc.returncode, timed_out, timeout_s, memory_mb)
        if error is not None:
            return SandboxResult(ok=False, output=error, error=error, duration_s=duration)
        return SandboxResult(ok=True, output=_read_output(workdir / "stdout.txt", max_output_chars),
                             error=None, duration_s=duration)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@functools.lru_cache(maxsize=1)
def namespaces_available() -> bool:
    """Whether unshare(1) can create the sandbox's namespaces here (checked once per process)."""
    if shutil.which("unshare") is None or shutil.which("setpriv") is None:
        log.warning("sandbox: unshare(1)/setpriv(1) not found; model code runs with rlimits only (no network/filesystem isolation)")
        return False
    probe = subprocess.run([*_UNSHARE, "sh", "-c", _MOUNTS, "probe", tempfile.gettempdir(), *_DROP_CAPS, "true"],
                           capture_output=True, timeout=30)
    if probe.returncode != 0:
        log.warning("sandbox: namespaces unavailable (%s); model code runs with rlimits only",
                    probe.stderr.decode(errors="replace").strip()[:200])
    return probe.returncode == 0


def _set_limits(limits: list[tuple[int, tuple[int, int]]]) -> None:
    for which, value in limits:
        resource.setrlimit(which, value)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _error_line(workdir: Path, returncode: int, timed_out: bool, timeout_s: float, memory_mb: int) -> str | None:
    """The one line the policy sees for a failed run, or None when the code ran to the end."""
    if timed_out:
        return f"TimeoutError: code ran longer than {timeout_s:g} s and was killed"
    if returncode == 0:
        return None
    error_file = workdir / "error.txt"
    if error_file.exists():
        lines = error_file.read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else f"SandboxError: process exited with status {returncode}"
    if returncode < 0:
        sig = signal.Signals(-returncode)
        why = {signal.SIGXCPU: "CPU time limit", signal.SIGXFSZ: f"file size limit ({MAX_FILE_BYTES} bytes)",
               signal.SIGKILL: f"killed (memory limit {memory_mb} MiB?)"}.get(sig, "killed")
        return f"SandboxError: process stopped by {sig.name} ({why})"
    stderr = (workdir / "stderr.txt").read_text(errors="replace").strip().splitlines()
    return stderr[-1] if stderr else f"SandboxError: process exited with status {returncode}"


def _read_output(path: Path, max_chars: int) -> str:
    # Read a bounded prefix only: the file may be up to MAX_FILE_BYTES.
    with open(path, "rb") as f:
        text = f.read(4 * (max_chars + 1)).decode("utf-8", errors="replace")
    if len(text) <= max_chars:
        return text
    keep = max(max_chars - len(TRUNCATION_MARK), 0)
    return text[:keep] + TRUNCATION_MARK
