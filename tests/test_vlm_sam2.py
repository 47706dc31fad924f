"""VLM boxes -> SAM2 masks (adapters/vlm/segment.py) through the twin's SAM2 backends, tiny
random-weight models: the image predictor with boxes and points, the video predictor from a key
frame. Random weights make the masks meaningless; shapes, prompts and the union are what is checked."""
from __future__ import annotations

import numpy as np
import pytest

from rvt_bench.adapters.twin.backends.sam2_hf import Sam2HFBackend
from rvt_bench.adapters.twin.backends.sam2_pkg import Sam2PkgBackend
from rvt_bench.adapters.vlm import segment
from rvt_bench.adapters.vlm.coords import Detection
from rvt_bench.core import masks as mask_io


@pytest.fixture(scope="module", params=["hf", "pkg"])
def sam2(request):
    cls = Sam2HFBackend if request.param == "hf" else Sam2PkgBackend
    return cls.tiny(seed=0, device="cpu")


FRAME = np.random.default_rng(0).integers(0, 255, (60, 80, 3), dtype=np.uint8)


def test_segment_image_gives_one_mask_per_box(sam2):
    masks = sam2.segment_image(FRAME, [[10, 10, 40, 50], [0, 0, 80, 60]], [[20, 20], [5, 5]])
    assert masks.shape == (2, 60, 80) and masks.dtype == bool


def test_segment_image_without_points(sam2):
    assert sam2.segment_image(FRAME, [[10, 10, 40, 50]]).shape == (1, 60, 80)


def test_image_masks_are_the_union_of_the_objects(sam2):
    dets = [Detection([10, 10, 40, 50], [20, 20]), Detection([0, 0, 80, 60], [5, 5])]
    (rle,) = segment.image_masks(sam2, FRAME, dets)
    union = sam2.segment_image(FRAME, [d.box for d in dets], [d.point for d in dets]).any(axis=0)
    assert np.array_equal(mask_io.decode(rle) if rle else np.zeros_like(union), union)


def test_video_masks_cover_every_frame(sam2):
    frames = [np.roll(FRAME, 3 * t, axis=1) for t in range(4)]
    masks = segment.video_masks(sam2, frames, 2, [Detection([10, 10, 40, 50])])
    assert len(masks) == 4
    assert all(m is None or tuple(m["size"]) == (60, 80) for m in masks)


def test_no_detection_is_no_mask(sam2):
    assert segment.image_masks(sam2, FRAME, []) == [None]
    assert segment.video_masks(sam2, [FRAME, FRAME], 0, []) == [None, None]


def test_segment_image_best_gives_one_mask_per_object_from_a_box_and_its_clicks(sam2):
    # Seg-Zero-7B's prompt: one box and two positive clicks per object (adapters/segzero)
    masks = sam2.segment_image_best(FRAME, [[10, 10, 40, 50], [0, 0, 80, 60]], [[[20, 20], [30, 40]], [[5, 5], [60, 30]]])
    assert masks.shape == (2, 60, 80) and masks.dtype == bool


def test_segment_image_best_keeps_the_multimask_output_of_the_highest_predicted_iou(sam2):
    import torch

    box, clicks = [10, 10, 40, 50], [[20, 20]]
    if isinstance(sam2, Sam2HFBackend):
        models, (processor, _) = sam2.components()
        inputs = processor(images=FRAME, input_boxes=[[box]], input_points=[[clicks]], input_labels=[[[1]]],
                           return_tensors="pt")
        with torch.inference_mode():
            out = models["image"](**inputs, multimask_output=True)
        candidates = processor.post_process_masks(out.pred_masks.float(), inputs["original_sizes"])[0][0].numpy()
        scores = out.iou_scores[0, 0].numpy()
    else:  # Meta's SAM2ImagePredictor, as the authors' scripts call it
        predictor = sam2._image_predictor()
        with torch.inference_mode():
            predictor.set_image(FRAME)
            candidates, scores, _ = predictor.predict(point_coords=np.asarray(clicks, np.float32), point_labels=np.ones(1),
                                                      box=np.asarray(box, np.float32), multimask_output=True)
    expected = np.asarray(candidates)[int(np.argmax(scores))] > 0.5
    assert np.array_equal(sam2.segment_image_best(FRAME, [box], [clicks])[0], expected)
