"""`precomputed` adapter: submission PNG layouts (ReVOS/MeViS as read by VISA tools/eval_revos.py,
ReasonSeg, LLM-Seg40K) and our own predictions.jsonl, mapped to samples through their meta."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf
from PIL import Image

from rvt_bench.adapters.precomputed import PrecomputedAdapter
from rvt_bench.loaders.llmseg40k import LLMSeg40KDataset
from rvt_bench.core.masks import decode, encode
from rvt_bench.harness.predict import predict_one
from rvt_bench.core.store import PredictionLog
from rvt_bench.core.types import AdapterError, Prediction, Sample, Target
from tests.test_datasets_llmseg40k import MASKS, write_llmseg40k

REPO = Path(__file__).resolve().parents[1]
H, W = 12, 16


def write_frame(path: Path, h: int = H, w: int = W) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (w, h), (10, 20, 30)).save(path)
    return str(path)


def write_png(path: Path, values: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), values)


def revos_sample(tmp_path: Path, video: str = "UVO/all/0aB3x", exp_id: str = "2") -> Sample:
    """A sample with the meta and frame ids rvt_bench.loaders.revos gives (video may be nested)."""
    frame_ids = ["00000", "00005", "00010"]
    frames = [write_frame(tmp_path / "ReVOS" / "JPEGImages" / video / f"{f}.jpg") for f in frame_ids]
    return Sample(
        id=f"{video}/{exp_id}", dataset="revos", split="valid", modality="video", frames=frames, frame_ids=frame_ids,
        query="the cat that jumps", task="segmentation", target=Target(masks=[None] * 3),
        meta={"type_id": 0, "type": "referring", "video": video, "exp_id": exp_id, "obj_id": [1], "anno_id": [7]},
    )


def reasonseg_sample(tmp_path: Path, name: str = "dog_2931") -> Sample:
    frame = write_frame(tmp_path / "ReasonSeg" / "val" / f"{name}.jpg")
    return Sample(
        id=name, dataset="reasonseg", split="val", modality="image", frames=[frame], frame_ids=[name],
        query="what keeps the dog dry?", task="segmentation", target=Target(masks=[None]),
        meta={"name": name, "is_sentence": True},
    )


def frame_masks() -> list[np.ndarray]:
    """Three different per-frame masks written as 0/1 values (any nonzero value is foreground)."""
    out = []
    for t in range(3):
        m = np.zeros((H, W), dtype=np.uint8)
        m[t : t + 4, 2 * t : 2 * t + 5] = 1
        out.append(m)
    return out


def test_revos_layout_reads_one_png_per_frame_under_a_nested_video(tmp_path):
    sample = revos_sample(tmp_path)
    preds_dir = tmp_path / "submission"
    for frame_id, m in zip(sample.frame_ids, frame_masks()):
        write_png(preds_dir / "UVO" / "all" / "0aB3x" / "2" / f"{frame_id}.png", m)
    pred = PrecomputedAdapter(preds_dir, layout="revos").predict(sample)
    assert pred.sample_id == "UVO/all/0aB3x/2" and pred.task == "segmentation" and pred.error is None
    assert len(pred.masks) == 3
    for rle, m in zip(pred.masks, frame_masks()):
        np.testing.assert_array_equal(decode(rle), m != 0)


def test_revos_layout_records_the_gray_values_visa_reads(tmp_path):
    """trace["pixel_values"] per frame: the one nonzero value, 0 for an empty frame, or [[value, RLE],
    ...] when a frame holds several; a colour PNG counts by its gray value (cv2 IMREAD_GRAYSCALE)."""
    sample = revos_sample(tmp_path)
    expression = tmp_path / "submission" / "UVO" / "all" / "0aB3x" / "2"
    several = np.zeros((H, W), dtype=np.uint8)
    several[1:4, 2:6], several[5:9, 4:12], several[10, 15] = 1, 255, 2
    single = np.zeros((H, W), dtype=np.uint8)
    single[3:7, 3:9] = 255
    colour = np.zeros((H, W, 3), dtype=np.uint8)
    colour[2:5, 1:4] = (200, 0, 0)  # BGR: blue; its gray value is what OpenCV's PNG reader makes of it
    for frame_id, values in zip(sample.frame_ids, (several, single, colour)):
        write_png(expression / f"{frame_id}.png", values)
    pred = PrecomputedAdapter(tmp_path / "submission", layout="revos").predict(sample)
    gray = [several, single, cv2.imread(str(expression / f"{sample.frame_ids[2]}.png"), cv2.IMREAD_GRAYSCALE)]
    assert gray[2][2, 1] not in (0, 200)
    for rle, g in zip(pred.masks, gray):
        np.testing.assert_array_equal(decode(rle), g != 0)
    levels, top, blue = pred.trace["pixel_values"]
    assert [v for v, _ in levels] == [1, 2, 255]
    for v, rle in levels:
        np.testing.assert_array_equal(decode(rle), several == v)
    assert top == 255 and blue == int(gray[2][2, 1])
    write_png(expression / f"{sample.frame_ids[1]}.png", np.zeros((H, W), dtype=np.uint8))
    pred = PrecomputedAdapter(tmp_path / "submission", layout="revos").predict(sample)
    assert pred.trace["pixel_values"][1] == 0 and decode(pred.masks[1]).sum() == 0


def test_unreadable_revos_png_fails_the_expression_naming_it(tmp_path):
    sample = revos_sample(tmp_path)
    expression = tmp_path / "submission" / "UVO" / "all" / "0aB3x" / "2"
    for frame_id, m in zip(sample.frame_ids, frame_masks()):
        write_png(expression / f"{frame_id}.png", m * 255)
    broken = expression / f"{sample.frame_ids[1]}.png"
    broken.write_bytes(broken.read_bytes()[:40])  # cut short inside the image data
    with pytest.raises(AdapterError, match="00005.png"):
        PrecomputedAdapter(tmp_path / "submission", layout="revos").predict(sample)


def test_missing_frame_png_fails_the_expression_naming_the_expected_path(tmp_path):
    sample = revos_sample(tmp_path)
    preds_dir = tmp_path / "submission"
    write_png(preds_dir / "UVO" / "all" / "0aB3x" / "2" / "00000.png", frame_masks()[0])
    expected = preds_dir / "UVO" / "all" / "0aB3x" / "2" / "00005.png"
    with pytest.raises(AdapterError, match=rf"{expected} does not exist \(2 of 3 frame PNGs missing\)"):
        PrecomputedAdapter(preds_dir, layout="revos").predict(sample)


def test_missing_png_becomes_a_recorded_failure_in_the_runner(tmp_path):
    sample = reasonseg_sample(tmp_path)
    (tmp_path / "submission").mkdir()
    pred = predict_one(PrecomputedAdapter(tmp_path / "submission"), sample, fail_fast=False)
    assert pred.sample_id == "dog_2931" and pred.masks is None
    assert pred.error["kind"] == "adapter"
    assert str(tmp_path / "submission" / "dog_2931.png") in pred.error["message"]


def test_png_of_another_size_than_the_frame_names_both_sizes(tmp_path):
    sample = reasonseg_sample(tmp_path)
    write_png(tmp_path / "submission" / "dog_2931.png", np.ones((W, H), dtype=np.uint8))
    with pytest.raises(AdapterError, match=r"dog_2931.*size \[H, W\] = \[16, 12\] but frame .*dog_2931\.jpg is \[12, 16\]"):
        PrecomputedAdapter(tmp_path / "submission", layout="reasonseg").predict(sample)


def test_any_nonzero_channel_of_a_colour_png_is_foreground(tmp_path):
    sample = reasonseg_sample(tmp_path)
    png = np.zeros((H, W, 3), dtype=np.uint8)
    png[0, 0] = (0, 0, 1)  # BGR: a faint red pixel
    png[5, 7] = (200, 0, 0)
    write_png(tmp_path / "submission" / "dog_2931.png", png)
    mask = decode(PrecomputedAdapter(tmp_path / "submission", layout="reasonseg").predict(sample).masks[0])
    assert sorted(zip(*np.nonzero(mask))) == [(0, 0), (5, 7)]


def test_llmseg40k_layout_maps_image_stem_and_qa_index_to_the_png(tmp_path):
    ds = LLMSeg40KDataset(write_llmseg40k(tmp_path / "data"))
    for sample, key in zip(ds, MASKS):
        write_png(tmp_path / "submission" / f"{sample.id}.png", MASKS[key].astype(np.uint8) * 255)
    adapter = PrecomputedAdapter(tmp_path / "submission", layout="llmseg40k")
    for sample, key in zip(ds, MASKS):
        np.testing.assert_array_equal(decode(adapter.predict(sample).masks[0]), MASKS[key])


def test_auto_layout_chooses_per_sample_from_its_meta(tmp_path):
    video, image = revos_sample(tmp_path), reasonseg_sample(tmp_path)
    preds_dir = tmp_path / "submission"
    for frame_id, m in zip(video.frame_ids, frame_masks()):
        write_png(preds_dir / "UVO" / "all" / "0aB3x" / "2" / f"{frame_id}.png", m)
    write_png(preds_dir / "dog_2931.png", frame_masks()[1])
    adapter = PrecomputedAdapter(preds_dir)
    assert adapter.layout == "auto"
    trace = adapter.predict(video).trace
    assert {k: trace[k] for k in ("layout", "source")} == {"layout": "revos", "source": str(preds_dir / "UVO" / "all" / "0aB3x" / "2")}
    assert adapter.predict(image).trace["layout"] == "reasonseg"


def test_explicit_layout_needs_its_meta_keys(tmp_path):
    sample = reasonseg_sample(tmp_path)
    (tmp_path / "submission").mkdir()
    with pytest.raises(AdapterError, match=r"dog_2931: layout revos needs sample meta keys \['video', 'exp_id'\]"):
        PrecomputedAdapter(tmp_path / "submission", layout="revos").predict(sample)


def test_jsonl_layout_round_trips_a_runs_predictions(tmp_path):
    video, image = revos_sample(tmp_path), reasonseg_sample(tmp_path)
    run_dir = tmp_path / "runs" / "revos" / "dtr1" / "abc123"
    written = [
        Prediction(sample_id=video.id, task="segmentation", masks=[encode(m) for m in frame_masks()],
                   trace="<think>...</think>", timings={"policy": 1.5}),
        Prediction.failure(image.id, "parse", "no <answer> tag"),
    ]
    log = PredictionLog(run_dir / "predictions.jsonl")
    for p in written:
        log.append(p)
    log.close()
    for root in (run_dir, run_dir / "predictions.jsonl"):
        adapter = PrecomputedAdapter(root)
        assert adapter.layout == "jsonl"
        assert [adapter.predict(s) for s in (video, image)] == written


def test_jsonl_layout_sample_without_a_record_is_an_adapter_error(tmp_path):
    log = PredictionLog(tmp_path / "predictions.jsonl")
    log.append(Prediction(sample_id="other", task="segmentation", masks=[None]))
    log.close()
    with pytest.raises(AdapterError, match=r"dog_2931: no prediction with this sample_id in .*predictions\.jsonl"):
        PrecomputedAdapter(tmp_path, layout="jsonl").predict(reasonseg_sample(tmp_path))


def test_jsonl_layout_checks_rle_sizes_against_the_frames(tmp_path):
    log = PredictionLog(tmp_path / "predictions.jsonl")
    log.append(Prediction(sample_id="dog_2931", task="segmentation", masks=[encode(np.zeros((8, 8), dtype=bool))]))
    log.close()
    with pytest.raises(AdapterError, match=r"\[8, 8\] but frame .* is \[12, 16\]"):
        PrecomputedAdapter(tmp_path).predict(reasonseg_sample(tmp_path))


def test_jsonl_layout_without_predictions_file_and_unknown_layout_fail_at_construction(tmp_path):
    with pytest.raises(AdapterError, match="holds no predictions"):
        PrecomputedAdapter(tmp_path, layout="jsonl")
    with pytest.raises(AdapterError, match="layout must be one of"):
        PrecomputedAdapter(tmp_path, layout="no_such_layout")
    with pytest.raises(AdapterError, match="does not exist"):
        PrecomputedAdapter(tmp_path / "nowhere")


def test_hydra_config_instantiates_the_adapter_with_a_fingerprint_naming_root_and_layout(tmp_path):
    from rvt_bench.harness.config import adapter_node

    cfg = OmegaConf.load(REPO / "conf" / "model" / "precomputed.yaml")
    cfg.root = str(tmp_path)
    adapter = instantiate(adapter_node(cfg), _convert_="all")  # as the runner does: without `resources`
    assert isinstance(adapter, PrecomputedAdapter)
    assert adapter.fingerprint() == {"name": "precomputed", "root": str(tmp_path.resolve()), "layout": "auto"}


def test_threaded_batches_give_the_same_predictions(tmp_path):
    """predict_batch with 4 threads returns, in order, what predict returns one by one (errors too)."""
    import numpy as np
    from PIL import Image

    from rvt_bench.adapters.precomputed import PrecomputedAdapter
    from rvt_bench.core import masks as mask_codec
    from rvt_bench.core.types import AdapterError, Sample, Target

    samples = []
    for k in range(6):
        frame = tmp_path / f"img{k}.jpg"
        Image.fromarray(np.zeros((6, 8, 3), np.uint8)).save(frame)
        gt = np.zeros((6, 8), bool)
        samples.append(Sample(id=f"img{k}", dataset="reasonseg", split="val", modality="image", frames=[str(frame)],
                              frame_ids=[f"img{k}"], query="q", task="segmentation",
                              target=Target(masks=[mask_codec.encode(gt)]), meta={"name": f"img{k}"}))
        if k != 3:  # img3 has no prediction file
            pred = np.zeros((6, 8), bool)
            pred[: k + 1, :2] = True
            mask_codec.write_png_mask(tmp_path / "preds" / f"img{k}.png", pred)
    adapter = PrecomputedAdapter(tmp_path / "preds", layout="reasonseg", workers=4)
    batched = adapter.predict_batch(samples)
    for sample, got in zip(samples, batched):
        if sample.id == "img3":
            assert isinstance(got, AdapterError) and "img3.png" in str(got)
        else:
            assert got.sample_id == sample.id and got.masks == adapter.predict(sample).masks


@pytest.mark.parametrize("bad, match", [
    ("{garbage", r"predictions\.jsonl:2: not a JSON prediction record"),
    ('{"sample_id": "b", "error": "oops"}', r"'error' must be null or an object with a 'kind'"),
])
def test_a_bad_record_in_a_prediction_file_stops_before_the_first_sample(tmp_path, bad, match):
    # once: every sample failed as "store" with tracebacks (garbage line), or the run crashed (error: "oops")
    from rvt_bench.core.types import AdapterError

    path = tmp_path / "predictions.jsonl"
    path.write_text('{"sample_id": "a", "task": "vqa", "text": "x"}\n' + bad + '\n{"sample_id": "c", "task": "vqa", "text": "y"}\n')
    adapter = PrecomputedAdapter(path)
    with pytest.raises(AdapterError, match=match):
        adapter.preflight()


def test_a_stored_mask_that_is_not_an_rle_fails_its_sample(tmp_path):
    from rvt_bench.core.types import AdapterError, Sample, Target

    path = tmp_path / "predictions.jsonl"
    path.write_text('{"sample_id": "a", "task": "segmentation", "masks": ["nope"]}\n')
    sample = Sample(id="a", dataset="d", split="s", modality="image", frames=["f.jpg"], frame_ids=["f"],
                    query="q", task="segmentation", target=Target())
    adapter = PrecomputedAdapter(path)
    adapter.preflight()
    with pytest.raises(AdapterError, match="is not a COCO RLE"):
        adapter.predict(sample)


@pytest.mark.parametrize("workers", [1025, 1e8, float("nan")])
def test_workers_past_the_pool_bound_are_refused_in_one_line(tmp_path, workers):
    with pytest.raises(AdapterError, match=r"model.workers must be at most 1024"):
        PrecomputedAdapter(tmp_path, workers=workers)


def test_map_threads_never_starts_more_threads_than_the_pool_bound(monkeypatch):
    import threading
    import time

    from rvt_bench.core import threads

    monkeypatch.setattr(threads, "WORKERS", 3)
    lock, running, peak = threading.Lock(), [0], [0]

    def one(x):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1
        return x * 2

    assert threads.map_threads(one, range(20), 10_000) == [2 * x for x in range(20)]
    assert peak[0] == 3
