"""A run stopped by its surroundings, not by its data or model: Ctrl-C, SIGTERM, SIGHUP, a full disk, a read-only or
forbidden run root, a missing package, a server that is down. Each becomes a rvt_bench.core.types.RunStopped
with one line saying what happened, what was kept and how to resume (the command line maps its
reason to an exit status); the traceback goes to <run_dir>/run.log.
"""
from __future__ import annotations

import errno
import time
from dataclasses import dataclass, field
from pathlib import Path

from rvt_bench.core.printable import printable, printable_lines
from rvt_bench.core.secrets import scrub
from rvt_bench.core.types import RunStopped, ServerUnreachableError
from rvt_bench.harness import signals
from rvt_bench.harness.rundir import RUN_LOG


@dataclass
class Progress:
    """Where an invocation is, for the one line a stop prints."""

    run_dir: Path | None = None
    phase: str = "starting"           # starting | predicting | scoring | publishing
    predicted: int = 0
    in_flight: list[str] = field(default_factory=list)


# OSError numbers that are the machine's state, not a bug: one line and an exit status each.
OS_STOPS = {errno.ENOSPC: "no_space", errno.EDQUOT: "no_space", errno.EROFS: "read_only",
            errno.EACCES: "permission", errno.EPERM: "permission"}


def stop_for(exc: BaseException, progress: Progress, model_name: str) -> RunStopped | None:
    """The RunStopped that `exc` (raised while running) stands for, or None when it is not a stop
    by the surroundings (then it propagates as it is)."""
    if isinstance(exc, KeyboardInterrupt):  # Ctrl-C, SIGTERM, SIGHUP (rvt_bench.harness.signals)
        return RunStopped(_interrupted(progress, signals.said(exc)), signals.reason(exc))
    if isinstance(exc, OSError):
        reason = OS_STOPS.get(exc.errno or 0)
        return None if reason is None else RunStopped(_os_stop(exc, reason, progress), reason)
    if isinstance(exc, ModuleNotFoundError):  # a backend imports its package on first use
        return RunStopped(not_importable(str(exc.name), f"model {model_name!r}"), "missing_package")
    if isinstance(exc, ServerUnreachableError):
        return RunStopped(f"{exc}; nothing was lost: the same command resumes once the server is up", "server_down")
    return None


# import names whose distribution is named otherwise (the rest: the import name, "_" read as "-")
_DISTRIBUTIONS = {"skimage": "scikit-image", "hydra_plugins.hydra_submitit_launcher": "hydra-submitit-launcher",
                  "hydra_plugins.hydra_joblib_launcher": "hydra-joblib-launcher", "submitit": "hydra-submitit-launcher",
                  "joblib": "hydra-joblib-launcher"}


def install_hint(module: str) -> str:
    """The one install line for a missing module: the project's extra that lists its distribution
    (`pip install -e ".[tensorboard]"`; from the installed metadata of rvt-bench, so it follows
    pyproject.toml; the narrowest extra, `test` last), else `pip install <distribution>`."""
    import re
    from importlib import metadata

    dist = next((d for m, d in _DISTRIBUTIONS.items() if module == m or module.startswith(m + ".")),
                module.split(".")[0].replace("_", "-"))
    extras: list[str] = []
    try:
        requires = metadata.requires("rvt-bench") or []
    except metadata.PackageNotFoundError:
        requires = []
    for req in requires:
        name = re.split(r"[\s\[<>=!~;(]", req, maxsplit=1)[0].lower()
        extra = re.search(r"extra\s*==\s*[\"']([^\"']+)[\"']", req)
        if extra and name == dist.lower() and extra.group(1) not in extras:
            extras.append(extra.group(1))
    if extras:
        best = sorted(extras, key=lambda e: (e == "test", len(e)))[0]
        return f'pip install -e ".[{best}]"'
    return f"pip install {dist}"


def not_importable(module: str, what: str) -> str:
    """The one line for a module `what` needs that Python cannot import. Only a package rvt-bench
    itself declares (a dependency or an extra of its pyproject.toml) gets `pip install NAME`; any
    other name is a module of the user's own (a --config-dir model's code, a package of theirs)
    and never a name to install from PyPI: the fix is Python's path or an editable install."""
    top = module.split(".")[0]
    dist = declared_distribution(top)
    if dist is not None:
        return f"{what} needs the Python package {module!r}, which is not installed: {install_hint(module)}"
    found = _package_origin(top)
    if found is not None and module != top:
        return (f"{what} needs the module {module!r}, which Python cannot import: the package {top!r} "
                f"({found}) has no such module; check the _target_, or reinstall the package (pip install -e YOUR_PACKAGE)")
    return (f"{what} needs the module {module!r}, which Python cannot import: it is not on Python's path; "
            f"put the folder that holds {top!r} on PYTHONPATH (PYTHONPATH=DIR rvt-bench ...) "
            f"or install the package that holds it: pip install -e YOUR_PACKAGE")


def _package_origin(top_module: str) -> str | None:
    """Where the top-level package `top_module` is imported from, or None when it is not found."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(top_module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    return str(list(spec.submodule_search_locations or [])[:1][0] if spec.submodule_search_locations else spec.origin)


def declared_distribution(top_module: str) -> str | None:
    """The distribution of rvt-bench's declared requirements (extras included) whose normalised
    name is `top_module` ("sam2" -> "sam2", "hydra_submitit_launcher" -> "hydra-submitit-launcher"),
    or None."""
    import importlib.metadata
    import re

    try:
        requires = importlib.metadata.requires("rvt-bench") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for req in requires:
        name = re.match(r"[A-Za-z0-9._-]+", req)
        if name and re.sub(r"[-_.]+", "_", name.group(0)).lower() == top_module.lower():
            return name.group(0)
    return None


def missing_module(exc: BaseException | None) -> str | None:
    """The name of the module a ModuleNotFoundError behind `exc` (Hydra wraps it) could not import."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            return exc.name
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


SHOWN_IN_FLIGHT = 3  # ids named in a stop line; the rest counted
SHOWN_ID_CHARS = 40


def _short(text: str) -> str:
    return text if len(text) <= SHOWN_ID_CHARS else text[:SHOWN_ID_CHARS - 3] + "..."


def _interrupted(p: Progress, what: str = "interrupted (Ctrl-C)") -> str:
    where = f" in {printable(p.run_dir)}" if p.run_dir else ""  # a run.root with a newline stays one line
    if p.phase == "predicting":
        k = len(p.in_flight)  # a batch has several; a few ids, each cut short, keep the line readable
        ids = "; ".join(_short(printable(i)) for i in p.in_flight[:SHOWN_IN_FLIGHT])
        ids += f"; +{k - SHOWN_IN_FLIGHT} more" if k > SHOWN_IN_FLIGHT else ""
        # "not waited for", not "lost": one may still be saved as the process ends (resume counts it)
        flight = ("" if not k else f"; the sample in flight ({ids}) was not waited for" if k == 1
                  else f"; the {k} samples in flight ({ids}) were not waited for")
        return (f"{what} while predicting: {p.predicted} predictions of this invocation are saved{where}"
                f"{flight}; the same command resumes from there")
    if p.phase == "scoring":
        return (f"{what} while scoring: every prediction is saved{where} and metrics.json was not "
                f"changed; the same command scores again without model work")
    return f"{what} while {p.phase}: nothing was lost{where}; the same command starts again"


def _os_stop(exc: OSError, reason: str, p: Progress) -> str:
    what = {"no_space": "no space left on the device", "read_only": "the file system is read-only",
            "permission": "permission denied"}[reason]
    fix = {"no_space": "free space (or set run.root elsewhere)", "read_only": "set run.root to a writable directory",
           "permission": "fix the permissions or set run.root to a directory you own"}[reason]
    kept = (f"; the {p.predicted} predictions made so far are saved and the same command resumes"
            if p.phase == "predicting" else "")
    return f"{what} writing {printable(exc.filename or 'a run file')} while {p.phase}{kept}; {fix}"


def log_stop(p: Progress, exc: BaseException, tb: str) -> None:
    """Append a stop's full traceback to <run_dir>/run.log (the terminal gets one line); nothing
    before the run directory is known."""
    if p.run_dir is None:
        return
    try:
        with open(p.run_dir / RUN_LOG, "a", encoding="utf-8") as fh:
            fh.write(scrub(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} stopped: {printable(exc)}\n"
                           f"{printable_lines(tb)}\n"))
    except OSError:
        pass  # the disk that stopped the run may not take the log either
