"""Entry script of a sandbox interpreter (started by rvt_bench.adapters.sandbox.process, never
imported by the harness). Self-contained: inside the sandbox only this file, the Python runtime and
its libraries are visible, not the repository.

Usage: ``python -I child.py '<json settings>'`` with settings {"nproc": int or null,
"max_output_chars": int, "path": [directories to append to sys.path]}. Protocol over pipes, every
message a 4-byte big-endian length and that many bytes of JSON (ASCII: non-ASCII text travels as
\\u escapes): requests arrive on fd 0, replies leave on the fd that was 1 at start (fd 1 and 2 then
point to /dev/null, so a C library or ``os.write(1, ...)`` cannot corrupt a reply).
  start:   child -> {"ready": true} once NumPy and OpenCV are imported, or
           {"ready": false, "error": "Type: message"} when they cannot be (then it exits)
  load:    {"op": "load", "variables": {name: JSON value}, "masks": null or
           {"shape": [T, H, W], "rles": {id: {frame index: COCO RLE}}}}  (no reply)
  run:     {"op": "run", "code": str} -> {"ok": bool, "output": str, "error": str | null}
The code runs with the loaded variables, ``masks`` (id -> (T, H, W) bool array, decoded lazily;
absent when none were loaded), ``np``, ``cv2``, ``math`` and ``json`` in fresh globals each run;
``output`` holds at most max_output_chars + 1 characters of its stdout (the harness truncates and
marks), ``error`` the exception's last traceback line. End of fd 0 ends the interpreter.
"""
from __future__ import annotations

import io
import json
import math
import os
import resource
import struct
import sys
import traceback
from collections.abc import Mapping

_HEADER = struct.Struct(">I")


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


def _run(code: str, variables: dict, masks, np, cv2, limit: int) -> dict:
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
    finally:
        sys.stdout = sys.__stdout__
    return {"ok": error is None, "output": capture.text(), "error": error}


def main() -> None:
    settings = json.loads(sys.argv[1])
    reply_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.set_inheritable(reply_fd, False)
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
    _send(reply_fd, {"ready": True})
    variables, masks = {}, None
    while True:
        msg = _recv(0)
        if msg is None:
            os._exit(0)
        if msg["op"] == "load":
            variables = dict(msg.get("variables") or {})
            given = msg.get("masks")
            masks = None if given is None else LazyMasks(given["rles"], given["shape"], np)
        elif msg["op"] == "run":
            _send(reply_fd, _run(msg["code"], variables, masks, np, cv2, limit))


if __name__ == "__main__":
    main()
