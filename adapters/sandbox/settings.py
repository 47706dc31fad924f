"""What a sandbox is asked for (SandboxSettings) and what one round of code gives back (SandboxResult)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from rvt_bench.core.types import SandboxError

ISOLATION = ("auto", "bwrap", "none")
REASONS = ("ok", "error", "timeout", "memory", "output_limit", "signal", "exit", "parent_gone", "protocol")
TRUNCATION_MARK = "\n...[output truncated]"
MAX_OUTPUT_CHARS = 20_000
"""The largest max_output_chars a sandbox accepts: its largest reply (about 480 KB of JSON escapes)
then decodes in well under 50 ms (perf/decode_reply.py), and no round builds a bigger string."""


@dataclass(frozen=True)
class SandboxSettings:
    """Limits of one sandbox (all its <execute> rounds share its memory, disk and process totals).
    These defaults are the config's too: `model.sandbox` of conf/model/dtr1.yaml and jit.yaml and
    `rollout.sandbox` of conf/train/dtr1_grpo.yaml (adapters/dtr1/config.py::SandboxConfig); docs/sandbox.md.

    timeout_s: wall-clock seconds per <execute> round; at the limit the whole sandbox is killed.
    memory_mb: MiB summed over the sandbox's processes (its tmpfs scratch included) where a cgroup
        is writable; always also the address-space limit of each process (a larger allocation
        raises MemoryError in the code).
    max_output_chars: characters of stdout (or of the error line) the policy gets back (at most
        MAX_OUTPUT_CHARS).
    max_processes: processes and threads the sandbox may have at once (its main thread included).
    disk_mb: size of the scratch tmpfs (and the largest file the code may write).
    isolation: "auto" (the default) and "bwrap": bubblewrap namespaces, or no run at all (the
        run stops at preflight, naming why); "none": a plain child process with rlimits only, which
        reads what the harness user can read and has the network, run only when asked for by name.
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
        # every caller (evaluation config, train_dtr1.py, run_code(**limits)) gets the same bounds:
        # a real, finite number within the sandbox's caps (rvt_bench.core.bounds: no omegaconf needed)
        from rvt_bench.core.bounds import SANDBOX_CAPS

        if self.isolation not in ISOLATION:
            raise SandboxError(f"sandbox isolation {self.isolation!r}: expected one of {ISOLATION}")
        for key in ("timeout_s", "memory_mb", "max_output_chars", "max_processes", "disk_mb", "start_timeout_s", "pool_size"):
            value, cap = getattr(self, key), SANDBOX_CAPS[key]["le"]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise SandboxError(f"sandbox {key}={value!r}: expected a finite number")
            if not (value >= 0 if key == "pool_size" else value > 0) or value > cap:
                low = ">= 0" if key == "pool_size" else "> 0"
                raise SandboxError(f"sandbox {key}={value!r}: expected {low} and <= {cap:g}")
        if self.max_output_chars > MAX_OUTPUT_CHARS:
            raise SandboxError(f"sandbox max_output_chars={self.max_output_chars!r}: expected at most {MAX_OUTPUT_CHARS}")

    @property
    def mode(self) -> str:
        """The isolation the code runs under: "bwrap" ("auto" included: there is no fallback) or "none"."""
        return "none" if self.isolation == "none" else "bwrap"


SETTINGS_KEYS = tuple(SandboxSettings.__dataclass_fields__)


def settings_from(config: dict | None) -> SandboxSettings:
    """SandboxSettings from a config mapping (conf/model/dtr1.yaml `sandbox:`); unknown keys raise
    SandboxError naming them."""
    config = dict(config or {})
    unknown = set(config) - set(SETTINGS_KEYS)
    if unknown:
        raise SandboxError(f"sandbox config: unknown keys {sorted(unknown)}; expected {list(SETTINGS_KEYS)}")
    return SandboxSettings(**config)


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
