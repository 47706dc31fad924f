"""LLM-Seg40K protocol against numbers printed by LLM-Seg's own validate() (validate_llmseg.py):
tests/data/parity/llmseg_validate.json (its "source" names the commit and the CPU patches)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rvt_bench.core.types import Prediction, Sample, Target
from rvt_bench.metrics.protocols.llmseg40k import LLMSegProtocol, llmseg_sample_iou
from rvt_bench.metrics.protocols.reasonseg import ReasonSegProtocol
from rvt_bench.metrics.units.lisa_iou import MaskIoUValues

PARITY = Path(__file__).parent / "data" / "parity"
REF = json.loads((PARITY / "llmseg_validate.json").read_text())
CASES = [json.loads(line) for line in open(PARITY / "lisa_giou_ciou.jsonl")] + REF["extra"]


def _records(protocol):
    out = []
    for c in CASES:
        sample = Sample(id=c["id"], dataset="llmseg40k", split="validation", modality="image", frames=["x.jpg"],
                        frame_ids=["x"], query="q", task="segmentation", target=Target(masks=[c["gt"]], ignore=[c["ignore"]]))
        out.append(protocol.score(sample, Prediction(sample_id=c["id"], masks=[c["pred"]])))
    return out


def test_per_sample_terms_equal_llmsegs_float32_values():
    for rec in _records(LLMSegProtocol()):
        assert rec.of(MaskIoUValues).giou_term == REF["acc_iou_float32"][rec.sample_id], rec.sample_id


def test_small_union_uses_llmsegs_epsilon_not_lisas():
    """I = 10, U = 12: LLM-Seg's float32 10 / (12 + 1e-8) = 0.8333333; LISA's 10 / (12 + 1e-5) = 0.83333266."""
    assert REF["acc_iou_float32"]["eps0"] == llmseg_sample_iou(10, 12) == float(np.float32(10) / np.float32(12))
    lisa = [r for r in _records(ReasonSegProtocol()) if r.sample_id == "eps0"][0].of(MaskIoUValues).giou_term
    assert lisa == pytest.approx(0.83333266, abs=1e-8)


def test_giou_and_ciou_equal_llmsegs_printed_values():
    metrics = LLMSegProtocol().aggregate(_records(LLMSegProtocol()))["metrics"]
    assert metrics["gIoU"] == REF["giou"]
    assert metrics["cIoU"] == REF["ciou"]


def test_ciou_sums_exact_integers_unlike_lisa():
    """LLM-Seg's meters hold int32 counts (one rounding to float32); LISA's add float32 per sample."""
    records = _records(LLMSegProtocol())
    assert LLMSegProtocol().aggregate(records)["metrics"]["cIoU"] != ReasonSegProtocol().aggregate(records)["metrics"]["cIoU"]
