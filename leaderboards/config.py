"""The `leaderboard` config node: where runs publish their rows. Its defaults live here only
(registered as a Hydra structured config by bench/harness/config.py; `rvt-bench render`
takes its --dir default from it)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LeaderboardConfig:
    """dir: folder of one <dataset>.csv per benchmark, one row per run (relative to the working
    directory). publish: false = score the run but write no row."""

    dir: str = "leaderboards"
    publish: bool = True
