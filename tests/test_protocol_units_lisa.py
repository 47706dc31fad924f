"""ReasonSeg and LLM-Seg40K scoring are UnitProtocols over metrics/units/lisa_iou.py: the same
composition written as YAML alone gives the presets' records and metrics.json bodies, in both modes;
and the UnitProtocol options that make it so (baseline_keys, empty_breakdowns, a unit's own
gt_empty) each do one thing."""
from __future__ import annotations

import numpy as np
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import Prediction
from rvt_bench.metrics.protocols.llmseg40k import LLMSegProtocol
from rvt_bench.metrics.protocols.reasonseg import ReasonSegProtocol
from rvt_bench.metrics.protocols.units import UnitProtocol
from rvt_bench.metrics.units.lisa_iou import LisaIoU, MaskIoUValues
from tests.contract_samples import image_samples
from tests.test_protocol_contract import prediction

YAML = """
_target_: rvt_bench.metrics.protocols.units.UnitProtocol
name: {name}
headline: [gIoU, cIoU]
meta_keys: {meta_keys}
what: samples
baseline_keys: [gIoU]
empty_breakdowns: true
units: [{{_target_: rvt_bench.metrics.units.lisa_iou.{unit}, mode: {mode}, protocol: {name}}}]
"""
PRESETS = {"reasonseg": (ReasonSegProtocol, "LisaIoU", "[is_sentence, level, category]", "is_sentence", (False, True)),
           "llmseg40k": (LLMSegProtocol, "LLMSegIoU", "[from_dataset, level, category]", "from_dataset", ("coco", "ego_objects"))}


@pytest.mark.parametrize("mode", ["reference", "textbook"])
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_yaml_composition_of_the_unit_scores_as_the_preset(name, mode):
    preset_cls, unit, meta_keys, meta_key, values = PRESETS[name]
    composed = instantiate(OmegaConf.create(YAML.format(name=name, unit=unit, meta_keys=meta_keys, mode=mode)))
    preset = preset_cls(mode=mode)
    rng = np.random.default_rng(7)
    samples = image_samples(rng, n=20, meta_key=meta_key, values=values)
    pairs = [(s, prediction(rng, s)) for s in samples]
    records = [preset.score_or_fail(s, p)[0] for s, p in pairs]
    assert [composed.score_or_fail(s, p)[0] for s, p in pairs] == records
    assert composed.aggregate(records) == preset.aggregate(records)
    assert composed.aggregate([]) == preset.aggregate([])
    assert (composed.name, composed.headline) == (preset.name, preset.headline) == (name, ["gIoU", "cIoU"])


def _records_predicting_nothing(protocol, n=4):
    samples = image_samples(np.random.default_rng(3), n=n)
    return [protocol.score(s, Prediction(s.id, masks=[None])) for s in samples]


def test_baseline_keys_choose_which_metrics_are_checked_against_the_empty_prediction():
    every = UnitProtocol([LisaIoU()], headline=["gIoU", "cIoU"], meta_keys=())
    first = UnitProtocol([LisaIoU()], headline=["gIoU", "cIoU"], meta_keys=(), baseline_keys=["gIoU"])
    records = _records_predicting_nothing(every)
    assert [w.split(" = ")[0] for w in every.aggregate(records)["warnings"] if "baseline" in w] == ["gIoU", "cIoU"]
    assert [w.split(" = ")[0] for w in first.aggregate(records)["warnings"] if "baseline" in w] == ["gIoU"]


def test_empty_breakdowns_keep_a_meta_key_no_sample_has():
    records = _records_predicting_nothing(UnitProtocol([LisaIoU()]))  # meta: is_sentence and level only
    assert "category" not in UnitProtocol([LisaIoU()], meta_keys=("level", "category")).aggregate(records)["breakdown"]
    kept = UnitProtocol([LisaIoU()], meta_keys=("level", "category"), empty_breakdowns=True)
    assert kept.aggregate(records)["breakdown"]["category"] == {}
    assert kept.aggregate([])["breakdown"] == {"level": {}, "category": {}}


def test_a_unit_says_which_gt_is_empty():
    proto = UnitProtocol([LisaIoU()], meta_keys=(), what="images")
    empty, full = (ScoreRecord(sid, values={"mask_iou": MaskIoUValues(0, u, u, float(u == 0), float(u == 0))})
                   for sid, u in (("a", 0), ("b", 16)))
    assert LisaIoU().gt_empty(empty) and not LisaIoU().gt_empty(full)
    warning = proto.aggregate([empty, full])["warnings"][0]
    assert warning.startswith("1 of 2 scored images have an empty GT") and warning.endswith(": a")
