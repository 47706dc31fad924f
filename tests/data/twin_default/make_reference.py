"""Write the default twin of the demo's first sample (oracle perception, and perception=tiny
with every tool the DT-R1 prompt lists) as the policy, the sandbox and the twin file see it:
to_llm_json (full, compact), to_code_payload() and to_dict(), one JSON file per sample and view.

The files in this folder were written by this script at commit 2351c02 (lead, before instance
embeddings and metric depth were added), so tests/test_twin_default_unchanged.py pins that the
default twin is byte-identical to what it was. Run from the repository root:
    .venv/bin/python tests/data/twin_default/make_reference.py [OUT_DIR]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import open_dict

import run_bench  # noqa: F401  (registers the ${repo:} resolver)
from rvt_bench.adapters.twin.builder import build_twin
from rvt_bench.adapters.twin.dag import parse_dag, validate_dag
from rvt_bench.core.paths import CONF_DIR
from rvt_bench.harness.samples import load_samples

HERE = Path(__file__).resolve().parent
PLAN = ('{"SAM2": [], "DepthAnything2": [], "OWLv2": [], "Qwen2.5-VL": [], "DepthStats": ["SAM2", "DepthAnything2"], '
        '"SemanticAnalysis": ["SAM2"], "Trajectory": ["SAM2"]}')
ORACLE_PLAN = '{"SAM2": [], "DepthAnything2": [], "DepthStats": ["SAM2", "DepthAnything2"], "Trajectory": ["SAM2"]}'


def views(twin) -> dict[str, str]:
    return {"llm_full": twin.to_llm_json(), "llm_compact": twin.to_llm_json(style="compact"),
            "code_payload": json.dumps(twin.to_code_payload(), sort_keys=True),
            "to_dict": json.dumps(twin.to_dict(), sort_keys=True)}


def reference(cache_root: Path) -> dict[str, str]:
    """{file name: text} for the demo's first sample under oracle and tiny perception."""
    out: dict[str, str] = {}
    for perception, plan in (("oracle", ORACLE_PLAN), ("tiny", PLAN)):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=["+dataset=demo", "dataset.split=demo", "+model=dtr1",
                                               f"perception={perception}", f"run.root={cache_root}", "run.limit=1"])
        node = cfg.perception
        if perception == "tiny":
            with open_dict(node):
                node.cache.enabled = False
        built = instantiate(node, _convert_="all")
        for sample in load_samples(cfg).samples:
            twin = build_twin(sample, validate_dag(parse_dag(plan)), built)
            for view, text in views(twin).items():
                out[f"{perception}__{sample.id.replace('/', '_')}__{view}.json"] = text
    return out


if __name__ == "__main__":
    import tempfile

    target = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in reference(Path(tmp)).items():
            (target / name).write_text(text, encoding="utf-8")
            print(name, len(text))
