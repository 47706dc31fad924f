"""Fixtures shared across test modules."""
import random
import signal
import zlib

import pytest

# A test's child processes start with this process's signal dispositions, and an ignored signal stays
# ignored across exec: pytest started as a background job of a script (`cmd &` ignores SIGINT) or
# under nohup (SIGHUP) would hand that on, and the harness rightly keeps an ignored signal ignored
# (rvt_bench.harness.signals), so every Ctrl-C / SIGTERM / SIGHUP test would wait out its timeout.
# The tests are about what a person's terminal, scancel and ssh do: they start from the defaults
# (before any rvt_bench import: rvt_bench.harness.signals notes what was ignored at start).
signal.signal(signal.SIGINT, signal.default_int_handler)
for _sig in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(_sig, signal.SIG_DFL)

import rvt_bench.harness.config  # noqa: F401,E402  registers the structured configs before any test composes conf/

from tests.tiny_models import build_checkpoint  # noqa: E402


@pytest.fixture(scope="session")
def tiny_r1(tmp_path_factory):
    """(directory, tokenizer, model): the tiny random R1-style checkpoint of tests/tiny_models.py,
    built once per session. Tests must not change the model's weights (training loads its own copy
    from the directory)."""
    path = tmp_path_factory.mktemp("tiny_r1")
    tok, model = build_checkpoint(path)
    return path, tok, model


@pytest.fixture(autouse=True)
def _signal_dispositions():
    """A test that runs a command in-process (exit_on_known_errors, console) leaves its stop signals
    ignored, as a finished command does before exiting; the next test's children would inherit that.
    Each test gets the dispositions it started with back."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for s, handler in before.items():
        if signal.getsignal(s) is not handler:
            signal.signal(s, handler)


@pytest.fixture(autouse=True)
def _seeded_rng(request):
    """Every test starts from its own RNG state (random, numpy, torch), derived from its node id: no
    verdict depends on which tests ran before it or in what order. torch and numpy are seeded only when
    already imported, so a test that needs neither pays nothing for them."""
    import sys

    seed = zlib.crc32(request.node.nodeid.encode("utf-8"))
    random.seed(seed)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(seed)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)
    yield
