"""SAM2 backends (transformers and the sam2 package) with tiny random-weight models, and their
shared automatic-mode selection."""
from __future__ import annotations

import numpy as np
import pytest

from rvt_bench.adapters.twin.backends.sam2_common import mask_iou, point_grid, select_masks
from rvt_bench.adapters.twin.backends.sam2_hf import Sam2HFBackend
from rvt_bench.adapters.twin.backends.sam2_pkg import Sam2PkgBackend, import_sam2, stage_frames
from rvt_bench.core.types import AdapterError

T, H, W = 3, 40, 72


@pytest.fixture(scope="module")
def video():
    rng = np.random.default_rng(0)
    return [rng.integers(0, 255, (H, W, 3), dtype=np.uint8) for _ in range(T)]


@pytest.fixture(scope="module")
def hf():
    return Sam2HFBackend.tiny(seed=0, device="cpu", points_per_side=3, max_instances=4)


@pytest.fixture(scope="module")
def pkg():
    return Sam2PkgBackend.tiny(seed=0, device="cpu", points_per_side=3, max_instances=4)


# --- automatic-mode selection ---------------------------------------------------------------------

def test_point_grid_is_pixel_centres_of_a_regular_grid():
    assert point_grid(40, 80, 2) == [[20.0, 10.0], [60.0, 10.0], [20.0, 30.0], [60.0, 30.0]]


def test_select_masks_thresholds_then_suppresses_duplicates_best_first():
    m = np.zeros((4, 4, 4), bool)
    m[0, :2, :2] = True          # 4 px
    m[1, :2, :3] = True          # 6 px, IoU with m0 = 4/6
    m[2, 3, 3] = True            # 1 px: under min_area
    m[3, 2:, :] = True           # 8 px, low score
    scores = np.array([0.8, 0.9, 0.95, 0.5])
    assert select_masks(m, scores, pred_iou_thresh=0.6, min_area=2, nms_iou=0.5, max_instances=10) == [1]
    assert select_masks(m, scores, pred_iou_thresh=0.6, min_area=2, nms_iou=0.7, max_instances=10) == [1, 0]
    assert select_masks(m, scores, pred_iou_thresh=0.0, min_area=1, nms_iou=0.7, max_instances=2) == [2, 1]
    assert mask_iou(m[0], m[1]) == pytest.approx(4 / 6)


# --- transformers backend -------------------------------------------------------------------------

def test_hf_automatic_mode_tracks_key_frame_objects_through_the_video(hf, video):
    tracks = hf.segment(video, key_frame=1)
    assert 1 <= len(tracks) <= 4
    for tr in tracks:
        assert tr.masks.shape == (T, H, W) and tr.masks.dtype == bool and tr.label is None
    assert [t.score for t in tracks] == sorted((t.score for t in tracks), reverse=True)


def test_hf_box_prompts_give_one_track_per_box_with_its_label_and_score(hf, video):
    tracks = hf.segment(video, key_frame=0, boxes=[[5, 5, 30, 30], [40, 10, 70, 38]], labels=["dog", "cat"],
                        scores=[0.9, 0.4])
    assert [(t.label, t.score) for t in tracks] == [("dog", 0.9), ("cat", 0.4)]
    assert all(t.masks.shape == (T, H, W) for t in tracks)


def test_hf_no_boxes_means_no_tracks(hf, video):
    assert hf.segment(video, key_frame=0, boxes=[]) == []


def test_hf_propagates_forward_then_backward_from_a_middle_key_frame(hf, video, monkeypatch):
    model = hf.components()[0]["video"]
    calls = []
    original = model.propagate_in_video_iterator

    def spy(session, start_frame_idx=None, reverse=False, **kw):
        for out in original(session, start_frame_idx=start_frame_idx, reverse=reverse, **kw):
            calls.append((out.frame_idx, reverse))
            yield out

    monkeypatch.setattr(model, "propagate_in_video_iterator", spy)
    hf.segment(video, key_frame=1, boxes=[[5, 5, 30, 30]])
    assert calls == [(1, False), (2, False), (1, True), (0, True)]


def test_hf_masks_come_back_at_frame_resolution_from_the_processor(hf, video):
    (frame_masks, scores) = hf.automatic(video[0])
    assert all(m.shape == (H, W) and m.dtype == bool for m in frame_masks)
    assert len(frame_masks) == len(scores) <= 4


# --- sam2 package backend -------------------------------------------------------------------------

def test_stage_frames_writes_numeric_names_in_temporal_order_and_maps_back(tmp_path, video):
    names = stage_frames(video, ["frame_a", "frame_b", "frame_c"], tmp_path)
    assert names == {"00000.jpg": "frame_a", "00001.jpg": "frame_b", "00002.jpg": "frame_c"}
    from PIL import Image

    for t, name in enumerate(names):
        assert np.array_equal(np.asarray(Image.open(tmp_path / name).convert("RGB")), video[t])  # lossless


def test_the_sam2_loader_reads_staged_frames_in_order(tmp_path):
    import_sam2()
    from sam2.utils.misc import load_video_frames_from_jpg_images

    frames = [np.full((H, W, 3), 20 * t, np.uint8) for t in range(12)]  # 12 frames: "10" < "2" as text
    stage_frames(frames, [f"f{t}" for t in range(12)], tmp_path)
    images, height, width = load_video_frames_from_jpg_images(str(tmp_path), image_size=32, offload_video_to_cpu=True,
                                                              img_mean=(0, 0, 0), img_std=(1, 1, 1))
    assert (height, width) == (H, W)
    assert [round(float(images[t].mean()) * 255) for t in range(12)] == [20 * t for t in range(12)]


def test_the_sam2_loader_rejects_dataset_style_names(tmp_path):
    import_sam2()
    from PIL import Image
    from sam2.utils.misc import load_video_frames_from_jpg_images

    for name in ("frame_00009.jpg", "frame_00010.jpg"):
        Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / name)
    with pytest.raises(ValueError):
        load_video_frames_from_jpg_images(str(tmp_path), image_size=32, offload_video_to_cpu=True)


def test_stage_frames_needs_one_id_per_frame(tmp_path, video):
    with pytest.raises(AdapterError, match="3 frames but 2 frame ids"):
        stage_frames(video, ["a", "b"], tmp_path)


def test_importing_sam2_leaves_hydra_uninitialised():
    from hydra.core.global_hydra import GlobalHydra

    import_sam2()
    assert not GlobalHydra.instance().is_initialized()


def test_pkg_automatic_and_box_modes_give_frame_sized_tracks(pkg, video):
    auto = pkg.segment(video, key_frame=1)
    assert 1 <= len(auto) <= 4 and all(t.masks.shape == (T, H, W) and t.masks.dtype == bool for t in auto)
    boxed = pkg.segment(video, key_frame=2, boxes=[[5, 5, 30, 30]], labels=["dog"], scores=[0.7])
    assert [(t.label, t.score, t.masks.shape) for t in boxed] == [("dog", 0.7, (T, H, W))]


def test_pkg_unknown_hub_id_without_config_is_an_adapter_error():
    with pytest.raises(AdapterError, match="not a known SAM2 hub id"):
        Sam2PkgBackend(model_id="someone/else", device="cpu").components()
