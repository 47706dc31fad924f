"""Secrets given on the command line (`policy.api_key=sk-...`, `policy.base_url=http://user:key@host`,
`policy.base_url='http://host/v1?api_key=...'`)
kept out of everything Hydra writes and prints: the sweep's multirun.yaml, the overrides it logs for
each job, job logs. Each secret value moves into an environment variable of this process (inherited
by local and Slurm jobs) and the override names it instead: `policy.api_key=${oc.env:RVT_BENCH_SECRET_0}`,
resolved only when the config is used. Everything else this process writes or prints is scrubbed
by rvt_bench.core.secrets.

The other way round, `env_interpolation_problems` keeps the environment out of what a run
publishes: a config value (a `--config-dir` YAML, an override) that reads an environment variable
with `${oc.env:NAME}` copies its value into config.yaml, metrics.json, report.html and the
leaderboard; that is refused, one line, unless the value is redacted anyway (a variable named as a
secret, RVT_BENCH_SECRET_<n>, or a secret key such as api_key)."""
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


_ENV_NAME = re.compile(r"oc\.env\s*:\s*([^,}\s'\"]*)")


def env_interpolation_problems(node: object, where: str = "", key: str = "") -> list[str]:
    """One line per value of the unresolved config `node` (a plain container:
    OmegaConf.to_container(cfg, resolve=False)) that reads an environment variable into the run's
    published files: `${oc.env:NAME}` where NAME does not say it is a secret
    (rvt_bench.core.secrets.secret_env_name), is not one of ours (RVT_BENCH_SECRET_<n>) and the
    value is not a secret key's (api_key, Authorization: redacted wherever written); and any
    `${oc.decode:...}`, which may build such an interpolation at run time. Empty when none."""
    if isinstance(node, dict):
        return [line for k, v in node.items() for line in env_interpolation_problems(v, f"{where}.{k}" if where else str(k), str(k))]
    if isinstance(node, (list, tuple)):
        return [line for i, v in enumerate(node) for line in env_interpolation_problems(v, f"{where}[{i}]", key)]
    if not isinstance(node, str) or "oc." not in node:
        return []
    if "oc.decode" in node:
        return [f"{where} decodes a string at run time (oc.decode), which may read the environment into the run's "
                f"published files; write the value itself"]
    out = []
    for name in _ENV_NAME.findall(node):
        if name.startswith(ENV_PREFIX) or secrets.secret_env_name(name) or secrets.secret_config_key(key):
            continue
        shown = name.encode("unicode_escape", "backslashreplace").decode("ascii")[:80]
        out.append(f"{where} reads environment variable {shown} (oc.env), whose value would be published in config.yaml, "
                   f"metrics.json, report.html and the leaderboard; write the value itself (the shell's ${shown} on the "
                   f"command line), or keep a secret in a variable named as one (API_KEY, TOKEN, SECRET or PASSWORD in "
                   f"its name: redacted)")
    return out


def check_env_interpolations(cfg: object) -> None:
    """Raise ConfigError (one line, every problem of `env_interpolation_problems`) when the composed
    config `cfg` reads an environment variable into what the run publishes."""
    from omegaconf import OmegaConf

    from rvt_bench.core.types import ConfigError

    found = env_interpolation_problems(OmegaConf.to_container(cfg, resolve=False))
    if found:
        raise ConfigError("; ".join(dict.fromkeys(found)))
