"""metrics/judge.py against a real OpenAI-compatible HTTP server on loopback with scripted replies.

The server (http.server.ThreadingHTTPServer on 127.0.0.1, port 0) implements
POST /v1/chat/completions and answers each request with whatever the test's `reply` function
returns for (request body, request number): a status code and either a completion text or an error.
"""
from __future__ import annotations

import math
import threading
import time

import pytest

from rvt_bench.core.records import JudgeVerdict
from rvt_bench.core.types import JudgeError
from rvt_bench.harness.config import group_node
from tests.loopback import JSONHandler, Loopback
from rvt_bench.metrics.judge import (
    NOT_CONFIGURED,
    Judge,
    JudgeCache,
    JudgeItem,
    cache_key,
    get_template,
    judge_banner,
    judge_summary,
    make_judge,
    parse_verdict,
)

GOOD = '{"score": 1, "reason": "same colour as the reference"}'


class ScriptedServer:
    def __init__(self):
        self.reply = lambda body, n: (200, GOOD)
        self.requests: list[dict] = []
        self.delay_s = 0.0
        self.raw_body: bytes | None = None  # when set, sent as the 200 body instead of a completion
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(JSONHandler):
            def do_POST(self):
                body = self.read_json()
                with server._lock:
                    server.requests.append(body)
                    n = len(server.requests)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    time.sleep(server.delay_s)
                    if self.path != "/v1/chat/completions":
                        status, payload = 404, {"error": {"message": f"no route {self.path}"}}
                    else:
                        status, text = server.reply(body, n)
                        payload = _completion(body, text) if status == 200 else {"error": {"message": text}}
                    self.send_json(status, server.raw_body if server.raw_body is not None else payload)
                finally:
                    with server._lock:
                        server.in_flight -= 1

        self.loopback = Loopback(Handler)
        self.base_url = self.loopback.root + "/v1"

    def close(self):
        self.loopback.close()


def _completion(body: dict, text: str) -> dict:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


@pytest.fixture
def server():
    s = ScriptedServer()
    yield s
    s.close()


def _judge(server, tmp_path, **kw) -> Judge:
    args = dict(model="judge-test", base_url=server.base_url, api_key="EMPTY", timeout_s=5, max_retries=2,
                backoff_s=0.001, backoff_max_s=0.01, max_concurrency=4, cache_dir=tmp_path / "cache")
    args.update(kw)
    return Judge(**args)


def _item(i=0, prediction="red") -> JudgeItem:
    return JudgeItem(sample_id=f"s{i}", question=f"what colour is car {i}?", references=["red", "crimson"], prediction=prediction)


# --- parsing -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply, score",
    [
        ('{"score": 1, "reason": "ok"}', 1.0),
        ('Sure.\n```json\n{"score": 0.5, "reason": "partly"}\n```', 0.5),
        ('{"note": {"x": 1}} then {"score": 0, "reason": "wrong"}', 0.0),
    ],
)
def test_parse_verdict_accepts_json_score_anywhere(reply, score):
    assert parse_verdict(reply)[0] == score and parse_verdict(reply)[2] is None


@pytest.mark.parametrize("reply", ["", "CORRECT", '{"score": 1.5}', '{"score": true}', '{"score": "1"}', '{"score": 1'])
def test_parse_verdict_unscored_replies_have_no_score_and_a_reason(reply):
    score, reason, error = parse_verdict(reply)
    assert score is None and reason and error.startswith("parse:")


# --- against the loopback server ------------------------------------------------------------------


def test_good_verdict(server, tmp_path):
    [v] = _judge(server, tmp_path).score_many([_item()])
    assert (v.score, v.reason, v.cached, v.error) == (1.0, "same colour as the reference", False, None)
    assert v.template == "answer_correctness@v1" and v.model == "judge-test"
    [req] = server.requests
    assert req["model"] == "judge-test" and req["temperature"] == 0.0
    assert "Candidate answer: red" in req["messages"][-1]["content"] and "- crimson" in req["messages"][-1]["content"]


def test_unparsable_verdict_is_unscored_with_reason(server, tmp_path):
    server.reply = lambda body, n: (200, "The answer looks right to me.")
    [v] = _judge(server, tmp_path).score_many([_item()])
    assert v.score is None
    assert "The answer looks right to me." in v.reason
    assert v.error.startswith("parse:")


def test_429_is_retried_then_succeeds(server, tmp_path):
    server.reply = lambda body, n: (429, "slow down") if n == 1 else (200, GOOD)
    [v] = _judge(server, tmp_path).score_many([_item()])
    assert v.score == 1.0 and v.error is None
    assert len(server.requests) == 2


def test_503_forever_is_unscored_after_the_retries(server, tmp_path):
    server.reply = lambda body, n: (503, "busy")
    [v] = _judge(server, tmp_path, max_retries=3).score_many([_item()])
    assert v.score is None and not v.cached
    assert v.error.startswith("request:") and "HTTP 503 after 4 attempt(s)" in v.error
    assert len(server.requests) == 4


def test_a_500_is_the_servers_answer_and_is_not_asked_again(server, tmp_path):
    server.reply = lambda body, n: (500, "boom")
    [v] = _judge(server, tmp_path, max_retries=3).score_many([_item()])
    assert v.score is None and v.error.startswith("request:") and "HTTP 500 after 1 attempt(s)" in v.error
    assert len(server.requests) == 1


def test_a_body_that_is_not_json_is_unscored_not_a_crash(server, tmp_path):
    server.raw_body = b"<html>gateway says hi</html>"
    [v] = _judge(server, tmp_path).score_many([_item()])
    assert v.score is None and "unreadable response body" in v.error


def test_the_same_model_on_another_server_is_not_served_from_the_cache(server, tmp_path):
    _judge(server, tmp_path).score_many([_item()])
    other = ScriptedServer()
    try:
        [v] = _judge(other, tmp_path).score_many([_item()])  # same cache dir, other base_url
        assert not v.cached and len(other.requests) == 1
    finally:
        other.close()


def test_client_error_is_not_retried(server, tmp_path):
    server.reply = lambda body, n: (400, "bad request")
    [v] = _judge(server, tmp_path).score_many([_item()])
    assert v.score is None and "HTTP 400 after 1 attempt(s)" in v.error
    assert len(server.requests) == 1


def test_timeout_is_retried(server, tmp_path):
    server.delay_s = 0.5
    [v] = _judge(server, tmp_path, timeout_s=0.1, max_retries=1).score_many([_item()])
    assert v.score is None and "APITimeoutError after 2 attempt(s)" in v.error
    assert len(server.requests) == 2
    time.sleep(0.6)  # let the server finish answering the abandoned requests before teardown


def test_rerun_hits_the_cache_and_makes_no_request(server, tmp_path):
    items = [_item(i) for i in range(3)]
    first = _judge(server, tmp_path).score_many(items)
    assert len(server.requests) == 3 and not any(v.cached for v in first)
    second = _judge(server, tmp_path).score_many(items)
    assert len(server.requests) == 3
    assert all(v.cached for v in second) and [v.score for v in second] == [v.score for v in first]


def test_failed_requests_are_not_cached(server, tmp_path):
    server.reply = lambda body, n: (500, "boom") if n == 1 else (200, GOOD)
    assert _judge(server, tmp_path, max_retries=0).score_many([_item()])[0].score is None
    [v] = _judge(server, tmp_path, max_retries=0).score_many([_item()])
    assert v.score == 1.0 and not v.cached and len(server.requests) == 2


def test_concurrency_bound_is_respected(server, tmp_path):
    server.delay_s = 0.1
    verdicts = _judge(server, tmp_path, max_concurrency=3).score_many([_item(i) for i in range(12)])
    assert len(server.requests) == 12 and all(v.score == 1.0 for v in verdicts)
    assert server.max_in_flight == 3


def test_verdicts_come_back_in_item_order(server, tmp_path):
    server.reply = lambda body, n: (200, GOOD if "Candidate answer: red" in body["messages"][-1]["content"] else '{"score": 0}')
    items = [_item(i, "red" if i % 2 else "blue") for i in range(8)]
    assert [v.score for v in _judge(server, tmp_path).score_many(items)] == [0.0, 1.0] * 4


# --- cache key and cache files ---------------------------------------------------------------------


def test_cache_key_covers_model_template_and_item():
    t1 = get_template("answer_correctness", 1)
    base = cache_key("m", t1, _item())
    assert cache_key("m", t1, _item()) == base
    assert cache_key("other", t1, _item()) != base
    assert cache_key("m", t1, _item(prediction="blue")) != base
    assert cache_key("m", t1, JudgeItem("s0", "what colour is car 0?", ["red"], "red")) != base


def test_concurrent_writers_of_one_key_leave_one_complete_file(tmp_path):
    cache = JudgeCache(tmp_path)
    key = "ab" + "0" * 62
    records = [{"reply": "x" * 100_000, "writer": i} for i in range(8)]
    threads = [threading.Thread(target=cache.put, args=(key, r)) for r in records]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.get(key) in records
    assert [p.name for p in (tmp_path / "ab").iterdir()] == [f"{key}.json"]


def test_unreadable_cache_file_is_a_miss(tmp_path):
    cache = JudgeCache(tmp_path)
    key = "cd" + "1" * 62
    cache.path(key).parent.mkdir(parents=True)
    cache.path(key).write_text("{torn")
    assert cache.get(key) is None


# --- summary --------------------------------------------------------------------------------------


def _v(score):
    return JudgeVerdict(score=score, reason="", error=None if score is not None else "parse: x")


def test_summary_excludes_and_counts_failures():
    out = judge_summary([_v(1.0), _v(0.0), _v(1.0), _v(None)], max_failure_rate=0.5)
    assert out["mean"] == 2 / 3 and out["n"] == 4 and out["n_failed"] == 1
    assert out["failure_rate"] == 0.25 and out["publishable"] is True and out["reason"] is None


def test_summary_refuses_to_publish_above_the_failure_rate():
    out = judge_summary([_v(1.0)] * 49 + [_v(None)] * 2)  # 2/51 = 3.9% > 2%
    assert out["publishable"] is False and "exceeds max_failure_rate 0.02" in out["reason"]
    assert judge_summary([_v(1.0)] * 49 + [_v(None)])["publishable"] is True  # exactly 2%


def test_summary_of_nothing_is_not_publishable():
    out = judge_summary([])
    assert math.isnan(out["mean"]) and out["publishable"] is False


# --- configuration ----------------------------------------------------------------------------------


def test_none_config_gives_no_judge_and_says_so():
    judge = make_judge(group_node("judge", "none"))
    assert judge is None
    assert judge_banner(judge) == NOT_CONFIGURED == "judge: not configured"


def test_openai_config_builds_a_judge(server, tmp_path):
    cfg = group_node("judge", "openai")
    cfg.model, cfg.base_url, cfg.api_key, cfg.cache_dir = "judge-test", server.base_url, "EMPTY", str(tmp_path)
    judge = make_judge(cfg)
    assert isinstance(judge, Judge) and judge.score_many([_item()])[0].score == 1.0
    assert judge_banner(judge) == f"judge: judge-test at {server.base_url}, template answer_correctness@v1"


def test_openai_config_without_model_is_a_judge_error():
    with pytest.raises(JudgeError, match="judge.model"):
        make_judge(group_node("judge", "openai"))


def test_missing_api_key_is_a_judge_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(JudgeError, match="set OPENAI_API_KEY or judge.api_key"):
        Judge(model="m", base_url="http://127.0.0.1:9/v1")


def test_api_key_from_environment(monkeypatch, server, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert _judge(server, tmp_path, api_key=None).score_many([_item()])[0].score == 1.0


def test_unknown_template_is_a_judge_error():
    with pytest.raises(JudgeError, match="unknown judge template answer_correctness@v99"):
        get_template("answer_correctness", 99)


def test_cache_file_without_a_text_reply_is_a_miss(tmp_path):
    cache = JudgeCache(tmp_path)
    key = "ef" + "2" * 62
    cache.put(key, {"reply": 3})
    assert cache.get(key) is None
