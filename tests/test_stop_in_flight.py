"""Ctrl-C, SIGTERM and SIGHUP stop a run within 2 s even while requests are in flight in the first
batch (bench/core/threads.py: the VLM's and the openai policy's requests run on daemon threads that
a stop abandons; a thread pool used to wait for them, 17.7 s measured). The server here never
answers a sample, so only the samples in flight are lost and nothing is written."""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.small_demo import make_small_demo
from tests.test_vlm_e2e import REPO, TINY_SAM2
from tests.vlm_server import ChatServer

ALLOWED_S = 2.0


class SlowServer(ChatServer):
    """Answers the preflight's one-token probe at once and holds every sample's request until closed."""

    def __init__(self):
        self.release = threading.Event()
        super().__init__(model="tiny-vlm", reply=self._reply)

    def _reply(self, body):
        if body.get("max_tokens", 0) > 1:
            self.release.wait(120)
        return "ok"

    def close(self):
        self.release.set()
        super().close()


# Ctrl-C only: SIGTERM and SIGHUP raise the same KeyboardInterrupt (bench/harness/signals.py, tested in
# test_corrupt_stops.py) and leave through the same cli.stop; each case costs a run's start-up (~10-30 s
# on the 2-core CI machine, the only way to measure a real stop), so one is run here.
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130)])
def test_a_stop_in_the_first_batch_takes_under_two_seconds(tmp_path, sig, code):
    demo = make_small_demo(tmp_path / "demo")
    server = SlowServer()
    proc = subprocess.Popen([sys.executable, str(REPO / "run_bench.py"), "+model=vlm", "model.model=tiny-vlm",
                             f"model.base_url={server.url}", *TINY_SAM2, f"dataset.root={demo}",
                             f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while sum(b.get("max_tokens", 0) > 1 for b in list(server.bodies)) < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            time.sleep(0.05)
        time.sleep(0.2)  # the requests are in flight, the main thread waits for them
        start = time.monotonic()
        proc.send_signal(sig)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        server.close()
    assert took <= ALLOWED_S, f"stopped {took:.2f} s after {sig.name} (allowed {ALLOWED_S} s); stderr: {err[-1500:]}"
    assert proc.returncode == code, err[-3000:]
    stops = [line for line in err.splitlines() if line.startswith("stopped:")]
    assert len(stops) == 1 and "0 predictions of this invocation are saved" in stops[0], stops
