"""Models and benchmarks kept outside this repository: where their configs come from.

Three sources besides rvt-bench's own conf/ (docs/adding-a-model.md "A model outside this repository"):

- an installed package that registers its conf folder under the entry-point group
  `rvt_bench.models` or `rvt_bench.datasets` (pyproject.toml:
  `[project.entry-points."rvt_bench.models"] my_models = "my_models.conf"`, the value a Python
  package holding `model/NAME.yaml` and/or `dataset/NAME.yaml`): appended to Hydra's search path
  of every run as `pkg://my_models.conf`;
- `--config-dir DIR` (`-cd DIR`) on the command line;
- `hydra.searchpath=[DIR, pkg://PACKAGE, file://DIR]` on the command line.

`--list` shows each option with the source it comes from. Nothing here imports a model: a conf
package is found with importlib's finder (which imports its parent packages, not the model code).
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path

GROUPS = ("rvt_bench.models", "rvt_bench.datasets")  # entry-point groups: name = label, value = conf package


@dataclass(frozen=True)
class ConfSource:
    """One folder of config groups from outside the package: `origin` says where it comes from
    (for --list), `path` is the folder (None when it cannot be found: `problem` says why),
    `searchpath` is what Hydra's search path gets (None: Hydra already has it, e.g. --config-dir)."""

    origin: str
    path: Path | None
    searchpath: str | None = None
    problem: str = ""


def _package_dir(package: str) -> tuple[Path | None, str]:
    """(folder of the Python package `package`, "") or (None, why it cannot be found)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError) as exc:
        return None, f"{package!r} cannot be imported ({type(exc).__name__}: {exc})"
    if spec is None or not spec.submodule_search_locations:
        return None, f"{package!r} is not an importable package (a folder with __init__.py)"
    return Path(list(spec.submodule_search_locations)[0]), ""


def entry_point_sources() -> list[ConfSource]:
    """The conf packages installed packages register (GROUPS), each once, in the order of their
    distributions' names."""
    seen: dict[str, ConfSource] = {}
    for group in GROUPS:
        for ep in sorted(importlib.metadata.entry_points(group=group), key=lambda e: (e.dist.name if e.dist else "", e.name)):
            value = ep.value.strip()
            if value in seen:
                continue
            dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist else "an unnamed distribution"
            path, problem = _package_dir(value)
            seen[value] = ConfSource(f"package {dist} (entry point {group}: {ep.name} = {value})", path,
                                     f"pkg://{value}" if path else None, problem)
    return list(seen.values())


def searchpath_override(overrides: list[str]) -> list[str]:
    """`overrides` with the installed packages' conf folders appended to hydra.searchpath (merged
    into the command line's own `hydra.searchpath=[...]` when it has one)."""
    extra = [s.searchpath for s in entry_point_sources() if s.searchpath]
    if not extra:
        return overrides
    out, merged = [], False
    for arg in overrides:
        if arg.startswith("hydra.searchpath="):
            arg = f"hydra.searchpath={_as_list(_parse_list(arg) + extra)}"
            merged = True
        out.append(arg)
    return out if merged else out + [f"hydra.searchpath={_as_list(extra)}"]


def _parse_list(arg: str) -> list[str]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    value = OverridesParser.create().parse_override(arg).value()
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def _as_list(items: list[str]) -> str:
    return "[" + ",".join("'" + i.replace("\\", "\\\\").replace("'", "\\'") + "'" for i in items) + "]"


def command_line_sources(argv: list[str]) -> list[ConfSource]:
    """The config folders a command line adds: `--config-dir DIR` / `-cd DIR` / `--config-dir=DIR`
    and each entry of `hydra.searchpath=[...]` (a folder, file://DIR or pkg://PACKAGE)."""
    out: list[ConfSource] = []
    for k, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and k + 1 < len(argv):
            out.append(_folder(argv[k + 1], f"--config-dir {argv[k + 1]}"))
        elif arg.startswith("--config-dir="):
            out.append(_folder(arg.split("=", 1)[1], f"--config-dir {arg.split('=', 1)[1]}"))
        elif arg.lstrip("+").startswith("hydra.searchpath="):
            for entry in _parse_list(arg.lstrip("+")):
                if entry.startswith("pkg://"):
                    path, problem = _package_dir(entry[len("pkg://"):].replace("/", "."))
                    out.append(ConfSource(f"hydra.searchpath {entry}", path, None, problem))
                else:
                    out.append(_folder(entry.removeprefix("file://"), f"hydra.searchpath {entry}"))
    return out


def _folder(text: str, origin: str) -> ConfSource:
    path = Path(text).expanduser()
    return ConfSource(origin, path, None, "" if path.is_dir() else f"{text} is not a folder")
