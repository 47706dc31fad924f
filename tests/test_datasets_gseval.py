"""GroundingSuite-Eval: loader of the release's JSONL, evaluate_grounding.py's saved numbers in box
and mask mode on a fixture (tests/data/gseval_parity/), the prediction JSONL layout, the command."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvt_bench.adapters.precomputed import PrecomputedAdapter
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction
from rvt_bench.loaders.gseval import GSEvalDataset
from rvt_bench.metrics.protocols.gseval import SKIPPED_WHY, GSEvalProtocol, GSEvalValues, box_iou
from tests.precomputed_runs import load_script, run_precomputed

PARITY = Path(__file__).parent / "data" / "gseval_parity"
EXPECTED = json.loads((PARITY / "reference" / "expected_gseval.json").read_text())


def hostile_fixture(base: Path) -> Path:
    """The release written under `base` for the hostile-dataset kit (tests/hostile_kit.py)."""
    root = base / "gseval"
    load_script(PARITY / "make_fixture.py", "gseval_make_fixture").write_fixture(root)
    return root


@pytest.fixture(scope="module")
def fixture(tmp_path_factory) -> tuple[Path, Path]:
    make_fixture = load_script(PARITY / "make_fixture.py", "gseval_make_fixture")
    base = tmp_path_factory.mktemp("gseval")
    make_fixture.write_fixture(base / "gseval")
    make_fixture.write_predictions(base / "gseval", base / "pred")
    return base / "gseval", base / "pred"


def scored(protocol, dataset, root):
    adapter = PrecomputedAdapter(root, layout="gseval")
    out = []
    for sample in dataset:
        try:
            pred = adapter.predict(sample)
        except AdapterError as exc:
            pred = Prediction.failure(sample.id, exc.kind, str(exc), trace=exc.trace)
        out.append(protocol.score(sample, pred))
    return out


def test_loader_reads_every_line(fixture):
    ds = GSEvalDataset(fixture[0], split="mask")
    assert [s.id for s in ds] == [str(i) for i in range(14)] and ds.errors == []
    s = ds[2]
    assert s.task == "segmentation" and s.query == "thing 2" and s.meta["class_id"] == 3
    assert s.frames == [str(fixture[0] / "unlabeled2017" / "000000000002.jpg")]
    assert GSEvalDataset(fixture[0])[0].task == "grounding"


def test_box_mode_reproduces_the_saved_accuracies(fixture):
    expected = EXPECTED["box"]
    protocol = GSEvalProtocol(mode="box")
    records = scored(protocol, GSEvalDataset(fixture[0], split="box"), fixture[1])
    out = protocol.aggregate(records)
    assert out["metrics"]["Acc@0.5"] == pytest.approx(expected["overall_accuracy"], abs=1e-12)
    for cls, acc in expected["class_accuracies"].items():
        assert out["breakdown"]["class_id"][cls]["Acc@0.5"] == pytest.approx(acc, abs=1e-12)
        assert out["breakdown"]["class_id"][cls]["n"] == expected["class_counts"][cls]
    assert out["skipped"] == ["5"]
    ious = {r.sample_id: r.of(GSEvalValues).iou for r in records}
    for row in expected["per_sample"]:
        assert ious[str(row["idx"])] == (pytest.approx(row["iou"], abs=1e-12) if row["iou"] is not None else None)


def test_mask_mode_reproduces_the_saved_giou(fixture):
    expected = EXPECTED["mask"]
    protocol = GSEvalProtocol(mode="mask")
    records = scored(protocol, GSEvalDataset(fixture[0], split="mask"), fixture[1])
    out = protocol.aggregate(records)
    assert out["metrics"]["gIoU"] == pytest.approx(expected["overall_giou"], abs=1e-12)
    for cls, giou in expected["class_gious"].items():
        assert out["breakdown"]["class_id"][cls]["gIoU"] == pytest.approx(giou, abs=1e-12)
        assert out["breakdown"]["class_id"][cls]["n"] == expected["class_counts"][cls]
    assert out["skipped"] == ["5", "6"]
    ious = {r.sample_id: r.of(GSEvalValues).iou for r in records}
    assert {str(r["idx"]): pytest.approx(r["iou"], abs=1e-12) for r in expected["per_sample"]} == \
        {k: v for k, v in ious.items() if v is not None}


def test_failed_zero_counts_the_missing_prediction(fixture):
    protocol = GSEvalProtocol(mode="mask", failed="zero")
    out = protocol.aggregate(scored(protocol, GSEvalDataset(fixture[0], split="mask"), fixture[1]))
    ious = [r["iou"] for r in EXPECTED["mask"]["per_sample"]]
    assert out["metrics"]["gIoU[failed-zero]"] == pytest.approx(sum(ious) / (len(ious) + 2), abs=1e-12)
    assert out["zeroed"] == ["5", "6"] and out["n"] == 14 and "excluded" not in out
    assert protocol.variant_label() == "failed=zero" and GSEvalProtocol().variant_label() == ""
    # both numbers in one run: the evaluator's saved gIoU beside the headline
    assert out["metrics"]["gIoU"] == pytest.approx(EXPECTED["mask"]["overall_giou"], abs=1e-12)


@pytest.mark.parametrize("mode", ["box", "mask"])
def test_n_counts_what_the_headline_averages_and_both_numbers_are_in_one_run(fixture, mode):
    # 14 samples: idx 5 has no prediction line (and, in mask mode, idx 6 no segmentation): the
    # evaluator's overall leaves them out, so they are excluded with the reason, not counted in n
    records = scored(GSEvalProtocol(mode=mode), GSEvalDataset(fixture[0], split=mode), fixture[1])
    out = GSEvalProtocol(mode=mode).aggregate(records)
    left_out = ["5"] if mode == "box" else ["5", "6"]
    assert len(records) == 14 and out["n"] == 14 - len(left_out)
    assert out["excluded"] == {SKIPPED_WHY: len(left_out)}
    assert [e["sample_id"] for e in out["excluded_samples"]] == left_out
    zero = GSEvalProtocol(mode=mode, failed="zero").aggregate(records)
    assert out["metrics"] == zero["metrics"] and set(out["metrics"]) == {zero_key(mode), zero_key(mode)[:-13]}
    strip = lambda body: {c: {k: v for k, v in row.items() if k != "n"}  # noqa: E731
                          for c, row in body["breakdown"]["class_id"].items()}
    assert strip(out) == strip(zero)
    key = zero_key(mode)
    assert GSEvalProtocol(mode=mode).estimator(key, records).value() == pytest.approx(out["metrics"][key], abs=1e-12)
    assert GSEvalProtocol(mode=mode).counting_failures().failed == "zero"


def zero_key(mode):
    return ("Acc@0.5" if mode == "box" else "gIoU") + "[failed-zero]"


def test_box_iou_is_the_reference_formula():
    assert box_iou([0, 0, 2, 2], [1, 1, 3, 3]) == pytest.approx(1 / 7)
    assert box_iou([0, 0, 2, 2], [2, 0, 4, 2]) == 0.0  # touching: x_max == x_min, intersection 0
    assert box_iou([0, 0, 0, 0], [0, 0, 0, 0]) == 0.0  # an empty union


def test_estimators_give_the_reported_values(fixture):
    from rvt_bench.core.records import ScoreRecord

    for mode in ("box", "mask"):
        protocol = GSEvalProtocol(mode=mode)
        records = [ScoreRecord.from_json(json.loads(json.dumps(r.to_json())))
                   for r in scored(protocol, GSEvalDataset(fixture[0], split=mode), fixture[1])]
        out = protocol.aggregate(records)
        key = protocol.headline[0]
        assert protocol.estimator(key, records).value() == pytest.approx(out["metrics"][key], abs=1e-12)


def test_a_mask_of_another_size_fails_its_sample(fixture, tmp_path):
    lines = [json.loads(l) for l in (fixture[1] / "model_predictions.jsonl").read_text().splitlines()]
    import numpy as np

    from rvt_bench.core import masks

    rle = masks.encode(np.ones((5, 5), bool))
    lines[0]["segmentation"] = {"size": rle["size"], "counts": rle["counts"].decode() if isinstance(rle["counts"], bytes) else rle["counts"]}
    (tmp_path / "model_predictions.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    ds = GSEvalDataset(fixture[0], split="mask")
    with pytest.raises(AdapterError, match="broadcast"):
        GSEvalProtocol(mode="mask").score(ds[0], PrecomputedAdapter(tmp_path, layout="gseval").predict(ds[0]))


def test_a_gt_rle_claiming_more_pixels_than_any_image_is_never_decoded(fixture, tmp_path):
    """A GT segmentation whose 'size' claims more pixels than dataset.limits.max_image_pixels (100000 x
    100000 in a valid 7-byte string) fails its sample at the frame check; the report then drew it and
    pycocotools allocated H*W bytes (a segfault under a memory limit). Decoding it is refused in one
    line naming the limit (here the limit lowered, so that the unfixed decode stays small)."""
    import shutil

    import numpy as np

    from rvt_bench.core import files, masks
    from rvt_bench.harness.predict import FrameChecker

    root = tmp_path / "g"
    shutil.copytree(fixture[0], root)
    lines = (root / "GroundingSuite-Eval.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["segmentation"] = masks.encode(np.zeros((100, 100), bool))
    lines[0] = json.dumps(first)
    (root / "GroundingSuite-Eval.jsonl").write_text("\n".join(lines) + "\n")
    with files.limits_in_force(files.ReadLimits(max_image_pixels=64 * 64)):
        sample = GSEvalDataset(root, split="mask")[0]
        assert FrameChecker().check(sample).error["kind"] == "data"
        for decode in (masks.decode, lambda r: masks.decode_box(r, (0, 1, 0, 1))):
            with pytest.raises(DatasetFormatError, match=r"10000 pixels, over the 4096 .*max_image_pixels"):
                decode(sample.target.masks[0])
    assert masks.decode(sample.target.masks[0]).shape == (100, 100)  # within the default limit


def test_a_box_with_nan_infinity_or_a_number_beyond_float_is_one_samples_matter(fixture, tmp_path):
    """A predicted box holding NaN or Infinity is counted wrong (calculate_iou gives 0), through a whole
    run: predictions.jsonl writes NaN as null, which crashed the scoring (None > float) and ended the
    run. An integer beyond float's range (10**400) fails its sample (prediction) or is a data error of
    its line (GT), which ended the loader with an OverflowError."""
    import shutil

    root, pred = tmp_path / "g", tmp_path / "p"
    shutil.copytree(fixture[0], root)
    shutil.copytree(fixture[1], pred)
    lines = (pred / "model_predictions.jsonl").read_text().splitlines()
    first, second = json.loads(lines[0]), json.loads(lines[1])
    first["box"] = [float("nan"), 1.0, float("inf"), 3.0]
    second.pop("predicted_box", None)
    lines[0], lines[1] = json.dumps(first), json.dumps(second)[:-1] + ', "box": [1' + "0" * 400 + ', 1, 2, 3]}'
    (pred / "model_predictions.jsonl").write_text("\n".join(lines) + "\n")
    gt = (root / "GroundingSuite-Eval.jsonl").read_text().splitlines()
    third = json.loads(gt[2])
    third["box"][0] = 10**400
    gt[2] = json.dumps(third)
    (root / "GroundingSuite-Eval.jsonl").write_text("\n".join(gt) + "\n")
    body = run_precomputed("gseval", tmp_path, root, pred, "run.report=false").metrics
    assert [e["sample_id"] for e in body["data_error_samples"]] == ["line3"]
    assert "'box' must be [x1, y1, x2, y2] numbers" in body["data_error_samples"][0]["message"]
    failed = {f["sample_id"]: f["message"] for f in body["failed_samples"]}
    assert "box must be [x1, y1, x2, y2] numbers" in failed["1"] and "model_predictions.jsonl" in failed["1"]
    assert "0" not in failed  # the NaN box: scored, wrong
    records = {json.loads(l)["sample_id"]: json.loads(l)
               for l in next(tmp_path.rglob("scores.jsonl")).read_text().splitlines()}
    assert records["0"]["values"]["gseval"]["outcome"] == "no_box"


def test_the_same_command_again_completes_a_run_whose_missing_predictions_failed(fixture, tmp_path):
    """The evaluator leaves a sample without a prediction line out, so a run lacking several completes;
    the same command again (a resume, after an interruption during scoring, say) predicts those failed
    samples again, and they fail alike: that is no setup that cannot succeed (run.stop_after_same_failures
    counts the samples never predicted), so it scores as the first did instead of stopping with exit 9
    and 'the same command resumes', which stopped again each time."""
    import shutil

    pred = tmp_path / "p"
    shutil.copytree(fixture[1], pred)
    lines = (pred / "model_predictions.jsonl").read_text().splitlines()
    (pred / "model_predictions.jsonl").write_text("\n".join(lines[:6]) + "\n")  # 8 of 14 samples lack a line
    first = run_precomputed("gseval", tmp_path, fixture[0], pred, "run.report=false").metrics
    assert first["failures"] >= 5
    again = run_precomputed("gseval", tmp_path, fixture[0], pred, "run.report=false").metrics
    assert again["metrics"] == first["metrics"] and again["failures"] == first["failures"]


def test_one_sample_whose_gt_cannot_be_drawn_on_its_frame_leaves_the_report_whole(fixture, tmp_path):
    """A GT segmentation of another size than its image fails its sample (the frame check), and a GT box
    with NaN is scored as the evaluator scores it; neither may cost the run its report.html (the
    picture raised IndexError on the mask, ValueError on int(NaN), and the page was not built)."""
    import shutil

    import numpy as np

    from rvt_bench.core import masks

    root = tmp_path / "g"
    shutil.copytree(fixture[0], root)
    lines = (root / "GroundingSuite-Eval.jsonl").read_text().splitlines()
    first, second = json.loads(lines[0]), json.loads(lines[1])
    h, w = first["segmentation"]["size"]
    first["segmentation"] = masks.encode(np.ones((h - 6, w - 8), bool))
    second["box"] = [float("nan"), 1.0, 2.0, 3.0]
    lines[0], lines[1] = json.dumps(first), json.dumps(second)
    (root / "GroundingSuite-Eval.jsonl").write_text("\n".join(lines) + "\n")
    for mode in ("mask", "box"):
        body = run_precomputed("gseval", tmp_path / mode, root, fixture[1], f"dataset.split={mode}").metrics
        if mode == "mask":
            assert [e["sample_id"] for e in body["data_error_samples"]] == ["0"]
        assert len(list((tmp_path / mode).rglob("report.html"))) == 1, mode


def test_bad_lines_are_data_errors_and_the_rest_loads(fixture, tmp_path):
    import shutil

    root = tmp_path / "g"
    shutil.copytree(fixture[0], root)
    lines = (root / "GroundingSuite-Eval.jsonl").read_text().splitlines()
    first = json.loads(lines[1])
    first["image_path"] = "../outside.jpg"
    lines[1] = json.dumps(first)
    lines[2] = "{not json"
    (root / "GroundingSuite-Eval.jsonl").write_text("\n".join(lines) + "\n")
    ds = GSEvalDataset(root)
    assert len(ds) == 12 and sorted(e["sample_id"] for e in ds.errors) == ["line2", "line3"]
    with pytest.raises(DatasetFormatError, match="split must be one of"):
        GSEvalDataset(root, split="val")


def test_the_documented_command_gives_the_saved_numbers(fixture, tmp_path):
    # rvt-bench +dataset=gseval dataset.root=... [dataset.split=mask] +model=precomputed model.root=... (docs/benchmarks/gseval.md)
    for mode, key, ref in (("box", "Acc@0.5", "overall_accuracy"), ("mask", "gIoU", "overall_giou")):
        body = run_precomputed("gseval", tmp_path / mode, fixture[0], fixture[1], f"dataset.split={mode}",
                               "run.report=false").metrics
        assert body["metrics"][key] == pytest.approx(EXPECTED[mode][ref], abs=1e-12)
        left_out = 1 if mode == "box" else 2  # idx 5 (and in mask mode idx 6): no usable prediction
        assert body["n"] == 14 - left_out and body["excluded"] == {SKIPPED_WHY: left_out}
        assert body["metrics"][key + "[failed-zero]"] < body["metrics"][key]


def contract_samples(rng, node):
    """Synthetic samples for tests/test_protocol_contract.py: 48 images with a GT mask and a small GT
    box drawn as the contract draws predicted boxes (so that some hit), class_id 1-4."""
    from dataclasses import replace

    from tests.contract_samples import H, W, image_samples

    out = []
    for i, s in enumerate(image_samples(rng, n=48)):
        x0, y0 = float(rng.integers(0, W - 4)), float(rng.integers(0, H - 4))
        box = [x0, y0, x0 + float(rng.integers(2, 4)), y0 + float(rng.integers(2, 4))]
        task = "segmentation" if node.get("mode") == "mask" else "grounding"  # mode: "${..split}", box by default
        out.append(replace(s, task=task, target=replace(s.target, boxes=[[box]]),
                           meta={"idx": i, "class_id": 1 + i % 4, "image_path": f"{i}.jpg", "caption": ""}))
    return out


def test_a_line_that_is_not_utf8_fails_its_sample_and_a_fifo_is_not_called_missing(fixture, tmp_path):
    """The hostile kit's symlink_out (bytes of no format) crashed the load with a UnicodeDecodeError;
    a FIFO in place of the GT file or an image was reported as absent."""
    import os
    import shutil

    root = tmp_path / "g"
    shutil.copytree(fixture[0], root)
    gt = root / "GroundingSuite-Eval.jsonl"
    gt.write_bytes(b'{"idx": 99, "label": "\xff\xfe"}\n' + gt.read_bytes())
    image = root / "unlabeled2017" / "000000000000.jpg"
    image.unlink()
    os.mkfifo(image)
    ds = GSEvalDataset(root)
    assert len(ds) == 14 and [e["sample_id"] for e in ds.errors] == ["line1"]
    assert "is not UTF-8 text" in ds.errors[0]["message"]
    assert ds[0].frames == [str(image)]  # refused when read (the runner's frame check), not skipped as missing
    gt.unlink()
    os.mkfifo(gt)
    with pytest.raises(DatasetFormatError, match=r"not a regular file \(a FIFO\)"):
        GSEvalDataset(root)


def test_a_deep_prediction_line_fails_the_samples_not_the_run(fixture, tmp_path):
    (tmp_path / "model_predictions.jsonl").write_text("[" * 100000 + "]" * 100000 + "\n")
    ds = GSEvalDataset(fixture[0], split="mask")
    with pytest.raises(AdapterError, match="nested deeper"):
        PrecomputedAdapter(tmp_path, layout="gseval").predict(ds[0])
