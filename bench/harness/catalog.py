"""What can be evaluated, with what: the config groups of conf/ a user picks, one entry each with
its full description (the first sentence of the yaml's header comment), and the command line's own
`--help`. Reads the yaml files as text: nothing heavy is imported.

    rvt-bench --list        (python run_bench.py --list, python -m rvt_bench.harness.catalog)
    rvt-bench --help
"""
from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path
from typing import Sequence

from rvt_bench.core import files
from rvt_bench.core.benchmark import conf_dirs
from rvt_bench.core.paths import CONF_DIR
from rvt_bench.harness.plugins import ConfSource, entry_point_sources

CONF = CONF_DIR
# (group, how a command line selects it, title); training groups (train/, accelerate/, sweep/ whose
# presets include training ablations) are not listed
GROUPS = (("dataset", "+dataset=", "benchmarks"), ("suite", "+suite=", "suites (several benchmarks, one table)"),
          ("model", "+model=", "models"), ("policy", "policy=", "policies"),
          ("perception", "perception=", "perception backends"), ("judge", "judge=", "judges"),
          ("logger", "logger=", "experiment loggers"), ("hydra/launcher", "hydra/launcher=", "launchers (with -m)"))
CHOICE_WIDTH = 28
_SENTENCE_END = re.compile(r"\.(?=\s+[A-Z(`]|\s*$)")


def description(path: Path) -> str:
    """The first sentence of the yaml's leading comment block, whole ("" when it has none)."""
    lines = []
    for line in files.read_text(path, "config file").splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("#").strip()
        if text.startswith("@package"):
            continue
        if (not text or text.startswith(("python ", "rvt-bench "))) and lines:
            break  # a blank comment line or a usage example ends the description
        if text:
            lines.append(text)
    text = " ".join(lines)
    end = _SENTENCE_END.search(text)
    return text[: end.end()] if end else text


def _options(conf: Path, group: str) -> list[Path]:
    """The yaml files of `group`: conf/'s, then those of RVT_BENCH_CONF_PATH's directories
    (rvt_bench.core.benchmark.conf_dirs) whose names conf/ does not have."""
    paths = sorted((conf / group).glob("*.yaml"))
    for extra in conf_dirs()[1:]:
        seen = {p.stem for p in paths}
        paths += [p for p in sorted((extra / group).glob("*.yaml")) if p.stem not in seen]
    return paths


def catalog(conf: Path = CONF, width: int | None = None, sources: Sequence[ConfSource] = ()) -> str:
    """One section per group, one entry per option: `<selector><name>  <description>`, the
    description wrapped at `width` columns (default: the terminal's, at least 80). Options from
    `sources` (rvt_bench.harness.plugins: installed packages, --config-dir, hydra.searchpath) follow
    rvt-bench's own, each description ending with `[from: ORIGIN]`; a source that cannot be found
    is listed at the end with why."""
    width = width or max(80, shutil.get_terminal_size((110, 24)).columns)
    sections = []
    for group, selector, title in GROUPS:
        entries = [(p, "") for p in _options(conf, group)]
        for source in sources:
            if source.path is not None:
                entries += [(p, f" [from: {source.origin}]") for p in sorted((source.path / group).glob("*.yaml"))]
        if entries:
            sections.append((title, [(f"  {selector}{path.stem}", path, origin) for path, origin in entries]))
    # the descriptions' column: after the longest choice, so every description starts in it; a
    # choice longer than half the width (a plugin's) gets a line of its own above its description
    fits = [len(choice) for _, rows in sections for choice, _, _ in rows if len(choice) <= width // 2]
    column = max([CHOICE_WIDTH, *fits])
    lines = []
    for title, rows in sections:
        lines.append(f"{title}:")
        for choice, path, origin in rows:
            text = (description(path) or "(no description)") + origin
            wrapped = textwrap.wrap(text, width - column - 1, break_on_hyphens=False, break_long_words=False) or [""]
            if len(choice) > column:
                lines.append(choice)
                wrapped = [""] + wrapped
            lines.append(f"{choice if len(choice) <= column else '':<{column}} {wrapped[0]}".rstrip())
            lines += [f"{'':<{column}} {w}" for w in wrapped[1:]]
    for source in sources:
        if source.path is None or source.problem:
            lines.append(f"not found: {source.origin}: {source.problem}")
    return "\n".join(lines)


def help_text(conf: Path = CONF) -> str:
    """`rvt-bench --help`: what to run, the groups a user picks, the flags, the helper commands and
    where the docs are."""
    groups = []
    for group, selector, title in GROUPS:
        names = [p.stem for p in _options(conf, group)]
        if names:
            groups.append(f"  {selector + '{' + ','.join(names) + '}':<60} {title}")
    return "\n".join([
        "rvt-bench: evaluate a model on a reasoning-visual-task benchmark (Hydra command line).",
        "",
        "usage: rvt-bench [+dataset=NAME] [+model=NAME] [key=value ...] [-m] [--cfg job [--resolve]]",
        "       rvt-bench compare|report|render|visualize|attribute ... (--help on each)",
        "",
        "examples:",
        "  rvt-bench                                          DT-R1 (embedded tiny policy) on the bundled demo",
        "  rvt-bench +dataset=revos +model=dtr1 dataset.root=DIR dataset.split=valid",
        "  rvt-bench -m model.max_rounds=2,4                  a sweep: one run directory and leaderboard row per point",
        "  rvt-bench +suite=reasoning_seg +model=precomputed ...  several benchmarks, one run each, one table",
        "  rvt-bench +dataset=revos --cfg job --resolve       print the composed config, run nothing",
        "  rvt-bench logger=wandb                             also log the run to Weights & Biases (or logger=tensorboard)",
        "  rvt-bench compare RUN_A RUN_B                      paired deltas, p-values and a paired plot of two runs",
        "",
        "groups (pick one option each; +dataset and +model default to demo and dtr1):",
        *groups,
        "  rvt-bench --list prints every option with its description.",
        "",
        "common settings: run.root=DIR run.name=NAME run.limit=N run.verbose=true leaderboard.dir=DIR",
        "  (every key with its default: rvt-bench --cfg job)",
        "",
        "flags: -m/--multirun  --cfg job|hydra|all  --resolve  --info  --list  --hydra-help (Hydra's own flags)",
        "",
        "outputs: <run.root>/<dataset>/<model>/<run name>/: metrics.json, report.html, predictions.jsonl, ...",
        "docs: docs/running.md (running and resuming), docs/analysis.md (report, compare, loggers),",
        "      docs/metrics.md, docs/failures.md, docs/scale-out.md in the source repository",
    ])


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m rvt_bench.harness.catalog",
                                 description="Print the config options a run can pick, with descriptions (= rvt-bench --list).")
    ap.parse_args(argv)
    print(catalog(sources=entry_point_sources()))


if __name__ == "__main__":
    main()
