"""Calls to OpenAI-compatible servers (the LLM judge, the `openai` policy) with one retry rule.

Retried (transient): HTTP 408, 429, 502, 503, 504, timeouts and connection errors (resets), with exponential backoff
(backoff_s * 2**k, capped at backoff_max_s), or longer when the server's Retry-After header asks
for it (seconds or an HTTP date; at most RETRY_AFTER_MAX_S). Not retried (deterministic: the same request
gets the same answer): other API errors (400, 401, 404, 500 "image input is not supported"...) and a
200 whose body is not JSON. Either way the caller gets its own error type with one message naming
the server, the status and the number of attempts.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRY_AFTER_MAX_S = 600.0
"""The longest Retry-After we wait for; a longer one is cut to this."""


def retry_after_s(exc: Exception) -> float | None:
    """Seconds a response's Retry-After header asks to wait (RFC 9110: delay-seconds or an
    HTTP-date), or None without a usable header."""
    import email.utils
    import time as _time

    response = getattr(exc, "response", None)
    value = None if response is None else response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - _time.time())


TRANSIENT_STATUS = frozenset({408, 429, 502, 503, 504})
"""HTTP statuses worth asking again (timeout, rate limit, a gateway or server that is busy); any other
status is the server's answer to this request and comes again."""


def transient(exc: Exception) -> bool:
    """True for an openai error worth retrying: a timeout, a connection error (reset, refused) or a
    status in TRANSIENT_STATUS."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # APITimeoutError is one
        return True
    return getattr(exc, "status_code", None) in TRANSIENT_STATUS


def call_with_retries(call: Callable[[], T], *, what: str, base_url: str, max_retries: int, backoff_s: float,
                      backoff_max_s: float, error: Callable[[str], Exception]) -> T:
    """`call()` (an openai client request), retried as the module docstring says.

    what: names the caller in messages ("judge, sample 3"). error: builds the exception to raise
    from a message (JudgeError, AdapterError...). Returns what `call` returns.
    """
    import openai

    for attempt in range(1, max_retries + 2):
        try:
            return call()
        except ValueError as exc:  # a 200 whose body is not JSON (the client's json.JSONDecodeError)
            raise error(f"{what}: unreadable response body from {base_url}: {str(exc)[:200]}") from exc
        except openai.APIError as exc:
            status = getattr(exc, "status_code", None)
            kind = f"HTTP {status}" if status is not None else type(exc).__name__
            if not transient(exc) or attempt > max_retries:
                raise error(f"{what}: {kind} after {attempt} attempt(s) at {base_url}: {str(exc)[:200]}") from exc
            wait = min(backoff_max_s, backoff_s * 2 ** (attempt - 1))
            asked = retry_after_s(exc)
            if asked is not None:
                wait = min(RETRY_AFTER_MAX_S, max(wait, asked))  # the server knows when it has room
            log.info("%s: attempt %d: %s; retrying in %.3g s", what, attempt, kind, wait)
            time.sleep(wait)
    raise AssertionError("unreachable")
