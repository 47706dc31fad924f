"""A stand-in OpenAI-compatible server for perf/bench_server.py: answers every request at once
(or after --latency-ms) with a valid reply for the adapter that asked, so that what a run spends is
the harness's own time. Not a model: the replies are read off the prompt.

- POST /v1/completions (DT-R1 and JiT through the `openai` policy): DT-R1's rollout one piece
  at a time: a plan (SAM2, SemanticAnalysis), then `--code-rounds` <execute> rounds, then the
  answer of the task the user message names (segmentation: the first twin instance; grounding:
  one box; vqa / summarization: a sentence); stop_reason names the closing tag, as vLLM does.
  JiT's calls (recognised by their system prompts): the planner's JSON, the program, the ids, the text.
- POST /v1/chat/completions (the VLM adapter): tests/vlm_server.py's plausible per-task reply.
- POST /apply-template (the server renders ChatML), GET /v1/models.

It counts requests in flight (`GET /stats`: peak, and the integral of in-flight requests over
time, from which the mean concurrency over a window follows).

    python perf/instant_server.py --port 8001 [--latency-ms 0] [--code-rounds 1]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.loopback import JSONHandler  # noqa: E402
from tests.vlm_server import default_reply  # noqa: E402

MODEL = "stand-in"
PLAN = '<think>find it</think>\n<dt_plan>{"SAM2": [], "SemanticAnalysis": ["SAM2"]}</dt_plan>'
CODE = '<think>count</think>\n<execute>print(len(twin["instances"]))</execute>'


class Stats:
    """Requests in flight: now, peak, and their integral over time (request-seconds)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.peak = self.requests = 0
        self.area = 0.0
        self.since = time.perf_counter()

    def change(self, delta: int) -> None:
        with self.lock:
            t = time.perf_counter()
            self.area += self.now * (t - self.since)
            self.since = t
            self.now += delta
            self.peak = max(self.peak, self.now)
            self.requests += delta > 0

    def snapshot(self) -> dict:
        self.change(0)
        with self.lock:
            return {"in_flight": self.now, "peak": self.peak, "requests": self.requests, "request_seconds": self.area}

    def reset(self) -> None:
        with self.lock:
            self.peak, self.requests, self.area = self.now, 0, 0.0


def dtr1_reply(prompt: str, code_rounds: int) -> tuple[str, str]:
    """(text, stop string) of the next piece of a DT-R1 rollout whose prompt is `prompt`."""
    turn = prompt.rpartition("<|im_start|>assistant\n")[2]
    if "<dt_rep>" not in turn:
        return PLAN.removesuffix("</dt_plan>"), "</dt_plan>"
    if turn.count("<results>") < code_rounds:
        return CODE.removesuffix("</execute>"), "</execute>"
    task = re.search(r"Task: (\w+)\.", prompt).group(1)  # type: ignore[union-attr]
    ids = re.findall(r'"id":\s*(\d+)', turn.rpartition("<dt_rep>")[2])
    answer = {"segmentation": json.dumps({"instances": [int(ids[0])] if ids else []}),
              "grounding": json.dumps({"boxes": {"0": [[0.1, 0.1, 0.6, 0.6]]}})}.get(task, "A small object moves.")
    return f"<think>done</think>\n<task>{task}</task> <answer>{answer}", "</answer>"


def jit_reply(prompt: str) -> str:
    """JiT's planner, program, ids or text answer, told apart by the system prompt's first words."""
    system = prompt.partition("<|im_start|>system\n")[2]
    if system.startswith("You plan the perception"):
        kind = "semantic" if "Task: vqa" in prompt or "Task: summarization" in prompt else "spatial"
        return json.dumps({"query_type": kind, "specialists": [{"name": "SAM2", "rationale": "objects"}]})
    if system.startswith("You write a Python program"):
        return 'print(json.dumps({"ids": [graph["objects"][0]["id"]] if graph["objects"] else []}))'
    if system.startswith("You answer a query"):
        return json.dumps({"ids": [1]})
    return "A small object moves."


def handler(stats: Stats, latency_s: float, code_rounds: int) -> type:
    class Handler(JSONHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the openai client's connection pool expects

        def do_GET(self):
            if self.path.startswith("/stats"):
                return self.send_json(200, stats.snapshot())
            if self.path.startswith("/reset"):
                stats.reset()
                return self.send_json(200, {})
            self.send_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})

        def do_POST(self):
            body = self.read_json()
            stats.change(+1)
            try:
                if latency_s:
                    time.sleep(latency_s)
                self.send_json(200, answer(self.path, body, code_rounds))
            finally:
                stats.change(-1)

    return Handler


def answer(path: str, body: dict, code_rounds: int) -> dict:
    usage = {"prompt_tokens": 1, "completion_tokens": 8, "total_tokens": 9}
    if path == "/apply-template":
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in body["messages"])
        return {"prompt": text + "<|im_start|>assistant\n"}
    if path == "/v1/chat/completions":
        return {"id": "c", "object": "chat.completion", "created": 0, "model": MODEL, "usage": usage,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": default_reply(body)},
                             "finish_reason": "stop"}]}
    prompt = body["prompt"]
    if "<|im_start|>system\nYou answer questions about an image or a video by planning" in prompt:
        text, stop = dtr1_reply(prompt, code_rounds)
        choice = {"index": 0, "text": text, "finish_reason": "stop", "stop_reason": stop}
    else:
        choice = {"index": 0, "text": jit_reply(prompt), "finish_reason": "stop", "stop_reason": None}
    return {"id": "c", "object": "text_completion", "created": 0, "model": MODEL, "usage": usage, "choices": [choice]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--code-rounds", type=int, default=1)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(Stats(), args.latency_ms / 1000, args.code_rounds))
    server.daemon_threads = True
    print(f"listening http://127.0.0.1:{args.port}", flush=True)
    server.serve_forever(poll_interval=0.05)


if __name__ == "__main__":
    main()
