"""Cheap real runs of the bundled demo for results tests: +model=precomputed over predictions built
from the demo's own ground truth (some samples spoiled), through the real runner, protocol and
leaderboard. No model is loaded."""
from __future__ import annotations

import json
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict

from rvt_bench.loaders.demo import DemoDataset
from rvt_bench.harness.runner import run
from rvt_bench.core.types import Prediction

REPO = Path(__file__).resolve().parents[1]
OmegaConf.register_new_resolver("repo", lambda rel="": str(REPO / rel), replace=True)  # as run_bench.py


def write_predictions(path: Path, spoil_every: int = 3, offset: int = 0) -> Path:
    """predictions.jsonl for the demo: the GT as prediction, except every `spoil_every`-th sample
    (counting from `offset`), which gets an empty answer (a parse failure for the first of them)."""
    lines = []
    for k, s in enumerate(DemoDataset(REPO / "demo")):
        if (k + offset) % spoil_every == 0:
            p = (Prediction.failure(s.id, "parse", "no </answer>") if k == 0 else Prediction(s.id, task=s.task))
        else:
            t = s.target
            p = Prediction(s.id, task=s.task, masks=t.masks if s.task == "segmentation" else None,
                           boxes=t.boxes if s.task == "grounding" else None,
                           text=t.answers[0] if t.answers else None, trace={"rollout": f"<answer>{s.id}</answer>"})
        lines.append(json.dumps(p.to_dict()))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def demo_cfg(tmp_path: Path, predictions: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["+dataset=demo", "+model=precomputed", f"model.root={predictions}",
                                           f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}",
                                           "run.verify_frames=false", "dataset.split=demo", *overrides])
    with open_dict(cfg):
        cfg._overrides = list(overrides)
    return cfg


def demo_run(tmp_path: Path, spoil_every: int = 3, offset: int = 0, name: str | None = None, *overrides: str):
    preds = write_predictions(tmp_path / f"preds_{spoil_every}_{offset}.jsonl", spoil_every, offset)
    extra = [f"run.name={name}"] if name else []
    return run(demo_cfg(tmp_path, preds, *extra, *overrides))
