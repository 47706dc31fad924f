"""Sandboxes started ahead of use: a pool per SandboxSettings, one interpreter per sample (its
rounds share it), every sandbox started from a few long-lived threads, all of them ended at exit."""
from __future__ import annotations

import atexit
import concurrent.futures
import functools
import logging
import os
import queue
import threading
from collections import deque
from typing import Any

from rvt_bench.adapters.sandbox.process import LIVE, Sandbox
from rvt_bench.adapters.sandbox.settings import SandboxResult, SandboxSettings
from rvt_bench.core.types import SandboxError

log = logging.getLogger(__name__)


class _Spawner:
    """Starts sandboxes from a few daemon threads that live as long as the harness: the kernel sends
    bwrap's parent-death signal when the *thread* that forked it ends, so sandboxes started from a
    short-lived worker thread would die with it. Several threads, because a start (bwrap, then an
    interpreter importing NumPy and OpenCV) takes ~0.5 s of its own CPU: with many rollouts in
    flight (run.batch_size against a server) one thread made each sample wait for the starts of
    all the samples before it."""

    def __init__(self, threads: int):
        self._q: queue.Queue = queue.Queue()
        for k in range(threads):
            threading.Thread(target=self._loop, name=f"sandbox-spawner-{k}", daemon=True).start()

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


SPAWNER_THREADS = max(1, min(8, os.cpu_count() or 1))  # sandbox starts in parallel, up to the CPUs (8 at most)


@functools.lru_cache(maxsize=1)
def _spawner() -> _Spawner:
    return _Spawner(SPAWNER_THREADS)


class SandboxPool:
    """Pre-started sandboxes for one SandboxSettings. `acquire` hands one out (each sample its
    own) and starts a replacement at once, so the next sample's interpreter imports its libraries
    while the model generates. The isolation is settings.mode, with no fallback: where bwrap
    cannot run, starting a sandbox raises SandboxError (the preflight,
    rvt_bench.adapters.sandbox.preflight, stops the run before that)."""

    def __init__(self, settings: SandboxSettings):
        self.settings = settings
        self.mode = settings.mode
        self._warm: deque[concurrent.futures.Future] = deque()
        self._lock = threading.Lock()
        self._closed = False
        self._fill()

    def _start(self) -> concurrent.futures.Future:
        return _spawner().submit(lambda: Sandbox.start(self.settings, self.mode))

    def _fill(self) -> None:
        with self._lock:
            while not self._closed and len(self._warm) < self.settings.pool_size:
                self._warm.append(self._start())

    def acquire(self) -> Sandbox:
        """A started sandbox for one sample; the caller kills it when the sample is done."""
        if self._closed:
            raise SandboxError("sandbox pool is closed")
        with self._lock:
            fut = self._warm.popleft() if self._warm else None
        self._fill()
        box = (fut or self._start()).result()
        if box.proc.poll() is not None:  # died while waiting (e.g. killed from outside): start another
            box.kill()
            box = self._start().result()
        return box

    def session(self) -> "SampleSession":
        return SampleSession(self)

    def close(self) -> None:
        """Kill the sandboxes started ahead of use (those handed out are their sessions' to close)."""
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
    round) until a round ends abnormally; the next round then gets a fresh one. `close` ends the
    interpreter."""

    def __init__(self, pool: SandboxPool):
        self.pool = pool
        self._box: Sandbox | None = None

    def execute(self, code: str, payload: dict | None = None) -> SandboxResult:
        """Run `code` with `payload` loaded (Sandbox.load: plain JSON variables and RLE masks)."""
        if self._box is None or self._box.dead:
            self._box = self.pool.acquire()
        self._box.load(payload)
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
    """End every sandbox of this process: the pools' warm ones and those of sessions still open
    (a Ctrl-C or SIGTERM in mid-round), their cgroups and scratch directories with them. Safe to
    call more than once; runs at interpreter exit."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        try:
            pool.close()
        except Exception:  # noqa: BLE001 - one pool that cannot close must not keep the others alive
            log.warning("sandbox: a pool did not close cleanly", exc_info=True)
    for box in list(LIVE):
        box.kill()


def run_code(code: str, payload: dict | None = None, **limits: Any) -> SandboxResult:
    """Run ``code`` once in a fresh sandbox interpreter (from the pool for these limits) with
    ``payload`` loaded (Sandbox.load), next to ``np``, ``cv2``, ``math`` and ``json``. ``limits``:
    SandboxSettings keywords (its defaults where absent).
    Failures of the code are results (ok=False, with `reason`), not exceptions; raises
    SandboxError only when no sandbox can be started."""
    session = get_pool(SandboxSettings(**limits)).session()
    try:
        return session.execute(code, payload)
    finally:
        session.close()
