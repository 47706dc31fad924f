"""Secret values this process knows (API keys, passwords and tokens inside URLs), and their removal
from any text before it reaches a file or the console: every run file goes through
rvt_bench.core.store, whose writers call `scrub`; every log record (console, Hydra's job log,
run.log) is scrubbed when it is made (`scrub_logs`). A server that echoes the key in an error, or a
key written into `policy.base_url`, is then `<redacted>` wherever it would have been shown."""
from __future__ import annotations

import base64
import json
import logging
import os
import re
import threading
from typing import Any
from urllib.parse import unquote

from rvt_bench.core.printable import PRINTABLE_ARGS

MASK = "<redacted>"
SECRET_KEYS = ("api_key",)
"""Config keys whose values are secrets, wherever they appear (policy.api_key, judge.api_key, model.api_key)."""
# Environment variables whose values are secrets (OPENAI_API_KEY, HF_TOKEN, WANDB_API_KEY...).
_SECRET_ENV = re.compile(r"API_KEY|TOKEN|SECRET|PASSWORD", re.I)
# scheme://userinfo@ : whatever stands before the @ of a URL is a credential.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s@'\"<>]+)@")
# Values that are placeholders, not secrets (vLLM's "EMPTY"): too short or too common to scrub.
_MIN_LENGTH = 8
_NOT_SECRETS = {"EMPTY", "<redacted>", "none", "null"}

_known: set[str] = set()
_lock = threading.Lock()


def remember(value: Any) -> None:
    """Scrub `value` (a secret string) from everything written or printed from now on. Values
    shorter than 8 characters or placeholders ("EMPTY") are not secrets and are ignored."""
    if not isinstance(value, str) or len(value) < _MIN_LENGTH or value in _NOT_SECRETS or value.startswith("${"):
        return
    from urllib.parse import quote

    with _lock:
        _known.update({value, quote(value, safe=""), unquote(value), value.encode("unicode_escape").decode("ascii"),
                       json.dumps(value)[1:-1]})


def remember_config(node: Any) -> None:
    """Remember the secrets of a (resolved) config: values of SECRET_KEYS and credentials inside URLs."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in SECRET_KEYS:
                remember(value)
            remember_config(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            remember_config(value)
    elif isinstance(node, str):
        for m in _URL_USERINFO.finditer(node):
            userinfo = m.group("userinfo")
            remember(userinfo.partition(":")[2] or userinfo)
            # as an HTTP client sends it (Authorization: Basic base64("user:password"), the password
            # "" when the URL holds a token as its user name), which a server may echo back
            user, _, password = userinfo.partition(":")
            remember(base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii"))


def remember_environment(environ: dict[str, str] | None = None) -> None:
    """Remember the values of the environment's secret variables (names with API_KEY, TOKEN,
    SECRET or PASSWORD): a policy that reads OPENAI_API_KEY must not echo it either."""
    for name, value in (os.environ if environ is None else environ).items():
        if _SECRET_ENV.search(name):
            remember(value)


def scrub(text: str) -> str:
    """`text` with every remembered secret and every URL credential replaced by MASK."""
    if not text:
        return text
    if "://" in text:
        text = _URL_USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for value in known:
        if value in text:
            text = text.replace(value, MASK)
    return text


_factory_lock = threading.Lock()
_installed = False


def scrub_logs() -> None:
    """Scrub every log record of this process when it is made, before any handler (console,
    Hydra's job log, run.log, a progress bar's redirect) sees it: its message and traceback are
    rendered, scrubbed and frozen. Idempotent."""
    global _installed
    with _factory_lock:
        if _installed:
            return
        make = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = make(*args, **kwargs)
            # data in the arguments and the traceback (a file name with a newline or an ANSI escape)
            # is escaped before the message is rendered (rvt_bench.core.printable.PrintableArgs)
            PRINTABLE_ARGS.filter(record)
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a malformed record is logging's to report, as it would have
                return record
            record.msg, record.args = scrub(message), None
            if record.exc_text:
                record.exc_text = scrub(record.exc_text)
            if record.stack_info:
                record.stack_info = scrub(record.stack_info)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True
