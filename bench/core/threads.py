"""Requests in flight side by side that never hold up a stop: `map_threads` runs a function over
items on daemon threads (concurrent.futures' pools join their threads at interpreter exit, so
Ctrl-C waited for every request in flight, up to its timeout: 17.7 s measured in the first batch of a
VLM run). On Ctrl-C, SIGTERM or SIGHUP in the caller (a KeyboardInterrupt from
rvt_bench.harness.signals) or an error in one item, the items not started are dropped and the
threads in flight are abandoned: they end with the process, their results unused."""
from __future__ import annotations

import queue
import threading
from typing import Callable, Iterable, TypeVar

from rvt_bench.core.bounds import WORKERS

T = TypeVar("T")
R = TypeVar("R")


def map_threads(fn: Callable[[T], R], items: Iterable[T], workers: int, name: str = "worker") -> list[R]:
    """[fn(item) for item in items], computed on at most `workers` daemon threads (and never more
    than rvt_bench.core.bounds.WORKERS, 1024: a rollout batch of 65536 asked for one each); results
    in the items' order. The first exception an item raises is raised here (the rest are dropped). The
    caller's thread waits in short slices, so a stop signal is handled at once."""
    todo = list(enumerate(items))
    if not todo:
        return []
    work: queue.SimpleQueue = queue.SimpleQueue()
    for job in todo:
        work.put(job)
    done: queue.SimpleQueue = queue.SimpleQueue()
    cancelled = threading.Event()

    def loop() -> None:
        while not cancelled.is_set():
            try:
                i, item = work.get_nowait()
            except queue.Empty:
                return
            try:
                done.put((i, True, fn(item)))
            except BaseException as exc:  # handed to the caller's thread
                done.put((i, False, exc))

    for k in range(max(1, min(int(workers), len(todo), WORKERS))):
        threading.Thread(target=loop, name=f"{name}-{k}", daemon=True).start()
    results: dict[int, R] = {}
    try:
        while len(results) < len(todo):
            try:
                i, ok, value = done.get(timeout=0.1)
            except queue.Empty:
                continue
            if not ok:
                raise value
            results[i] = value
    finally:
        cancelled.set()
    return [results[i] for i in range(len(todo))]
