"""The embedded policy's scheduler: a batch of requests spread over llama.cpp instances, each
instance decoding its share in its own OS thread (llama.cpp's calls release the GIL)."""
from __future__ import annotations

import threading

from rvt_bench.adapters.policy.base import Generation, Request
from rvt_bench.adapters.policy.gguf_instance import LlamaInstance


def generate_parallel(pool: list[LlamaInstance], requests: list[Request]) -> list[Generation]:
    """Each request's greedy continuation, as `LlamaInstance.generate` gives it, computed by the
    instance whose KV cache shares the longest prefix with it (`assign`), instances in parallel.
    The first exception in request order is raised once every instance has stopped; on Ctrl-C the
    instances stop at their next token before KeyboardInterrupt propagates."""
    lanes = assign([[inst.prefix_bytes(r.prompt) for inst in pool] for r in requests])
    results: list[Generation | BaseException | None] = [None] * len(requests)
    done = [threading.Event() for _ in pool]

    def work(lane: int) -> None:
        try:
            for i in lanes[lane]:
                r = requests[i]
                try:
                    results[i] = pool[lane].generate(r.prompt, list(r.stop), int(r.max_new_tokens), r.grammar)
                except BaseException as exc:  # re-raised in the caller's thread, first in request order
                    results[i] = exc
        finally:
            done[lane].set()

    busy = [lane for lane in range(len(pool)) if lanes[lane]]
    for lane in busy:
        threading.Thread(target=work, args=(lane,), daemon=True).start()
    # Waiting on events, not Thread.join: a join interrupted by Ctrl-C marks a thread that is
    # still running as stopped (CPython 3.11's _wait_for_tstate_lock), so a second join returned
    # at once and the caller's cleanup freed a llama.cpp context a thread was decoding in (segfault).
    try:
        for lane in busy:
            done[lane].wait()
    except BaseException:
        # Ctrl-C: the instances stop at their next token, then the caller may free them
        for inst in pool:
            inst.cancel.set()
        for lane in busy:
            done[lane].wait()
        for inst in pool:
            inst.cancel.clear()
        raise
    for res in results:
        if isinstance(res, BaseException):
            raise res
    return results  # type: ignore[return-value]


def assign(shared: list[list[int]]) -> list[list[int]]:
    """Request indices per instance: pairs (request, instance) are taken longest shared prefix
    first, one request per instance while instances are free; the rest go to the instance with
    the fewest requests. `shared[i][k]`: how much of request i instance k holds (prefix_bytes)."""
    lanes: list[list[int]] = [[] for _ in shared[0]]
    pairs = sorted((-n, i, k) for i, row in enumerate(shared) for k, n in enumerate(row))
    placed: set[int] = set()
    for _, i, k in pairs:
        if i not in placed and not lanes[k]:
            lanes[k].append(i)
            placed.add(i)
    for i in range(len(shared)):
        if i not in placed:
            min(lanes, key=len).append(i)
    return lanes
