"""SAM 3 behind the twin's segmenter interface (rvt_bench.adapters.sam3.segmenter) on the tiny
random checkpoint of tests/sam3_tiny.py: tracks over every frame, labelled by their concept."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rvt_bench.adapters.sam3.segmenter import Sam3Segmenter
from rvt_bench.core.frames import read_frame
from tests import sam3_tiny

REPO = Path(__file__).resolve().parents[1]
CLIP = sorted((REPO / "demo" / "revos" / "JPEGImages" / "launch_pad").glob("*.jpg"))


@pytest.fixture(scope="module")
def frames():
    return [read_frame(p) for p in CLIP]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, frames):
    return sam3_tiny.build(tmp_path_factory.mktemp("tiny_sam3_seg"), [frames[0]])


def test_tracks_cover_every_frame_and_carry_their_concept(checkpoint, frames):
    seg = Sam3Segmenter(model_id=str(checkpoint), device="cpu", concepts=["rocket", "tower"], max_instances=3)
    tracks = seg.segment(frames, key_frame=len(frames) // 2)
    assert tracks and len(tracks) <= 3
    for track in tracks:
        assert track.masks.shape == (len(frames), *frames[0].shape[:2]) and track.masks.dtype == bool
        assert track.masks.any() and track.label in ("rocket", "tower") and 0.0 < track.score <= 1.0
    assert [t.score for t in tracks] == sorted((t.score for t in tracks), reverse=True)


def test_detector_labels_are_the_concepts_and_no_prompt_is_no_track(checkpoint, frames):
    seg = Sam3Segmenter(model_id=str(checkpoint), device="cpu")
    assert seg.segment(frames, 0, boxes=[], labels=[], scores=[]) == []
    tracks = seg.segment(frames, 0, boxes=[[0, 0, 10, 10]], labels=["launch pad"], scores=[0.9])
    assert all(t.label == "launch pad" for t in tracks)


def test_fingerprint_names_the_model_and_its_concepts():
    a = Sam3Segmenter(model_id="facebook/sam3").fingerprint()
    b = Sam3Segmenter(model_id="facebook/sam3", concepts=["dog"]).fingerprint()
    assert a["backend"] == "sam3_hf" and a["params"]["concepts"] == ["person", "animal", "vehicle", "object"]
    assert a != b
