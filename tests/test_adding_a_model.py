"""docs/adding-a-model.md cannot rot: the code it shows is examples/adding_a_model/ byte for byte,
and the command it shows runs that model on the demo and prints the report lines it shows."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "adding-a-model.md"


def blocks(marker: str) -> list[tuple[str, str]]:
    """(marker argument, fenced block's text) for each `<!-- marker[: arg] -->` followed by a fence."""
    pattern = rf"<!-- {marker}(?:: (\S+))? -->\n```[a-z]*\n(.*?)```"
    return re.findall(pattern, PAGE.read_text(), re.S)


def test_the_page_shows_the_example_files_as_they_are():
    shown = dict(blocks("file"))
    assert set(shown) == {"examples/adding_a_model/centre_box.py", "examples/adding_a_model/conf/model/centre_box.yaml"}
    for path, text in shown.items():
        assert text == (REPO / path).read_text(), path


def test_the_pages_command_runs_the_example_and_prints_the_report_it_shows(tmp_path):
    [(_, command)] = blocks("command")
    [(_, output)] = blocks("output")
    argv = command.split()
    assert argv[:2] == ["python", "run_bench.py"]
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), *argv[2:], f"run.root={tmp_path / 'runs'}",
                           f"leaderboard.dir={tmp_path / 'boards'}"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    printed = proc.stdout.splitlines()
    for line in output.splitlines():
        assert line in printed, (line, proc.stdout[:2000])
    board = (tmp_path / "boards" / "demo.csv").read_text().splitlines()[0]
    assert "adapter/total_s" in board
