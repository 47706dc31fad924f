"""Run model-written code (DT-R1's ``<execute>`` blocks, JiT's reasoning programs) in an isolated,
pre-started interpreter. This module is the sandbox's interface; each job lives in its own module:

  settings.py   SandboxSettings (the limits, `model.sandbox.*`), SandboxResult, REASONS
  world.py      what the interpreter sees: the bubblewrap command line, the runtime's paths and links
  seccomp.py    the system calls it may not make
  cgroup.py     per-sandbox totals (memory, one CPU)
  child.py      the interpreter's own side of the pipe protocol (runs inside the sandbox)
  protocol.py   the harness's side: frames out, bounded decoding of replies in
  process.py    one started interpreter (Sandbox): start, load a payload, run a round, kill
  pool.py       interpreters started ahead of use, one per sample (SampleSession), ended at exit
  preflight.py  before the first sample: bubblewrap or stop, and a probe round under the limits

The code never runs in the harness process, and the harness trusts nothing the code leaves behind:
- **World** (world.py): bubblewrap namespaces with a read-only Python runtime, a size-capped tmpfs
  scratch directory, its own /proc (/proc/sys read-only) and a minimal /dev; no dataset, run
  files, host /tmp, /sys, IP sockets or network; a fresh unprivileged uid (or user namespace) with
  no capabilities and no_new_privs; a seccomp filter (seccomp.py).
- **Per-sandbox totals**: memory summed over its processes, tmpfs included (cgroup, where
  writable), processes and threads (RLIMIT_NPROC on a uid or user namespace of its own), scratch
  disk (tmpfs size), wall time per round (the harness kills the whole sandbox), at most one CPU.
- **Pipe protocol** (child.py, protocol.py): requests and length-prefixed JSON replies on two pipes
  only child.py's supervisor holds (fds above stdio; it runs no model code and is non-dumpable):
  each round runs in a forked worker that has no descriptor of them, and the supervisor builds
  the reply from the worker's real exit status, output and closing record, then kills what the
  round left. The harness reads replies without blocking, with a deadline covering its own
  decoding, a size bound measured on the encoded bytes and a bracket bound, in linear time. The
  harness reads no file of the sandbox.
- **Nothing outlives the harness**: bwrap --die-with-parent and a PID namespace, so kill -9 or
  Ctrl-C of the harness takes every sandbox process down; `close_pools` (at exit) kills the rest.
- **The sandbox knows no model**: it is handed plain JSON (`Sandbox.load`: variables and RLE
  masks); the twin's adapters build that payload.

Whatever the code does is the model's outcome, a `SandboxResult` with `reason` in REASONS, never an
exception: "ok", "error" (an exception of the code, its last traceback line as in the DT-R1 paper,
arXiv 2511.12365), "timeout", "memory" (the cgroup's OOM killer fired), "output_limit" (a reply
beyond the size bound), "signal" (the interpreter died of a signal), "exit" (it ended without
replying, e.g. os._exit), "parent_gone" (bwrap, the interpreter's supervisor, was killed from
outside), "protocol" (a reply that is not JSON of the protocol, or nests too deep). SandboxError
(kind "sandbox") is raised only when no sandbox can be started at all.

Isolation (`isolation`): "auto" (the default) and "bwrap" are the same: bubblewrap, or the run
stops at preflight. "none", only when asked for by name, is a plain child process in a private
temporary directory with a clean environment, its own session, rlimits (address space, file size,
no core dumps) and the same pipe protocol: it can read whatever the harness user can read and use
the network. See docs/sandbox.md.
"""
from __future__ import annotations

from rvt_bench.adapters.sandbox.pool import SampleSession, SandboxPool, close_pools, get_pool, run_code
from rvt_bench.adapters.sandbox.preflight import banner, bwrap_problem, preflight
from rvt_bench.adapters.sandbox.process import Sandbox
from rvt_bench.adapters.sandbox.settings import (ISOLATION, REASONS, SETTINGS_KEYS, TRUNCATION_MARK, SandboxResult,
                                                 SandboxSettings, settings_from)

__all__ = ["SandboxSettings", "SandboxResult", "Sandbox", "SandboxPool", "SampleSession", "run_code", "get_pool",
           "close_pools", "settings_from", "preflight", "banner", "bwrap_problem", "TRUNCATION_MARK", "REASONS",
           "ISOLATION", "SETTINGS_KEYS"]
