"""Secrets given on the command line (`policy.api_key=sk-...`, `policy.base_url=http://user:key@host`)
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
_URL_CREDENTIAL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s@]+@")


def hide_secret_overrides(argv: list[str], environ: dict[str, str] | None = None) -> list[str]:
    """`argv` with the value of every secret override (a key in rvt_bench.core.secrets.SECRET_KEYS,
    or a value holding a URL credential) replaced by an `${oc.env:RVT_BENCH_SECRET_<n>}`
    interpolation of a new variable of `environ` (default os.environ) that holds it; each value is
    also remembered for scrubbing. Flags and other overrides are kept as they are."""
    environ = os.environ if environ is None else environ
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        name = key.lstrip("+~").rsplit(".", 1)[-1]
        secret = sep and not arg.startswith("-") and value not in ("", "null", "None") and "${" not in value and (
            name in secrets.SECRET_KEYS or _URL_CREDENTIAL.search(value))
        if not secret:
            out.append(arg)
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        n = 0
        while f"{ENV_PREFIX}{n}" in environ:
            n += 1
        var = f"{ENV_PREFIX}{n}"
        environ[var] = value
        secrets.remember(value)
        secrets.remember_config(value)
        out.append(f"{key}=${{oc.env:{var}}}")
    return out
