"""GroundMoRe (bench/loaders/groundmore.py, conf/dataset/groundmore.yaml) on a fixture in the
layout the authors' evaluation reads (tests/data/groundmore_parity/make_fixture.py), held to what
that evaluation printed on it: dengandong/GroundMoRe@a79cc28 `evaluate_groundmore.py` main(), run
by tests/data/groundmore_parity/run_reference.py with the model's inference replaced by the
fixture's prediction PNGs (expected.json)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from rvt_bench.adapters.precomputed import PrecomputedAdapter
from rvt_bench.core import benchmark
from rvt_bench.core.masks import decode
from rvt_bench.core.paths import CONF_DIR
from rvt_bench.core.types import DatasetFormatError
from rvt_bench.loaders.groundmore import GroundMoReDataset, action_window, sampled_indices

HERE = Path(__file__).resolve().parent / "data" / "groundmore_parity"
def load_fixture_module():
    """make_fixture.py of this benchmark's parity folder, under its own module name (another
    benchmark's folder has a make_fixture.py too)."""
    spec = importlib.util.spec_from_file_location("groundmore_fixture", HERE / "make_fixture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXPECTED = json.loads((HERE / "expected.json").read_text())


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    write_fixture = load_fixture_module().write_fixture
    root, pred = write_fixture(tmp_path_factory.mktemp("groundmore"))
    dataset = GroundMoReDataset(root)
    adapter = PrecomputedAdapter(pred)
    adapter.use_prediction_layouts(benchmark.prediction_layouts("groundmore"))
    protocol = instantiate(OmegaConf.load(CONF_DIR / "dataset" / "groundmore.yaml").protocol)
    records = [protocol.score(s, adapter.predict(s)) for s in dataset]
    return dataset, records, protocol.aggregate(records)


def test_the_reference_rules_for_frames_and_windows():
    assert sampled_indices(12, 20)[:4] == [0, 0, 1, 1]  # a short video repeats frames
    assert action_window("family_clip_0010_0015", "00:11", "00:13") == (6, 17)
    assert action_window("animal_x_0002_0006", "0:03", "0:05") == (6, 17)


def test_the_loader_samples_20_frames_and_zeroes_the_gt_outside_the_action_window(scored):
    dataset, _, _ = scored
    assert [e["sample_id"] for e in dataset.errors] == ["gone_0000_0002/0"]  # no frames folder: skipped
    sample = next(s for s in dataset if s.id == "family_clip_0010_0015/0")
    assert sample.num_frames == 20 and sample.frame_ids[0] == "frame_000000"
    start, end = sample.meta["action_start"], sample.meta["action_end"]
    for k, rle in zip(sample.meta["indices"], sample.target.masks):
        if not start <= k <= end or k == 12:  # outside the window, or its mask PNG is missing
            assert not decode(rle).any()
    assert any(decode(rle).any() for rle in sample.target.masks)


def test_every_question_and_each_type_equal_what_the_reference_printed(scored):
    _, records, body = scored
    by_id = {r.sample_id: r.values["video_jf"] for r in records}
    assert sorted(by_id) == sorted(EXPECTED["per_question"])
    for sid, want in EXPECTED["per_question"].items():
        assert by_id[sid].J == pytest.approx(want["J"], abs=1e-12) and by_id[sid].F == pytest.approx(want["F"], abs=1e-12)
    rows = EXPECTED["per_question"].values()
    assert body["metrics"]["J"] == pytest.approx(np.mean([r["J"] for r in rows]), abs=1e-12)
    for key, value in EXPECTED["printed_4dp"].items():  # the reference prints 4 decimals
        q_type, _, metric = key.rpartition("/")
        ours = body["breakdown"]["q_type"][q_type][metric] if q_type else body["metrics"][metric]
        assert round(ours, 4) == value, key


def test_a_missing_root_and_another_split_are_one_line(tmp_path):
    with pytest.raises(DatasetFormatError, match="expected the dataset directory"):
        GroundMoReDataset(tmp_path / "nowhere")
    with pytest.raises(DatasetFormatError, match="'test'"):
        GroundMoReDataset(tmp_path, split="val")


def test_a_mask_png_over_the_pixel_limit_fails_its_questions_before_any_decode(tmp_path):
    """A 20 KB mask PNG declaring 9000 x 8000 pixels (over dataset.limits.max_image_pixels) was
    decoded whole, then stopped the run; now the questions whose window reads it fail, named."""
    from tests.test_guarded_reads import blank_png

    root, _ = load_fixture_module().write_fixture(tmp_path)
    (root / "groundmore_videos" / "family_clip_0010_0015" / "masks" / "frame_000006.png").write_bytes(blank_png(9000, 8000))
    dataset = GroundMoReDataset(root)
    over = {e["sample_id"]: e["message"] for e in dataset.errors if "max_image_pixels" in e["message"]}
    assert sorted(over) == ["family_clip_0010_0015/0", "family_clip_0010_0015/1"]  # windows 6..17 and 0..11
    assert all("frame_000006.png is 9000 x 8000 = 72,000,000 pixels" in m and "not decoded" in m for m in over.values())
    assert len(dataset) == 6  # 9 questions: these two and the one without frames left out


@pytest.mark.parametrize("video", ["../../outside_0000_0002", "/tmp/outside_0000_0002"])
def test_a_video_name_out_of_the_videos_folder_fails_its_questions(tmp_path, video):
    root, _ = load_fixture_module().write_fixture(tmp_path)
    path = root / "groundmore_test.json"
    data = json.loads(path.read_text())
    data["videos"][video] = data["videos"]["ball-game_0100_0103"]
    path.write_text(json.dumps(data))
    dataset = GroundMoReDataset(root)
    failed = {e["sample_id"]: e["message"] for e in dataset.errors if e["sample_id"].startswith(video)}
    assert sorted(failed) == [f"{video}/0", f"{video}/1"]
    assert all(f"video name {video!r}" in m and ("leaves" in m or "relative path" in m) for m in failed.values())


def contract_samples(rng, node):
    """Synthetic GroundMoRe-format samples for tests/test_protocol_contract.py: segmentation clips
    with the question type its protocol breaks down by (meta_keys: q_type)."""
    from dataclasses import replace

    from tests.contract_samples import revos_samples

    return [replace(s, task="segmentation", meta={"q_type": ("causal", "sequential", "counterfactual", "descriptive")[i % 4]})
            for i, s in enumerate(revos_samples(rng))]


def test_a_sample_card_shows_the_action_window_and_labels_frames_once(scored, tmp_path):
    """GroundMoRe's cards showed no action window (the GT is empty outside it, so a blank frame looked
    like a miss) and labelled frames "frame frame_000000". The card now says the window, each panel
    outside it says so, and a frame id that already says frame is not prefixed again."""
    from rvt_bench.harness.visualize import frame_label, render_sample

    dataset, _, _ = scored
    sample = next(s for s in dataset if s.id == "family_clip_0010_0015/0")
    start, end, indices = sample.meta["action_start"], sample.meta["action_end"], sample.meta["indices"]
    inside = sum(start <= k <= end for k in indices)
    assert 0 < inside < len(indices)
    assert sample.meta["card"] == (f"action window: frames {start}-{end} of the video's 30 (ground truth empty outside it; "
                                   f"{inside} of the 20 sampled frames inside)")
    labels = [frame_label(sample, t) for t in range(sample.num_frames)]
    assert labels[0] == "frame_000000, outside action" and not any(label.startswith("frame frame") for label in labels)
    assert [label.endswith(", outside action") for label in labels] == [not start <= k <= end for k in indices]
    assert render_sample(sample, None, None, 4).ndim == 3  # the header with the card line draws
    # another benchmark's numeric frame ids keep their "frame " prefix
    from dataclasses import replace
    assert frame_label(replace(sample, frame_ids=["00005"] * 20, meta={}), 0) == "frame 00005"
