"""The command line's overrides before and after Hydra reads them: `normalise` quotes a value that
Hydra's override grammar cannot lex only because it holds non-ASCII characters
(`run.root=/data/ünï`), and refuses a `+group=` whose group is a typo of a config group;
`config_error` turns what Hydra or a schema refuses while composing the config into one line, with
"did you mean" from the schema's keys where a key is misspelt (Hydra's own hint, "use
+run.fial_fast=true", would add the typo). Every such mistake is exit status 2.
"""
from __future__ import annotations

import difflib
import re
from typing import Any

from rvt_bench.core.paths import CONF_DIR
from rvt_bench.core.types import ConfigError

# characters with a meaning in Hydra's override grammar (sweeps, lists, dicts, interpolations, quotes)
_GRAMMAR = set(",[]{}()'\"\\$=")
_SHOWN = 12  # keys listed when no close match exists


def normalise(argv: list[str]) -> list[str]:
    """`argv` with every `key=value` whose value Hydra cannot lex for its non-ASCII characters
    quoted (`key='value'`), so that the run gets exactly the value typed. Raises ConfigError (one
    line saying how to quote) for any other override Hydra cannot read, and for `+name=option`
    where `name` is not a config group but close to one."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException  # what parse_override raises (OverrideParseException is Hydra's wrapper)

    parser = OverridesParser.create()
    out = []
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            out.append(arg)
            continue
        _check_group(arg)
        try:
            parser.parse_override(arg)
            out.append(arg)
            continue
        except HydraException as exc:
            problem = _first_line(exc)
        key, _, value = arg.partition("=")
        if not value.isascii() and not (_GRAMMAR & set(value)):
            quoted = f"{key}='{value}'"
            try:
                parser.parse_override(quoted)
                out.append(quoted)
                continue
            except HydraException:
                pass
        raise ConfigError(f"cannot read the override {_shown(arg)} ({problem}); quote a value that holds spaces, "
                          f"non-ASCII or special characters: {key}='...'")
    return out


def _check_group(arg: str) -> None:
    key = arg.partition("=")[0]
    if not key.startswith("+") or "." in key or "@" in key:
        return
    name = key.lstrip("+~")
    groups = sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir() and not p.name.startswith("_"))
    if name in groups:
        return
    close = difflib.get_close_matches(name, groups, n=1, cutoff=0.75)
    if close:
        raise ConfigError(f"{name!r} is not a config group; did you mean +{close[0]}={arg.partition('=')[2]}? "
                          f"(groups: {', '.join(groups)})")


def config_error(exc: BaseException) -> str | None:
    """One line for a config mistake Hydra or an OmegaConf schema raised while composing (or a
    run reading) the config: a key not in its schema (with "did you mean"), a value of the wrong
    type, an unknown group option, an override Hydra cannot parse. None for anything else."""
    from hydra.errors import HydraException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

    cause = exc.__cause__ or exc.__context__
    for err in (exc, cause):
        if isinstance(err, (ConfigAttributeError, ConfigKeyError)) and getattr(err, "full_key", None):
            return _unknown_key(err)
    if isinstance(cause, OmegaConfBaseException) and getattr(cause, "full_key", None):
        return f"{cause.full_key}: {_first_line(cause)}"
    if isinstance(exc, OmegaConfBaseException) and getattr(exc, "full_key", None):
        return f"{exc.full_key}: {_first_line(exc)}"
    if isinstance(exc, (HydraException, OmegaConfBaseException)):
        return _did_you_mean_option(_flat(str(exc)))
    return None


def _did_you_mean_option(line: str) -> str:
    """Hydra's "Could not find 'dataset/revoss'; Available options in 'dataset': ..." with the
    option closest to the one typed named first, as for a mistyped group or setting."""
    missing = re.search(r"Could not find '([^']+)/([^'/]+)'", line)
    listed = re.search(r"Available options in '[^']+': (.*)", line)
    if not missing or not listed:
        return line
    group, typed = missing.groups()
    options = [o.strip() for o in re.split(r"[;,]", listed.group(1)) if o.strip()]
    close = difflib.get_close_matches(typed, options, n=1, cutoff=0.6)
    return f"{line}; did you mean +{group}={close[0]}?" if close else line


def _unknown_key(err: Any) -> str:
    full_key = str(err.full_key)
    prefix, _, key = full_key.rpartition(".")
    keys = [str(k) for k in (err.parent_node.keys() if getattr(err, "parent_node", None) is not None else [])]
    if not keys and isinstance(getattr(err, "object_type", None), type):
        keys = list(getattr(err.object_type, "__dataclass_fields__", {}))
    keys = [k for k in keys if not k.startswith("_")]
    if full_key == "dataset.hf_dataset":  # a benchmark whose YAML declares no hub copy
        return ("dataset.hf_dataset is not a setting of this benchmark: it is not read by hub id (docs/running.md "
                "'Data by hub id' names those that are; its docs/benchmarks page says why); use dataset.root=DIR")
    close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    where = f"{prefix}." if prefix else ""
    if close:
        return f"{full_key} is not a setting; did you mean {where}{close[0]}?"
    listed = ", ".join(keys[:_SHOWN]) + (" ..." if len(keys) > _SHOWN else "")
    return f"{full_key} is not a setting" + (f"; the settings of {prefix or 'the config'} are: {listed}" if keys else "")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _flat(text: str) -> str:
    """A multi-line Hydra message as one line: its lines joined, tabs and the search path dropped."""
    lines = []
    for line in text.splitlines():
        if line.startswith("Config search path") or line.startswith("\tprovider=") or line.startswith("See https") \
                or line.endswith("_schema"):  # the search path, a docs link, the schemas listed among the options
            continue
        if line.strip():
            lines.append(line.strip())
    out = "; ".join(lines)
    return re.sub(r":; ", ": ", out)


def _shown(arg: str) -> str:
    return repr(arg)
