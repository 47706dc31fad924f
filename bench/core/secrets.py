"""Secret values this process knows (API keys, passwords and tokens inside URLs, credential query
parameters such as `?api_key=`, secret header values), and their removal from any text before it
reaches a file or the console: every run file goes through
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
# A URL query parameter whose value is a credential (?api_key=..., &access_token=..., &sig=...): the
# names of OpenAI-compatible servers, OAuth, Google, Azure SAS and S3 presigned URLs, and the generic ones.
_PARAM_NAMES = (r"api[_-]?key|apikey|key|access[_-]?token|refresh[_-]?token|id[_-]?token|auth[_-]?token|token|"
                r"auth|authorization|sig|signature|secret|client[_-]?secret|password|passwd|pwd|code|session|"
                r"x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|x-goog-credential|"
                r"private[_-]?token|bearer|credential|credentials|subscription[_-]?key")
_URL_PARAM = re.compile(rf"(?P<name>[?&;#](?:{_PARAM_NAMES})=)(?P<value>[^&#;\s'\"<>]+)", re.I)
# A URL's fragment (`#...`): never sent to a server, and where a config URL has one it may hold a
# token (OAuth's `#access_token=`, or a key pasted after '#'): remembered as a secret.
_URL_FRAGMENT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s#'\"<>]*#(?P<fragment>[^\s'\"<>]+)")
# An HTTP header whose value is a credential, as a config key (headers: {Authorization: ...}) or a
# "Name: value" line a server or client library may print; an auth scheme word is kept.
_HEADER_NAMES = (r"authorization|proxy-authorization|x-api-key|api-key|x-auth-token|x-access-token|cookie|"
                 r"set-cookie|ocp-apim-subscription-key|x-goog-api-key")
_HEADER_KEY = re.compile(rf"^(?:{_HEADER_NAMES})$", re.I)
_HEADER_LINE = re.compile(rf"(?P<name>\b(?:{_HEADER_NAMES})['\"]?\s*[:=]\s*['\"]?(?:(?:bearer|basic|token|digest)\s+)?)"
                          rf"(?P<value>[^\s,;'\"<>]+)", re.I)
_SCHEME = re.compile(r"^(?:bearer|basic|token|digest)\s+", re.I)
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
    """Remember the secrets of a (resolved) config: values of SECRET_KEYS, of secret HTTP headers
    (a key named Authorization, X-Api-Key, ...: the value without its "Bearer"), credentials inside
    URLs and the values of credential query parameters (`?api_key=`, `&sig=`)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in SECRET_KEYS:
                remember(value)
            if isinstance(key, str) and _HEADER_KEY.match(key) and isinstance(value, str):
                remember(value)
                remember(_SCHEME.sub("", value))
            remember_config(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            remember_config(value)
    elif isinstance(node, str):
        for m in _URL_PARAM.finditer(node):
            remember(m.group("value"))
        for m in _URL_FRAGMENT.finditer(node):
            remember(m.group("fragment"))
        for m in _URL_USERINFO.finditer(node):
            userinfo = m.group("userinfo")
            remember(userinfo.partition(":")[2] or userinfo)
            # as an HTTP client sends it (Authorization: Basic base64("user:password"), the password
            # "" when the URL holds a token as its user name), which a server may echo back
            user, _, password = userinfo.partition(":")
            remember(base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii"))


def in_url(text: str) -> bool:
    """Whether `text` holds a URL credential: user-info (`http://user:key@host`), a credential
    query parameter (`?api_key=...`) or a fragment (`#...`)."""
    return bool(_URL_USERINFO.search(text) or _URL_PARAM.search(text) or _URL_FRAGMENT.search(text))


def secret_env_name(name: str) -> bool:
    """Whether the environment variable `name` holds a secret by its name (API_KEY, TOKEN, SECRET or
    PASSWORD in it): its value is remembered by `remember_environment` and scrubbed."""
    return bool(_SECRET_ENV.search(name))


def secret_config_key(key: str) -> bool:
    """Whether a config key's value is a secret wherever it appears (SECRET_KEYS, or a secret HTTP
    header such as Authorization): `remember_config` remembers it."""
    return key in SECRET_KEYS or bool(_HEADER_KEY.match(key))


def remember_environment(environ: dict[str, str] | None = None) -> None:
    """Remember the values of the environment's secret variables (names with API_KEY, TOKEN,
    SECRET or PASSWORD): a policy that reads OPENAI_API_KEY must not echo it either."""
    for name, value in (os.environ if environ is None else environ).items():
        if _SECRET_ENV.search(name):
            remember(value)


def scrub(text: str) -> str:
    """`text` with every remembered secret, every URL credential (user-info, credential query
    parameters) and every secret header value ("Authorization: Bearer ...") replaced by MASK."""
    if not text:
        return text
    if "://" in text:
        text = _URL_USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)
    if "=" in text:
        text = _URL_PARAM.sub(lambda m: m.group("name") + MASK, text)
    if ":" in text or "=" in text:
        text = _HEADER_LINE.sub(lambda m: m.group("name") + MASK, text)
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
