"""Secrets given on the command line (`policy.api_key=sk-...`, `policy.base_url=http://user:key@host`,
`policy.base_url='http://host/v1?api_key=...'`)
kept out of everything Hydra writes and prints: the sweep's multirun.yaml, the overrides it logs for
each job, job logs. Each secret value moves into an environment variable of this process (inherited
by local and Slurm jobs) and the override names it instead: `policy.api_key=${oc.env:RVT_BENCH_SECRET_0}`,
resolved only when the config is used. Everything else this process writes or prints is scrubbed
by rvt_bench.core.secrets."""
from __future__ import annotations

import os
import re

from rvt_bench.core import secrets

ENV_PREFIX = "RVT_BENCH_SECRET_"


def hide_secret_overrides(argv: list[str], environ: dict[str, str] | None = None) -> list[str]:
    """`argv` with the value of every secret override (a key in rvt_bench.core.secrets.SECRET_KEYS,
    or a value holding a URL credential: user-info or a credential query parameter, `?api_key=`) replaced by an `${oc.env:RVT_BENCH_SECRET_<n>}`
    interpolation of a new variable of `environ` (default os.environ) that holds it, each element of
    a sweep (`key=a,b`) on its own; each value is also remembered for scrubbing. Flags and other
    overrides are kept as they are."""
    environ = os.environ if environ is None else environ
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or arg.startswith("-") or "${" in value:
            out.append(arg)
            continue
        by_key = key.lstrip("+~").rsplit(".", 1)[-1] in secrets.SECRET_KEYS
        elements = _sweep_elements(value)
        hidden = [_hide(e, environ, whole=True) if by_key and e not in ("", "null", "None") else
                  _hide(e, environ, whole=False) if secrets.in_url(e) else e for e in elements]
        out.append(arg if hidden == elements else f"{key}={','.join(hidden)}")
    return out


def _sweep_elements(value: str) -> list[str]:
    """The values of a simple sweep `a,b,c`, or [value] (a quoted value, a list, a sweep function)."""
    quoted = len(value) >= 2 and value[0] == value[-1] and value[0] in "'\""
    if quoted or "," not in value or value[:1] in "[{(" or re.match(r"\w+\(", value):
        return [value]
    return value.split(",")


def _hide(value: str, environ: dict[str, str], whole: bool) -> str:
    """The interpolation of a new variable holding `value`; `whole`: the value is a secret (an API
    key), else only the URL credentials inside it are."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    n = 0
    while f"{ENV_PREFIX}{n}" in environ:
        n += 1
    environ[f"{ENV_PREFIX}{n}"] = value
    if whole:
        secrets.remember(value)
    secrets.remember_config(value)
    return f"${{oc.env:{ENV_PREFIX}{n}}}"
