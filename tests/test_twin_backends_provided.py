"""adapters/twin/provided.py: twins shipped with a dataset, copied tool by tool, validated."""
from __future__ import annotations

import json
from pathlib import Path

import hydra
import pytest
from omegaconf import OmegaConf

from rvt_bench.adapters.twin.builder import build_twin
from rvt_bench.adapters.twin.oracle import OraclePerception
from rvt_bench.adapters.twin.provided import ProvidedPerception
from rvt_bench.core.types import AdapterError
from tests.test_twin_oracle import ALL_TOOLS, synthetic_sample

CONF = Path(__file__).resolve().parents[1] / "conf"


@pytest.fixture
def shipped(tmp_path):
    """The oracle's full twin of the synthetic sample, written where ProvidedPerception looks."""
    sample = synthetic_sample()
    twin = build_twin(sample, ALL_TOOLS, OraclePerception())
    path = tmp_path / "synthetic" / "synthetic_0.json"
    path.parent.mkdir()
    path.write_text(json.dumps(twin.to_dict()))
    return sample, twin, ProvidedPerception(str(tmp_path), "{dataset}/{video}.json")


def test_full_plan_reproduces_the_shipped_twin(shipped):
    sample, twin, provided = shipped
    sample.meta["video"] = "synthetic_0"
    assert build_twin(sample, ALL_TOOLS, provided).to_dict() == twin.to_dict()


def test_only_planned_fields_are_copied(shipped):
    sample, twin, provided = shipped
    sample.meta["video"] = "synthetic_0"
    partial = build_twin(sample, ["SAM2", "OWLv2"], provided)
    assert [i.label for i in partial.instances] == [i.label for i in twin.instances]
    assert all(i.depth is None and i.caption is None and i.trajectory is None for i in partial.instances)
    assert partial.video.summary is None and partial.masks == twin.masks


def test_missing_file_names_the_path(shipped):
    sample, _, provided = shipped
    with pytest.raises(AdapterError, match=r"synthetic/synthetic/0\.json does not exist"):
        build_twin(sample, ["SAM2"], provided)


def test_frame_ids_must_match_the_sample(shipped):
    sample, _, provided = shipped
    sample.meta["video"] = "synthetic_0"
    sample.frame_ids[1] = "00006"
    with pytest.raises(AdapterError, match="frame ids"):
        build_twin(sample, ["SAM2"], provided)


def test_another_version_is_refused_with_the_file_named(shipped, tmp_path):
    sample, twin, provided = shipped
    sample.meta["video"] = "synthetic_0"
    path = tmp_path / "synthetic" / "synthetic_0.json"
    path.write_text(json.dumps(dict(twin.to_dict(), version=99)))
    with pytest.raises(AdapterError, match="synthetic_0.json.*version 99"):
        build_twin(sample, ["SAM2"], provided)


def test_dangling_mask_reference_is_refused(shipped, tmp_path):
    sample, twin, provided = shipped
    sample.meta["video"] = "synthetic_0"
    record = twin.to_dict()
    record["masks"].pop(next(iter(record["masks"])))
    (tmp_path / "synthetic" / "synthetic_0.json").write_text(json.dumps(record))
    with pytest.raises(AdapterError, match="missing or out of range"):
        build_twin(sample, ["SAM2"], provided)


def test_hydra_config_builds_with_and_without_a_root():
    cfg = OmegaConf.load(CONF / "perception" / "provided.yaml")
    assert hydra.utils.instantiate(cfg).root is None  # per-sample meta["twin_path"] then
    p = hydra.utils.instantiate(OmegaConf.merge(cfg, {"root": "/data/twins"}))
    assert isinstance(p, ProvidedPerception) and p.fingerprint()["path_template"] == "{video}.json"


def test_a_sample_twin_path_wins_over_root(tmp_path):
    from rvt_bench.core.types import Sample, Target

    sample = Sample(id="q1", dataset="rvtbench", split="test", modality="video", frames=["a.jpg"], frame_ids=["0"],
                    query="q", task="vqa", target=Target(answers=["x"]), meta={"twin_path": str(tmp_path / "t.json")})
    assert ProvidedPerception().path(sample) == tmp_path / "t.json"
    assert ProvidedPerception(root=str(tmp_path / "other")).path(sample) == tmp_path / "t.json"
    sample.meta.pop("twin_path")
    with pytest.raises(AdapterError, match="perception.root"):
        ProvidedPerception().path(sample)
