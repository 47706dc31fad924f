"""Loopback HTTP servers for tests: a JSON request handler and a server on 127.0.0.1 at a free
port, served from a daemon thread. Each test server subclasses JSONHandler for its routes."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JSONHandler(BaseHTTPRequestHandler):
    """read_json(): the request body as JSON; send_json(status, obj or raw bytes)."""

    def read_json(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def send_json(self, status: int, obj) -> None:
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):  # keep pytest output clean
        pass


class RequestLog:
    """What a test server received (`bodies`, in order) and the HTTP statuses it should answer the
    next requests with (`fail`, consumed in order; 200 once empty). Thread-safe."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.fail: list[int] = []
        self.lock = threading.Lock()

    def take(self, body: dict) -> int:
        """Record `body`; return the status to answer it with."""
        with self.lock:
            self.bodies.append(body)
            return self.fail.pop(0) if self.fail else 200


class Loopback:
    """Serves `handler` (a JSONHandler subclass) on 127.0.0.1; root = "http://127.0.0.1:PORT"."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.root = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
