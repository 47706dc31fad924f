"""Experiment loggers on a real run of the demo (+model=precomputed, no model loaded): TensorBoard's
event files read back with TensorBoard's own reader, and a W&B run in offline mode read back from
its run directory; both hold metrics.json's numbers."""
import json
from pathlib import Path

import pytest

from rvt_bench.harness import loggers
from tests.demo_runs import demo_run

pytest.importorskip("tensorboard")
pytest.importorskip("wandb")


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("loggers")
    result = demo_run(tmp, 3, 0, "a", "logger=tensorboard")
    return tmp, result, json.loads((result.run_dir / "metrics.json").read_text())


def event_scalars(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    acc.Reload()
    return acc, {tag: [e.value for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_tensorboard_scalars_equal_metrics_json(logged):
    tmp, result, metrics = logged
    log_dir = tmp / "runs" / "tensorboard" / "runs" / "demo" / "precomputed" / "a"
    assert result.logged == str(log_dir)
    acc, values = event_scalars(log_dir)
    numbers = {k: v for k, v in metrics["metrics"].items() if isinstance(v, (int, float))}
    assert numbers and set(numbers) <= set(values)
    for key, value in numbers.items():
        assert values[key] == [pytest.approx(value, rel=1e-6, abs=1e-7)], key  # event files hold float32
    ci = metrics["ci"]["image/gIoU"]
    assert values["image/gIoU/ci_low"] == [pytest.approx(ci["low"], rel=1e-6)]
    assert values["baseline_empty/video/J&F"] == [pytest.approx(metrics["baseline_empty"]["video/J&F"], rel=1e-6)]
    assert values["image/level=1/gIoU"] == [pytest.approx(metrics["breakdown"]["image/level"]["1"]["gIoU"], rel=1e-6)]
    stage = metrics["adapter_report"]["stages"][0]  # the model's own funnel (precomputed: prediction found)
    assert values["run/n"] == [31] and values[f"funnel/{stage['key']}"] == [stage["reached"]]
    tags = acc.Tags()
    assert {"config/text_summary", "results/text_summary", "samples/text_summary"} <= set(tags["tensors"])
    assert len(tags["images"]) == 31  # every overlay of the demo (max_images 32)


def test_logging_a_run_again_replaces_its_event_files(logged, tmp_path):
    import shutil

    tmp, result, metrics = logged
    # a copy of the logged run and its event files: the module's other tests read the originals
    shutil.copytree(tmp / "runs", tmp_path / "runs")
    run_dir = tmp_path / "runs" / result.run_dir.relative_to(tmp / "runs")
    tracker = loggers.make_logger({"_target_": "rvt_bench.harness.loggers.tensorboard_logger.TensorBoardLogger",
                                   "max_images": 0})
    again = loggers.log_run(tracker, run_dir, tmp_path / "runs", metrics, {"dataset": {}, "model": {}})
    assert Path(again).is_relative_to(tmp_path) and len(list(Path(again).glob("events.out.tfevents.*"))) == 1
    assert event_scalars(again)[1]["image/gIoU"] == [pytest.approx(metrics["metrics"]["image/gIoU"], rel=1e-6)]


def test_a_sweep_logs_its_points_side_by_side_in_one_group(logged, tmp_path):
    from rvt_bench.harness.loggers.tensorboard_logger import TensorBoardLogger

    _, result, metrics = logged
    tracker = TensorBoardLogger(dir=str(tmp_path))
    for name in ("p0", "p1"):
        point = loggers.LoggedRun(result.run_dir, tmp_path, {**metrics, "run_name": name}, {}, group="sweep-x")
        tracker.log(point)
    assert sorted(p.name for p in (tmp_path / "sweep-x" / "demo" / "precomputed").iterdir()) == ["p0", "p1"]


def wandb_records(run_file: Path):
    """The records of a W&B transaction log (run-<id>.wandb): a 7-byte W&B header, then LevelDB's
    log format (32 KiB blocks of chunks: crc32, length, type FULL/FIRST/MIDDLE/LAST), each record a
    wandb_internal_pb2.Record."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = run_file.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, pending = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7 or data[pos + 6] == 0:  # block trailer or zero padding
            pos += left
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending)
            yield record


def test_wandb_offline_run_holds_the_same_values(logged, tmp_path, monkeypatch):
    from rvt_bench.harness.loggers.wandb_logger import WandbLogger

    monkeypatch.setenv("WANDB_SILENT", "true")
    tmp, result, metrics = logged
    where = loggers.log_run(WandbLogger(mode="offline", dir=str(tmp_path), group="sweep-x"), result.run_dir,
                            tmp / "runs", metrics, {"dataset": {"name": "demo"}, "model": {"name": "precomputed"},
                                                    "policy": {"api_key": "sk-secret"}})
    assert where is not None and "offline-run-" in where
    (run_file,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    summary, config, artifacts, group = {}, {}, {}, None
    for record in wandb_records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "summary":
            summary.update({"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in record.summary.update})
        elif kind == "run":
            group = record.run.run_group
            config.update({i.key: json.loads(i.value_json) for i in record.run.config.update})
        elif kind == "artifact":
            artifacts[record.artifact.type] = [c.path for c in record.artifact.manifest.contents]
    for key, value in metrics["metrics"].items():
        if isinstance(value, (int, float)):
            assert summary[key] == value, key  # exactly: W&B keeps float64
    assert summary["image/gIoU/ci_high"] == metrics["ci"]["image/gIoU"]["high"] and group == "sweep-x"
    assert config["dataset"] == {"name": "demo"} and "sk-secret" not in json.dumps(config)
    assert "report.html" in artifacts["report"] and any(p.startswith("report_images/") for p in artifacts["report"])
    assert any(p.startswith("media/images/") for p in artifacts["run_table"])  # the samples table's overlays
