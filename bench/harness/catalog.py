"""What can be evaluated, with what: the evaluation config groups of conf/ and one line each (the
first line of each yaml's header comment). Reads the yaml files as text: nothing heavy is imported.

    python run_bench.py --list        (or python -m rvt_bench.harness.catalog)
"""
from __future__ import annotations

from pathlib import Path

from rvt_bench.core.paths import CONF_DIR

CONF = CONF_DIR
# (group, how a command line selects it); training-only groups (train/, accelerate/, sweep/) are not listed
GROUPS = (("dataset", "+dataset=", "benchmarks"), ("suite", "+suite=", "suites (several benchmarks, one table)"),
          ("model", "+model=", "models"), ("policy", "policy=", "policies"),
          ("perception", "perception=", "perception backends"), ("judge", "judge=", "judges"))
WIDTH = 110


def header_line(path: Path) -> str:
    """The first line of the yaml's leading comment block ("" when it has none)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            return ""
        text = line.lstrip("#").strip()
        if text:
            return text
    return ""


def catalog(conf: Path = CONF) -> str:
    """One section per group, one line per option: `<selector><name>  <header line>`."""
    lines = []
    for group, selector, title in GROUPS:
        lines.append(f"{title}:")
        for path in sorted((conf / group).glob("*.yaml")):
            choice = f"{selector}{path.stem}"
            text = header_line(path)
            if len(text) > WIDTH:
                text = text[: WIDTH - 3] + "..."
            lines.append(f"  {choice:<26} {text}")
    return "\n".join(lines)


def main() -> None:
    print(catalog())


if __name__ == "__main__":
    main()
