"""rvt_bench.core.http.call_with_retries: which errors are retried, and what the caller's error says."""
import httpx2 as httpx  # the HTTP library the openai client (3.x) is built on
import openai
import pytest

from rvt_bench.core.http import call_with_retries


class Boom(Exception):
    pass


def api_error(status: int) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/x")
    cls = {429: openai.RateLimitError, 400: openai.BadRequestError}.get(status, openai.InternalServerError if status >= 500
                                                                          else openai.APIStatusError)
    return cls("msg", response=httpx.Response(status, request=request), body=None)


def call(outcomes):
    calls = []

    def once():
        calls.append(1)
        outcome = outcomes[min(len(calls), len(outcomes)) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return once, calls


KW = dict(what="judge, sample 1", base_url="http://127.0.0.1:9/v1", max_retries=2, backoff_s=0.0, backoff_max_s=0.0, error=Boom)


def test_rate_limit_then_success_is_retried():
    once, calls = call([api_error(429), "ok"])
    assert call_with_retries(once, **KW) == "ok" and len(calls) == 2


@pytest.mark.parametrize("status", [408, 429, 502, 503, 504])
def test_transient_server_errors_are_retried_up_to_the_limit(status):
    once, calls = call([api_error(status)])
    with pytest.raises(Boom, match=rf"judge, sample 1: HTTP {status} after 3 attempt\(s\) at http://127.0.0.1:9/v1"):
        call_with_retries(once, **KW)
    assert len(calls) == 3


def test_timeouts_and_resets_are_retried():
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/x")
    once, calls = call([openai.APITimeoutError(request), openai.APIConnectionError(request=request), "ok"])
    assert call_with_retries(once, **KW) == "ok" and len(calls) == 3


@pytest.mark.parametrize("status", [500, 501, 422])
def test_deterministic_server_errors_are_not_retried(status):
    once, calls = call([api_error(status), "ok"])
    with pytest.raises(Boom, match=rf"HTTP {status} after 1 attempt"):
        call_with_retries(once, **KW)
    assert len(calls) == 1


def test_client_errors_and_unreadable_bodies_are_not_retried():
    once, calls = call([api_error(400)])
    with pytest.raises(Boom, match="HTTP 400 after 1 attempt"):
        call_with_retries(once, **KW)
    once, calls = call([ValueError("Expecting value: line 1 column 1")])
    with pytest.raises(Boom, match="unreadable response body"):
        call_with_retries(once, **KW)
    assert len(calls) == 1


def test_retry_after_is_honoured(monkeypatch):
    import rvt_bench.core.http as http

    slept = []
    monkeypatch.setattr(http.time, "sleep", slept.append)
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/x")
    busy = openai.RateLimitError("msg", response=httpx.Response(429, request=request, headers={"Retry-After": "7"}), body=None)
    once, calls = call([busy, api_error(429), "ok"])
    assert call_with_retries(once, **KW) == "ok"
    assert slept == [7.0, 0.0]  # the header's 7 s, then plain backoff (0 here)
    dated = openai.RateLimitError("msg", response=httpx.Response(
        429, request=request, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}), body=None)
    assert http.retry_after_s(dated) == 0.0  # a date in the past: no extra wait
    assert http.retry_after_s(api_error(429)) is None
