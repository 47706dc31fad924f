"""The upper bound of every numeric setting, one per unit, each with its reason (checked by
rvt_bench.core.ranges). Plain constants, no imports: the sandbox's own settings
(rvt_bench.adapters.sandbox.settings) read them in any interpreter, without the config machinery."""
from __future__ import annotations

# --- upper bounds (one per unit; none of them limits a real run) ----------------------------------------

SECONDS = 86_400.0
"""Any timeout, wait or backoff: a day. No single round, request or start-up of a run needs longer;
past it is a typo, and inf / 1e308 overflow the event loop (selectors) at the first wait."""
CHARS = 1_000_000
"""Text budgets (a twin, a scene graph, a grammar span): a million characters, ~250k tokens, more than
any context window a policy has."""
SANDBOX_OUTPUT_CHARS = 20_000
"""A sandbox round's output returned to the policy (model.sandbox.max_output_chars): the harness
decodes and bounds every reply of that size each round (its largest reply, 20,000 characters
JSON-escaped, decodes in < 50 ms: perf/decode_reply.py); the default is 2,000."""
TOKENS = 1 << 20
"""Token budgets: 2^20, past every context window a policy has."""
WORKERS = 1024
"""Processes, threads, pools, concurrent requests: 1024, the default open-file limit (each holds
descriptors); sandbox pool_size=100000 would start that many interpreters."""
PROCESSES = 4096
"""Processes one sandbox may run at once (its pids limit): a fork bomb is bounded by it."""
BATCH = 65_536
"""Samples or rollouts decoded together: 2^16."""
RETRIES = 100
"""Attempts, retries, resume records of one sample: 100 (with backoff, more is waiting forever)."""
MEGABYTES = 1 << 20
"""Sizes in MB (memory, disk, a file read whole): 2^20 MB = 1 TiB, past any machine's memory."""
ROUNDS = 1000
"""Code rounds of one rollout, frames window: 1000."""
COUNT = 1_000_000_000
"""Counts of samples, shards, bootstrap resamples, polygon points, frames, images: 10^9."""
PIXELS = 1 << 32
"""Pixels of one image (width x height): 2^32 = a 65536 x 65536 image."""
SAMPLE_PIXELS = 1 << 40
"""Pixels of all frames of one sample: 2^40 = 2^32-pixel frames 256 times, or 500,000 frames of 1080p."""
SIDE = 65_536
"""Pixels along one side of an image (sizes, motions, patch factors): 2^16, JPEG's and most decoders' limit."""
FPS = 1000.0
"""Frames per second sampled from a video: 1000, past any benchmark's recording rate."""
SEED = (1 << 32) - 1
"""Random seeds: NumPy's and torch's generators take 32-bit seeds."""
VERSION = 1_000_000
"""Version numbers of prompts and templates."""
TEMPERATURE = 10.0
"""Sampling temperature: OpenAI's API takes 0-2, vLLM any; past 10 every token is nearly uniform noise."""
JSON_DEPTH = 10_000
"""JSON nesting (dataset.limits.max_json_depth): past Python's own recursion limit."""

UNSCHEMED = float(1 << 53)
"""Any number of a setting that no schema ranges (a policy backend's, a user model's): the last
integer a float holds exactly; a seconds setting (its name ends in `_s`) at most SECONDS, a pool's
size (`workers`, `*_concurrency`, `*_threads`, `n_parallel`, `pool_size`...: rvt_bench.core.ranges.unschemed_limit)
at most WORKERS."""

SANDBOX_POOL = 64
"""Warm sandboxes kept started ahead of use (model.sandbox.pool_size): each is an interpreter of about
47 MB (measured by the adversary review, 2026-12-04), so 64 are about 3 GB; 1024 would be 48 GB."""

SANDBOX_CAPS = {"timeout_s": {"le": SECONDS}, "start_timeout_s": {"le": SECONDS}, "memory_mb": {"le": MEGABYTES},
                "disk_mb": {"le": MEGABYTES}, "max_output_chars": {"le": SANDBOX_OUTPUT_CHARS},
                "max_processes": {"le": PROCESSES}, "pool_size": {"le": SANDBOX_POOL}}
"""The upper bounds of a sandbox's settings (model.sandbox.*, rollout.sandbox.*), added to the
sandbox schema's own lower bounds by the models that run code (adapters/dtr1, adapters/jit config.py)."""
