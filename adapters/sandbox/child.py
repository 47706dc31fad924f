"""Entry script of a sandbox interpreter (started by rvt_bench.adapters.sandbox.process, never
imported by the harness). Self-contained: inside the sandbox only this file, the Python runtime and
its libraries are visible, not the repository.

Usage: ``python -I child.py '<json settings>'`` with settings {"nproc": int or null,
"max_output_chars": int, "path": [directories to append to sys.path], "fds": [request fd, reply fd]}.

This process is a SUPERVISOR that runs no model code: it makes itself non-dumpable before it
imports anything (so a process of the same uid cannot read its memory or its descriptors through
/proc, nor ptrace it), and a subreaper (orphans of a round come back to it). Each round runs in a
forked WORKER that holds no descriptor of the request or reply pipe: fd 0 and 2 are /dev/null,
fd 1 is a pipe to the supervisor (the round's output), STATUS_FD a pipe for its closing record,
every other descriptor closed. The supervisor builds the reply from what it observed itself: the
verdict from the worker's real exit status (EXIT_OK / EXIT_ERROR, with a closing record that agrees),
the first bytes of its output pipe and the error line of its record; then it
kills every process the round left (its own children after the worker is reaped: orphans are
reparented to it) so nothing of a round outlives it. Model code therefore cannot put a frame on
the reply pipe, and a round's reply can only describe that round.

Protocol over the two pipes, every message a 4-byte big-endian length and that many bytes of JSON
(ASCII: non-ASCII text travels as \\u escapes):
  start:   child -> {"ready": true} once NumPy and OpenCV are imported, or
           {"ready": false, "error": "Type: message"} when they cannot be (then it exits)
  load:    {"op": "load", "variables": {name: JSON value}, "masks": null or
           {"shape": [T, H, W], "rles": {id: {frame index: COCO RLE}}}}  (no reply)
  run:     {"op": "run", "code": str} -> {"ok": bool, "output": str, "error": str | null,
           "end": null | ["signal", n] | ["exit", n]}
The code runs with the loaded variables, ``masks`` (id -> (T, H, W) bool array, decoded lazily;
absent when none were loaded), ``np``, ``cv2``, ``math`` and ``json`` in fresh globals each run;
``output`` holds at most max_output_chars + 1 characters of its stdout (the harness truncates and
marks), ``error`` the exception's last traceback line. "end" is set when the worker did not finish
its round: killed by signal n, or exited with status n (os._exit) before its closing record.
End of the request pipe ends the interpreter.
"""
from __future__ import annotations

import ctypes  # first: the supervisor is non-dumpable before anything else is imported or run

_LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36
# (only when run as the supervisor: the harness's tests import this file for rle_decode)
if __name__ == "__main__" and _LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
    raise SystemExit("child.py: prctl(PR_SET_DUMPABLE, 0) failed")  # fail closed

import gc  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Mapping  # noqa: E402

_HEADER = struct.Struct(">I")
PREFETCH_BYTES = 128 * 2**20  # masks decoded once per sample in the supervisor up to this size
STATUS_FD = 1000  # the worker's closing record; its only descriptor besides stdio
EXIT_OK, EXIT_ERROR = 0, 1  # the worker's exit status after a round that ended / raised
_NOFILE = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
_MAX_FD = _NOFILE if 0 < _NOFILE < (1 << 20) else 1 << 20  # no descriptor lies at or above the hard limit


def rle_counts(counts) -> list[int]:
    """COCO RLE counts: a list of ints as is, or the compressed ASCII string of pycocotools
    (``maskApi.c::rleFrString``: 5-bit groups offset by 48, continuation bit 0x20, sign bit 0x10,
    each count after the second stored as a difference to the count two before)."""
    if not isinstance(counts, str):
        return [int(c) for c in counts]
    out: list[int] = []
    p = 0
    while p < len(counts):
        x, k, more = 0, 0, True
        while more:
            c = ord(counts[p]) - 48
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and c & 0x10:
                x |= -1 << (5 * k)
        if len(out) > 2:
            x += out[-2]
        out.append(x)
    return out


def rle_decode(rle: dict, np):
    """COCO RLE {"size": [H, W], "counts"} -> (H, W) bool array (runs are column-major, first run 0s)."""
    h, w = int(rle["size"][0]), int(rle["size"][1])
    counts = np.asarray(rle_counts(rle["counts"]), dtype=np.int64)
    values = np.arange(len(counts)) % 2 == 1
    flat = np.repeat(values, counts)
    if flat.size != h * w:
        raise ValueError(f"RLE counts cover {flat.size} pixels, expected {h} x {w}")
    return flat.reshape(w, h).T


class LazyMasks(Mapping):
    """id -> (T, H, W) bool array, decoded on first access (a payload may hold many masks and the
    code usually reads few). Keys are ints; a digit string ("3") is accepted as the same id."""

    def __init__(self, rles: dict, shape: list, np_mod):
        self._rles = {int(k): v for k, v in rles.items()}
        self._shape = (int(shape[0]), int(shape[1]), int(shape[2]))
        self._np, self._cache = np_mod, {}

    def __getitem__(self, key):
        iid = int(key) if isinstance(key, str) and key.strip().isdigit() else key
        if iid not in self._rles:
            raise KeyError(f"no mask {key!r} (ids: {sorted(self._rles)})")
        if iid not in self._cache:
            out = self._np.zeros(self._shape, dtype=bool)
            for t, rle in self._rles[iid].items():
                out[int(t)] = rle_decode(rle, self._np)
            self._cache[iid] = out
        return self._cache[iid]

    def __iter__(self):
        return iter(sorted(self._rles))

    def prefetch(self, max_bytes: int) -> None:
        """Decode every mask now when they take at most max_bytes together (run in the supervisor,
        so each round's forked worker finds them decoded); on any failure keep them lazy (the
        round that reads a broken mask gets the error)."""
        if len(self._rles) * self._shape[0] * self._shape[1] * self._shape[2] > max_bytes:
            return
        try:
            for iid in self._rles:
                self[iid]
        except BaseException:  # noqa: BLE001 - a malformed RLE is the code's error, in its round
            self._cache = {}

    def __len__(self):
        return len(self._rles)


class _Capture(io.TextIOBase):
    """stdout of the code: keeps its first `limit` characters, drops (and counts) the rest, so a
    print flood costs no memory here."""

    def __init__(self, limit: int):
        self.limit, self.parts, self.kept, self.dropped = limit, [], 0, 0

    def writable(self) -> bool:
        return True

    def write(self, s) -> int:
        s = str(s)
        room = self.limit - self.kept
        if room > 0:
            self.parts.append(s[:room])
            self.kept += min(len(s), room)
        self.dropped += max(len(s) - max(room, 0), 0)
        return len(s)

    def text(self) -> str:
        return "".join(self.parts)


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        b = os.read(fd, n - got)
        if not b:
            return None
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def _send(fd: int, msg: dict) -> None:
    data = json.dumps(msg).encode("utf-8", errors="replace")
    data = _HEADER.pack(len(data)) + data
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _recv(fd: int) -> dict | None:
    head = _read_exact(fd, _HEADER.size)
    if head is None:
        return None
    body = _read_exact(fd, _HEADER.unpack(head)[0])
    return None if body is None else json.loads(body)


def _last_line(exc: BaseException, limit: int) -> str:
    try:
        line = traceback.format_exception_only(type(exc), exc)[-1].strip()
    except BaseException:  # noqa: BLE001 - an exception whose str() raises still gets a line
        line = type(exc).__name__
    line = line.splitlines()[-1] if line else type(exc).__name__
    return line[: limit + 1]


def _run(code: str, variables: dict, masks, np, cv2, limit: int) -> tuple[str, str | None]:
    """(captured stdout, error line or None) of the code, run in this (worker) process."""
    capture = _Capture(limit + 1)
    scope = {**variables, "__name__": "__main__", "__builtins__": __builtins__, "np": np, "cv2": cv2, "math": math,
             "json": json}
    if masks is not None:
        scope["masks"] = masks
    sys.stdout = capture
    error = None
    try:
        exec(compile(code, "<execute>", "exec"), scope)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            error = f"SystemExit: {exc.code}"[: limit + 1]
    except BaseException as exc:  # noqa: BLE001 - every failure of model code is reported, not raised
        error = _last_line(exc, limit)
    return capture.text(), error


def _worker(code: str, variables: dict, masks, np, cv2, limit: int, out_w: int, status_w: int) -> None:
    """The forked process of one round (never returns): stdio and STATUS_FD only, then the code,
    then its output on fd 1 and its closing record on STATUS_FD. The functions it ends with are
    bound before the code runs (code that patches os or json changes only its own record, as
    catching its own exception would)."""
    write, exit_, dumps, encode = os.write, os._exit, json.dumps, str.encode
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(out_w, 1)
        os.dup2(status_w, STATUS_FD)
        os.dup2(devnull, 0)
        os.dup2(devnull, 2)
        os.closerange(3, STATUS_FD)
        os.closerange(STATUS_FD + 1, _MAX_FD)
        text, error = _run(code, variables, masks, np, cv2, limit)
        for fd, data in ((1, encode(text, "utf-8", "replace")),
                         (STATUS_FD, b"\n" + encode(dumps({"error": error}), "ascii") + b"\n")):
            view = memoryview(data)
            while view:
                view = view[write(fd, view):]
    except BaseException:  # noqa: BLE001 - no record: the supervisor reports an exit without one
        exit_(70)
    # The verdict is the worker's real exit status, not its record: every process of the round can
    # write to STATUS_FD (or point it elsewhere before the record is written). Code in this process
    # can still rewrite these frames (ctypes) and exit 0 after raising: its own round's `ok`, no more
    # than catching its own exception would give (docs/sandbox.md "The reply channel cannot be forged").
    exit_(EXIT_OK if error is None else EXIT_ERROR)


class _Round:
    """What the supervisor observes of one worker: its output pipe (first `out_cap` bytes kept),
    its status pipe (last `status_cap` bytes kept) and its wait status."""

    def __init__(self, pid: int, out_r: int, status_r: int, out_cap: int, status_cap: int):
        self.pid, self.out_cap, self.status_cap = pid, out_cap, status_cap
        self.out, self.status = bytearray(), bytearray()
        self.open = {out_r: self.out, status_r: self.status}

    def read(self, fd: int) -> bool:
        """One read of fd into its buffer; False at its end (or nothing to read now)."""
        try:
            chunk = os.read(fd, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return False
        if not chunk:
            return False
        buf = self.open[fd]
        if buf is self.out:
            buf += chunk[: max(self.out_cap - len(buf), 0)]
        else:
            buf += chunk
            del buf[: max(len(buf) - self.status_cap, 0)]
        return True

    def wait(self) -> int:
        """Read both pipes until the worker has ended; its wait status."""
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            pidfd = None
        poller = select.poll()
        for fd in self.open:
            poller.register(fd, select.POLLIN)
        if pidfd is not None:
            poller.register(pidfd, select.POLLIN)
        live = set(self.open)
        try:
            while True:
                for fd, _ in poller.poll(None if pidfd is not None else 20):
                    if fd in live and not self.read(fd):
                        poller.unregister(fd)
                        live.discard(fd)
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid == self.pid:
                    return status
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def drain(self) -> None:
        """What is left in the pipes once no writer is alive (bounded: a survivor is not waited for)."""
        for fd in self.open:
            os.set_blocking(fd, False)
            for _ in range(64):
                if not self.read(fd):
                    break
            os.close(fd)


def _children() -> list[int]:
    """Pids whose parent is this process (orphans of a round are reparented here: subreaper),
    from /proc (in the sandbox, its own PID namespace's)."""
    me, out = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")"
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == me:
            out.append(int(name))
    return out


def _end_leftovers() -> None:
    """SIGKILL every process a round left behind and reap it. Only this process's own children are
    signalled (a child's pid stays its own until it is reaped here), never a pid range or -1, so
    nothing outside the round can be reached whatever namespace this runs in."""
    for _ in range(1000):
        kids = _children()
        if not kids:
            return
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _round(code: str, variables: dict, masks, np, cv2, limit: int) -> dict:
    """Run one round in a worker; the reply, from the worker's wait status, output and record."""
    out_r, out_w = os.pipe()
    status_r, status_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _worker(code, variables, masks, np, cv2, limit, out_w, status_w)
    os.close(out_w)
    os.close(status_w)
    # output: limit + 1 characters of at most 4 UTF-8 bytes; record: an error line of limit + 1
    # characters as \\u escapes (12 bytes beyond the BMP)
    watch = _Round(pid, out_r, status_r, 4 * (limit + 1), 12 * (limit + 1) + 64)
    status = watch.wait()
    _end_leftovers()
    watch.drain()
    output = watch.out.decode("utf-8", "replace")[: limit + 1]
    if os.WIFSIGNALED(status):
        return {"ok": False, "output": "", "error": "", "end": ["signal", os.WTERMSIG(status)]}
    code_ = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    record = None
    if code_ in (EXIT_OK, EXIT_ERROR):
        lines = bytes(watch.status).rstrip(b"\n").rsplit(b"\n", 1)
        try:
            record = json.loads(lines[-1]) if len(lines) == 2 else None
        except ValueError:
            record = None
    error = record.get("error", 0) if isinstance(record, dict) and set(record) == {"error"} else 0
    # ok: exit EXIT_OK and a record without error; error: exit EXIT_ERROR and a record with its
    # line; anything else (os._exit, a lost or contradicting record) is an exit without a result
    if code_ == EXIT_OK and error is None:
        return {"ok": True, "output": output, "error": None, "end": None}
    if code_ == EXIT_ERROR and isinstance(error, str):
        return {"ok": False, "output": "", "error": error[: limit + 1], "end": None}
    return {"ok": False, "output": "", "error": "", "end": ["exit", code_]}


def main() -> None:
    settings = json.loads(sys.argv[1])
    request_fd, reply_fd = settings["fds"]
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    sys.path += [p for p in settings.get("path") or [] if p not in sys.path]
    try:
        import cv2
        import numpy as np
    except BaseException as exc:  # noqa: BLE001 - the harness is told why, in one line (a MemoryError at too little memory_mb)
        _send(reply_fd, {"ready": False, "error": _last_line(exc, 300)})
        os._exit(1)

    cv2.setNumThreads(1)
    if settings.get("nproc") is not None:
        # Per uid (the harness gives each sandbox its own uid or user namespace), so this is the
        # total of the sandbox's processes and threads, not a per-process limit.
        resource.setrlimit(resource.RLIMIT_NPROC, (settings["nproc"], settings["nproc"]))
    limit = int(settings["max_output_chars"])
    gc.freeze()  # what is imported now is never traversed by a worker's collector (fewer copied pages per fork)
    _send(reply_fd, {"ready": True})
    variables, masks = {}, None
    while True:
        msg = _recv(request_fd)
        if msg is None:
            os._exit(0)
        if msg["op"] == "load":
            variables = dict(msg.get("variables") or {})
            given = msg.get("masks")
            masks = None if given is None else LazyMasks(given["rles"], given["shape"], np)
            if masks is not None:
                masks.prefetch(PREFETCH_BYTES)
        elif msg["op"] == "run":
            _send(reply_fd, _round(msg["code"], variables, masks, np, cv2, limit))


if __name__ == "__main__":
    main()
