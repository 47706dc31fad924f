"""The OpenAI-compatible policy (adapters/policy/openai_compat.py) against a real HTTP server on
loopback, started by the test, that speaks the completions API the way vLLM and Ollama do."""

import pytest

from rvt_bench.adapters.policy.base import Request
from rvt_bench.adapters.policy.openai_compat import OpenAIPolicy
from rvt_bench.core.types import AdapterError
from tests.tiny_models import R1_TEMPLATE
from tests.loopback import JSONHandler, Loopback, RequestLog

MESSAGES = [{"role": "system", "content": "SYS"}, {"role": "user", "content": "find the dog"}]


class Server(RequestLog):
    """Loopback completions server. `continuation(prompt)` is the text the "model" would write;
    stop strings cut it as vLLM does (text before the earliest stop, finish_reason "stop").
    style: "vllm" reports stop_reason (the stop string, or None at EOS), "ollama" reports nothing.
    fail: HTTP statuses to answer the next requests with, in order."""

    def __init__(self, continuation, style="vllm"):
        self.continuation, self.style = continuation, style
        RequestLog.__init__(self)
        server = self

        class Handler(JSONHandler):
            def do_POST(self):
                body = self.read_json()
                status = server.take(body)
                if status != 200:
                    return self.send_json(status, {"error": {"message": f"injected {status}", "type": "server_error"}})
                self.send_json(200, server.complete(body))

        self.loopback = Loopback(Handler)
        self.url = self.loopback.root + "/v1"

    def complete(self, body):
        words = self.continuation(body["prompt"]).split(" ")
        text, finish, matched = " ".join(words[: body["max_tokens"]]), "length", None
        if len(words) <= body["max_tokens"]:
            finish = "stop"  # EOS
        hits = [(text.find(s), s) for s in body.get("stop") or [] if s in text]
        if hits:
            pos, matched = min(hits)
            text, finish = text[:pos], "stop"
        choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
        if self.style == "vllm":
            choice["stop_reason"] = matched
        n = len(text.split(" ")) if text else 0
        return {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": body["model"], "choices": [choice],
                "usage": {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}}

    def close(self):
        self.loopback.close()


@pytest.fixture
def serve():
    servers = []

    def start(continuation, style="vllm"):
        servers.append(Server(continuation, style))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def _policy(url, **kw):
    kw = {"extra_body": {"add_special_tokens": False}, "chat_template": R1_TEMPLATE, "bos_token": "<｜begin▁of▁sentence｜>", "api_key": "EMPTY", "backoff_s": 0.01, "max_retries": 2, **kw}
    return OpenAIPolicy("dtr1", url, **kw)


def test_prompt_is_the_rendered_turn_and_stop_strings_are_sent(serve):
    server = serve(lambda p: "look</think> <dt_plan>{}</dt_plan> more")
    policy = _policy(server.url)
    prompt = policy.render(MESSAGES, policy.prefill + "hmm ")
    assert policy.prefill == "<think>\n"
    assert prompt == "<｜begin▁of▁sentence｜>SYS<｜User｜>find the dog<｜Assistant｜><think>\nhmm "
    gen = policy.generate(prompt, ["</dt_plan>", "</answer>"], 50)
    assert (gen.text, gen.stop_reason, gen.matched_stop, gen.n_tokens) == ("look</think> <dt_plan>{}", "stop", "</dt_plan>", 2)  # n_tokens: usage.completion_tokens
    body = server.bodies[0]
    assert body["add_special_tokens"] is False  # extra_body: the template wrote BOS already
    assert (body["prompt"], body["stop"], body["max_tokens"], body["model"]) == (prompt, ["</dt_plan>", "</answer>"], 50, "dtr1")


def test_end_of_turn_and_length_are_told_apart(serve):
    server = serve(lambda p: "a b c d e")
    policy = _policy(server.url)
    eos = policy.generate("x", ["</answer>"], 10)
    assert (eos.text, eos.stop_reason, eos.matched_stop) == ("a b c d e", "eos", None)
    cut = policy.generate("x", ["</answer>"], 3)
    assert (cut.text, cut.stop_reason, cut.n_tokens) == ("a b c", "length", 3)


def test_unreported_stop_is_inferred_from_the_open_block(serve):
    server = serve(lambda p: "<think>t</think> <execute>print(1)</execute> tail", style="ollama")
    policy = _policy(server.url)
    gen = policy.generate("x", ["</execute>", "</answer>"], 50)
    assert (gen.text, gen.stop_reason, gen.matched_stop) == ("<think>t</think> <execute>print(1)", "stop", "</execute>")
    closed = serve(lambda p: "<answer>42</answer>", style="ollama")
    gen = _policy(closed.url).generate("x", ["</execute>"], 50)
    assert (gen.stop_reason, gen.matched_stop) == ("eos", None)


def test_server_errors_are_retried_with_backoff(serve):
    server = serve(lambda p: "ok</answer>")
    server.fail = [503, 429]
    gen = _policy(server.url, max_retries=2).generate("x", ["</answer>"], 5)
    assert gen.text == "ok" and len(server.bodies) == 3


def test_persistent_errors_raise_adapter_error_naming_the_server(serve):
    server = serve(lambda p: "ok")
    server.fail = [502, 502, 502]
    with pytest.raises(AdapterError, match=r"HTTP 502 after 2 attempt\(s\)") as info:
        _policy(server.url, max_retries=1).generate("x", [], 5)
    assert server.url in str(info.value)
    server.fail = [400]
    with pytest.raises(AdapterError, match=r"HTTP 400 after 1 attempt\(s\)"):
        _policy(server.url, max_retries=3).generate("x", [], 5)


def test_batch_is_sent_concurrently_and_returned_in_order(serve):
    server = serve(lambda p: f"answer {p}</answer> rest")
    policy = _policy(server.url, max_concurrency=4)
    requests = [Request(f"q{i}", ["</answer>"], 10) for i in range(8)]
    batched = policy.generate_batch(requests)
    assert [g.text for g in batched] == [f"answer q{i}" for i in range(8)]
    assert sorted(b["prompt"] for b in server.bodies) == sorted(f"q{i}" for i in range(8))


def test_missing_model_is_refused():
    with pytest.raises(AdapterError, match="model"):
        OpenAIPolicy("???", "http://127.0.0.1:1/v1", chat_template=R1_TEMPLATE)


class TemplatingServer(Server):
    """Server plus vLLM's /tokenize (messages -> token ids of the chat-template rendering, here one
    id per character) and /detokenize (ids -> text); `tokenize=False` answers them 404, as a server
    without these endpoints does."""

    def __init__(self, continuation, tokenize=True):
        super().__init__(continuation)
        self.loopback.close()
        server = self

        class Handler(JSONHandler):
            def do_GET(self):
                if self.path.rstrip("/") == "/v1/models":
                    return self.send_json(200, {"object": "list", "data": [{"id": "dtr1", "object": "model"}]})
                self.send_json(404, {})

            def do_POST(self):
                body = self.read_json()
                server.bodies.append({"path": self.path, **body})
                if self.path in ("/tokenize", "/detokenize") and not tokenize:
                    return self.send_json(404, {"detail": "Not Found"})
                if self.path == "/tokenize":
                    text = body.get("prompt") or "".join(f"<|{m['role']}|>{m['content']}" for m in body["messages"]) + "<|assistant|><think>\n"
                    return self.send_json(200, {"tokens": [ord(c) for c in text], "count": len(text)})
                if self.path == "/detokenize":
                    return self.send_json(200, {"prompt": "".join(chr(t) for t in body["tokens"])})
                if self.path != "/v1/completions":  # e.g. llama.cpp's /apply-template
                    return self.send_json(404, {"detail": "Not Found"})
                self.send_json(200, server.complete(body))

        self.loopback = Loopback(Handler)
        self.url = self.loopback.root + "/v1"


def test_without_tokenizer_the_server_renders_its_own_chat_template(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no hub: nothing may be fetched
    server = TemplatingServer(lambda prompt: "plan</think>")
    try:
        policy = OpenAIPolicy("dtr1", server.url, api_key="EMPTY", max_retries=0)
        policy.preflight()
        prompt = policy.render(MESSAGES, policy.prefill + "R0")
        assert policy.prefill == "<think>\n"
        assert prompt == "<|system|>SYS<|user|>find the dog<|assistant|><think>\nR0"
        out = policy.generate(prompt, ["</think>"], 8)
        assert out.text == "plan" and server.bodies[-1]["prompt"] == prompt
        assert policy.fingerprint()["chat_template"] == "server"
    finally:
        server.close()


def test_a_server_without_tokenize_endpoints_names_the_settings_to_use():
    server = TemplatingServer(lambda prompt: "x", tokenize=False)
    try:
        policy = OpenAIPolicy("dtr1", server.url, api_key="EMPTY", max_retries=0)
        with pytest.raises(AdapterError, match="no /tokenize endpoint.*policy.tokenizer.*policy.chat_template"):
            policy.preflight()
    finally:
        server.close()


def test_a_server_that_is_down_is_named_before_any_tokenizer_is_loaded(tmp_path):
    from rvt_bench.core.types import ServerUnreachableError

    policy = OpenAIPolicy("dtr1", "http://127.0.0.1:9/v1", tokenizer=str(tmp_path / "no-such-tokenizer"), api_key="EMPTY")
    with pytest.raises(ServerUnreachableError, match="policy.base_url=http://127.0.0.1:9/v1 cannot be reached"):
        policy.preflight()
