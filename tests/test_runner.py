"""The runner's promises (docs/architecture.md "A run"): failures are recorded and the run goes on, a re-run
does no model work and gives the same metrics.json, a killed run resumes without redoing or losing
samples, shards merge, and the leaderboard gets one row per run."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from rvt_bench.harness.runner import run
from rvt_bench.core.store import read_jsonl
from rvt_bench.core.types import RunStoreError
from tests.fakes import calls, make_cfg

REPO = Path(__file__).resolve().parent.parent


def test_failures_are_recorded_and_the_run_goes_on(tmp_path):
    cfg = make_cfg(tmp_path, fail=["s01"], crash=["s02"], bad_size=["s03"])
    result = run(cfg)
    m = result.metrics
    assert m["n"] == 6 and m["failures"] == 3
    assert m["failures_by_kind"] == {"adapter": 1, "exception": 1, "parse": 1}
    # parse_rate: of the 4 samples whose output was parsed or failed to parse (not the crash or the
    # scoring-time size mismatch), 3 parsed
    assert m["parse_rate"] == pytest.approx(3 / 4)
    # failed samples score as empty predictions: IoU 0 for those three, 1 for the others
    assert m["metrics"]["IoU"] == pytest.approx(3 / 6)
    crashed = next(f for f in m["failed_samples"] if f["sample_id"] == "s02")
    assert crashed["message"] == "ZeroDivisionError: adapter bug"
    preds = list(read_jsonl(result.run_dir / "predictions.jsonl"))
    assert "Traceback" in next(p for p in preds if p["sample_id"] == "s02")["trace"]


def test_rerun_does_no_model_work_and_gives_identical_metrics(tmp_path):
    cfg = make_cfg(tmp_path, fail=["s04"])
    first = run(cfg)
    body = (first.run_dir / "metrics.json").read_text()
    assert len(calls(tmp_path)) == 6
    second = run(cfg)
    assert second.predicted == 0 and len(calls(tmp_path)) == 6
    assert (second.run_dir / "metrics.json").read_text() == body


def test_run_name_defaults_to_fingerprint_and_changes_with_semantic_config(tmp_path):
    a = run(make_cfg(tmp_path)).run_dir
    b = run(make_cfg(tmp_path, fail=["s00"])).run_dir
    assert a != b and a.parent == b.parent
    board = pd.read_csv(tmp_path / "boards" / "fake.csv", dtype={"fingerprint": str})
    assert sorted(board["run_name"]) == sorted([a.name, b.name])


def test_rerun_upserts_the_same_leaderboard_row(tmp_path):
    cfg = make_cfg(tmp_path)
    run(cfg)
    run(cfg)
    board = pd.read_csv(tmp_path / "boards" / "fake.csv")
    assert len(board) == 1 and board["IoU"][0] == pytest.approx(1.0)


def test_explicit_run_name_refuses_another_config(tmp_path):
    cfg = make_cfg(tmp_path)
    cfg.run.name = "mine"
    run(cfg)
    other = make_cfg(tmp_path, fail=["s00"])
    other.run.name = "mine"
    with pytest.raises(RunStoreError, match="another configuration"):
        run(other)


def test_torn_last_line_is_redone(tmp_path):
    cfg = make_cfg(tmp_path)
    result = run(cfg)
    pred_file = result.run_dir / "predictions.jsonl"
    lines = pred_file.read_text().splitlines(keepends=True)
    pred_file.write_text("".join(lines[:4]) + lines[4][: len(lines[4]) // 2])  # killed mid-write of s04
    (tmp_path / "calls.txt").unlink()
    result = run(cfg)
    assert calls(tmp_path) == ["s04", "s05"]
    ids = [r["sample_id"] for r in read_jsonl(pred_file)]
    assert sorted(ids) == [f"s{k:02d}" for k in range(6)]
    assert result.metrics["metrics"]["IoU"] == pytest.approx(1.0)


def test_sigkill_mid_run_then_resume_scores_every_sample_once(tmp_path):
    cfg = make_cfg(tmp_path, sleep_s=0.4)
    cfg.dataset.n = 8
    cfg_path = tmp_path / "cfg.yaml"
    OmegaConf.save(cfg, cfg_path)
    code = ("import sys; from omegaconf import OmegaConf; from rvt_bench.harness.runner import run; "
            "run(OmegaConf.load(sys.argv[1]))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(cfg_path)], cwd=REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while len(calls(tmp_path)) < 3 and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = calls(tmp_path)
    assert 3 <= len(before) < 8
    result = run(OmegaConf.load(cfg_path))
    scored = [r["sample_id"] for r in read_jsonl(result.run_dir / "scores.jsonl")]
    assert sorted(scored) == [f"s{k:02d}" for k in range(8)]
    predicted = [r["sample_id"] for r in read_jsonl(result.run_dir / "predictions.jsonl")]
    assert len(predicted) == len(set(predicted)) == 8
    # only the sample in flight at the kill may be predicted twice
    assert len(calls(tmp_path)) - 8 <= 1


def test_shards_predict_disjoint_parts_and_merge(tmp_path):
    for shard in (0, 1, 2):
        cfg = make_cfg(tmp_path)
        cfg.run.shard, cfg.run.num_shards = shard, 3
        result = run(cfg)
    assert sorted(calls(tmp_path)) == [f"s{k:02d}" for k in range(6)]
    assert result.metrics is not None and result.metrics["n"] == 6  # the last shard saw the union
    files = sorted(p.name for p in result.run_dir.glob("predictions*.jsonl"))
    assert files == [f"predictions.shard{i}of3.jsonl" for i in range(3)]


def test_shard_alone_waits_for_merge(tmp_path):
    cfg = make_cfg(tmp_path)
    cfg.run.shard, cfg.run.num_shards = 0, 2
    result = run(cfg)
    assert result.metrics is None and not (result.run_dir / "metrics.json").exists()


def test_limit_runs_a_prefix_and_does_not_publish(tmp_path):
    cfg = make_cfg(tmp_path)
    cfg.run.limit = 2
    result = run(cfg)
    assert result.metrics["n"] == 2 and result.leaderboard is None
    assert not (tmp_path / "boards" / "fake.csv").exists()


def test_batched_prediction_gives_the_same_metrics(tmp_path):
    one = run(make_cfg(tmp_path / "a", fail=["s01"], crash=["s02"]))
    cfg = make_cfg(tmp_path / "b", fail=["s01"], crash=["s02"])
    cfg.run.batch_size = 4
    four = run(cfg)
    for key in ("metrics", "failures", "failures_by_kind", "parse_rate"):
        assert four.metrics[key] == one.metrics[key]


def test_api_keys_never_reach_the_run_directory(tmp_path):
    cfg = make_cfg(tmp_path)
    cfg.model.api_key = "sk-secret-123"
    cfg._overrides = ["model.api_key=sk-secret-123", "run.limit=null"]
    result = run(cfg)
    assert (tmp_path / "boards" / "fake.csv").exists()
    for path in [*result.run_dir.iterdir(), tmp_path / "boards" / "fake.csv"]:
        assert "sk-secret-123" not in path.read_text(), path.name


def test_a_failing_invocation_leaves_a_finished_run_untouched(tmp_path):
    result = run(make_cfg(tmp_path))
    before = {p.name: p.read_bytes() for p in result.run_dir.iterdir()}
    broken = make_cfg(tmp_path)
    broken.dataset.root = "missing"  # not semantic: same fingerprint, same run directory
    with pytest.raises(Exception, match="missing"):
        run(broken)
    assert {p.name: p.read_bytes() for p in result.run_dir.iterdir()} == before


def test_resume_keeps_the_first_manifest_and_appends_resumes(tmp_path):
    first = run(make_cfg(tmp_path))
    manifest = json.loads((first.run_dir / "manifest.json").read_text())
    config = (first.run_dir / "config.yaml").read_text()
    run(make_cfg(tmp_path))
    again = json.loads((first.run_dir / "manifest.json").read_text())
    assert again["started_utc"] == manifest["started_utc"] and len(again["resumes"]) == 1
    assert (first.run_dir / "config.yaml").read_text() == config


def test_data_errors_are_listed_and_counted_apart(tmp_path):
    cfg = make_cfg(tmp_path)
    cfg.dataset.errors = 2
    m = run(cfg).metrics
    assert m["n"] == 6 and m["data_errors"] == 2
    assert [e["sample_id"] for e in m["data_error_samples"]] == ["bad0", "bad1"]
    board = pd.read_csv(tmp_path / "boards" / "fake.csv")
    assert board["data_errors"][0] == 2


def test_a_run_where_every_sample_failed_outside_the_model_is_not_published(tmp_path):
    cfg = make_cfg(tmp_path, crash=[f"s{k:02d}" for k in range(6)])
    cfg.run.stop_after_same_failures = 0  # run to the end (K alike crashes would stop it: test_cannot_succeed.py)
    result = run(cfg)
    assert result.leaderboard is None and "none because of the model's output" in result.not_published
    assert not (tmp_path / "boards" / "fake.csv").exists()


def test_a_run_where_the_model_never_parsed_is_still_published(tmp_path):
    result = run(make_cfg(tmp_path, fail=[f"s{k:02d}" for k in range(6)]))
    assert result.leaderboard is not None and result.metrics["parse_rate"] == 0.0


def test_a_corrupt_frame_fails_only_its_sample(tmp_path, monkeypatch):
    from PIL import Image

    import tests.fakes as fakes

    good, bad = tmp_path / "good.jpg", tmp_path / "bad.jpg"
    Image.new("RGB", (8, 8)).save(good)
    bad.write_bytes(good.read_bytes()[:40])  # truncated JPEG
    original = fakes.FakeDataset.__init__

    def with_frames(self, *a, **kw):
        original(self, *a, **kw)
        for k, s in enumerate(self.items):
            s.frames = [str(bad if k == 3 else good)]

    monkeypatch.setattr(fakes.FakeDataset, "__init__", with_frames)
    cfg = make_cfg(tmp_path)
    cfg.run.verify_frames = True
    m = run(cfg).metrics
    # a data error (docs/failures.md "Data errors: one rule"): listed apart, not in n nor failures
    assert m["failures"] == 0 and m["n"] == 5 and m["data_errors"] == 1
    assert m["data_error_samples"][0]["sample_id"] == "s03" and "bad.jpg" in m["data_error_samples"][0]["message"]
    bad.write_bytes(good.read_bytes())  # the frame is repaired: a resume predicts that sample again
    again = run(cfg)
    assert again.predicted == 1 and again.metrics["failures"] == 0 and again.metrics["data_errors"] == 0
    assert again.metrics["n"] == 6 and calls(tmp_path).count("s03") == 1


def test_a_sample_whose_frames_hold_more_pixels_than_the_limit_fails_as_data(tmp_path, monkeypatch):
    """dataset.limits.max_sample_pixels: one 8 x 8 frame listed 20 times is 1280 pixels, read from
    its header (issue 41: a small PNG listed many times); that sample fails, the others run."""
    from PIL import Image

    import tests.fakes as fakes

    frame = tmp_path / "f.png"
    Image.new("RGB", (8, 8)).save(frame)
    original = fakes.FakeDataset.__init__

    def with_frames(self, *a, **kw):
        original(self, *a, **kw)
        for k, s in enumerate(self.items):
            s.frames = [str(frame)] * (20 if k == 2 else 1)

    monkeypatch.setattr(fakes.FakeDataset, "__init__", with_frames)
    cfg = make_cfg(tmp_path)
    cfg.run.verify_frames = True
    cfg.dataset.limits = {"max_sample_pixels": 1000}
    m = run(cfg).metrics
    assert m["data_errors"] == 1 and m["n"] == 5
    (error,) = m["data_error_samples"]
    assert error["sample_id"] == "s02" and "max_sample_pixels" in error["message"] and "by frame 15 of 20" in error["message"]
    assert "s02" not in calls(tmp_path)


def test_a_limited_look_at_a_finished_run_leaves_its_results_alone(tmp_path):
    full = run(make_cfg(tmp_path))
    body = (full.run_dir / "metrics.json").read_text()
    cfg = make_cfg(tmp_path)
    cfg.run.limit = 2
    part = run(cfg)
    assert part.run_dir == full.run_dir and (full.run_dir / "metrics.json").read_text() == body
    partial = json.loads((full.run_dir / "metrics.limit2.json").read_text())
    assert partial["n"] == 2 and "run.limit=2" in partial["partial"]


def test_parse_rate_counts_only_samples_the_model_answered(tmp_path, monkeypatch):
    from PIL import Image

    import tests.fakes as fakes

    good, bad = tmp_path / "good.jpg", tmp_path / "bad.jpg"
    Image.new("RGB", (8, 8)).save(good)
    bad.write_bytes(b"not an image")
    original = fakes.FakeDataset.__init__

    def with_frames(self, *a, **kw):
        original(self, *a, **kw)
        for k, s in enumerate(self.items):
            s.frames = [str(bad if k < 2 else good)]

    monkeypatch.setattr(fakes.FakeDataset, "__init__", with_frames)
    cfg = make_cfg(tmp_path, fail=["s02"])
    cfg.run.verify_frames = True
    m = run(cfg).metrics
    assert m["failures_by_kind"] == {"parse": 1} and m["data_errors"] == 2 and m["n"] == 4
    assert m["parse_rate"] == pytest.approx(3 / 4)


def test_a_resume_predicts_again_what_failed_outside_the_model(tmp_path):
    outage = tmp_path / "server_down"
    outage.touch()
    cfg = make_cfg(tmp_path, down=["s02", "s03"], down_while=str(outage), fail=["s05"])
    first = run(cfg).metrics
    assert first["failures_by_kind"] == {"adapter": 2, "parse": 1} and len(calls(tmp_path)) == 6
    assert first["parse_rate"] == pytest.approx(3 / 4)  # s02, s03 never reached the model
    outage.unlink()  # the server is back
    second = run(cfg)
    assert second.predicted == 2 and calls(tmp_path)[6:] == ["s02", "s03"]  # the parse failure stays
    assert second.metrics["failures_by_kind"] == {"parse": 1}
    third = run(cfg)
    assert third.predicted == 0 and len(calls(tmp_path)) == 8


def test_retry_failed_empty_keeps_recorded_failures(tmp_path):
    outage = tmp_path / "server_down"
    outage.touch()
    cfg = make_cfg(tmp_path, down=["s01"], down_while=str(outage))
    cfg.run.retry_failed = []
    run(cfg)
    outage.unlink()
    second = run(cfg)
    assert second.predicted == 0 and second.metrics["failures_by_kind"] == {"adapter": 1}


def test_preflight_failure_stops_the_run_before_any_sample(tmp_path):
    from rvt_bench.core.types import AdapterError

    cfg = make_cfg(tmp_path, preflight_error="openai policy: the server at policy.base_url=http://127.0.0.1:9/v1 cannot be reached")
    with pytest.raises(AdapterError, match="policy.base_url"):
        run(cfg)
    assert calls(tmp_path) == [] and not (tmp_path / "runs").exists()  # nothing written, no empty run dir


def test_parse_rate_is_not_available_when_the_model_answered_nothing(tmp_path):
    from rvt_bench.harness.runner import format_summary

    cfg = make_cfg(tmp_path, crash=[f"s{k:02d}" for k in range(6)])
    cfg.run.stop_after_same_failures = 0  # run to the end
    result = run(cfg)
    assert result.metrics["parse_rate"] is None
    assert "parse_rate=n/a" in format_summary(result)


def test_a_failure_that_keeps_recurring_is_retried_at_most_max_attempts_times(tmp_path):
    cfg = make_cfg(tmp_path, crash=["s01"])  # a deterministic adapter bug
    for _ in range(4):
        result = run(cfg)
    assert calls(tmp_path).count("s01") == 3 and result.predicted == 0
    assert result.metrics["failures_by_kind"] == {"exception": 1}


def test_retry_failed_takes_one_kind_and_refuses_unknown_ones(tmp_path):
    from rvt_bench.core.types import RunStoreError

    outage = tmp_path / "down"
    outage.touch()
    cfg = make_cfg(tmp_path, down=["s01"], down_while=str(outage))
    run(cfg)
    outage.unlink()
    cfg.run.retry_failed = "adapter"
    assert run(cfg).predicted == 1
    cfg.run.retry_failed = ["adpter"]
    with pytest.raises(RunStoreError, match=r"unknown failure kinds \['adpter'\]"):
        run(cfg)


def test_no_preflight_when_every_sample_to_do_fails_its_frame_check(tmp_path, monkeypatch):
    import tests.fakes as fakes

    original = fakes.FakeDataset.__init__

    def unreadable(self, *a, **kw):
        original(self, *a, **kw)
        for s in self.items:
            s.frames = [str(tmp_path / "missing.jpg")]

    monkeypatch.setattr(fakes.FakeDataset, "__init__", unreadable)
    cfg = make_cfg(tmp_path, preflight_error="server down")
    cfg.run.verify_frames = True
    m = run(cfg).metrics  # rescoring a run of unreadable frames needs no backend
    assert m["n"] == 0 and m["data_errors"] == 6 and calls(tmp_path) == []


def test_where_and_how_patiently_a_server_is_reached_is_not_part_of_the_run():
    from rvt_bench.harness.manifest import fingerprint

    def cfg(**policy):
        base = {"_target_": "rvt_bench.adapters.policy.openai_compat.OpenAIPolicy", "model": "dtr1", "base_url": "http://a:8000/v1",
                "timeout_s": 300, "max_retries": 4, "api_key": None, "temperature": 0.0}
        return {"dataset": {"name": "demo", "root": "/x"}, "model": {"name": "dtr1", "policy": {**base, **policy}}}

    same = fingerprint(cfg())
    assert fingerprint(cfg(base_url="http://b:9000/v1", timeout_s=30, max_retries=0, api_key="k")) == same
    assert fingerprint(cfg(model="other")) != same and fingerprint(cfg(temperature=0.7)) != same


def test_scoring_time_is_in_the_manifest_and_metrics_json_stays_identical(tmp_path):
    cfg = make_cfg(tmp_path)
    first = run(cfg)
    body = (first.run_dir / "metrics.json").read_text()
    second = run(cfg)
    scoring = json.loads((second.run_dir / "manifest.json").read_text())["scoring"]
    assert scoring["metrics"] == "metrics.json" and scoring["seconds"] == pytest.approx(second.scoring_s, abs=1e-3)
    assert second.scoring_s >= 0 and (second.run_dir / "metrics.json").read_text() == body
    assert "scoring" not in body  # metrics.json holds no time of its own scoring


def test_a_report_that_cannot_be_built_is_one_warning_not_a_failed_run(tmp_path, monkeypatch, caplog):
    import rvt_bench.harness.report as report

    def broken(*a, **kw):
        raise RuntimeError("no renderer\nsecond line")

    monkeypatch.setattr(report, "build_report", broken)
    result = run(make_cfg(tmp_path))
    assert result.metrics["n"] == 6 and result.leaderboard is not None and result.report is None
    warnings = [r.getMessage() for r in caplog.records if "report.html not built" in r.getMessage()]
    assert len(warnings) == 1 and "RuntimeError: no renderer" in warnings[0] and "second line" not in warnings[0]


def test_a_report_is_not_built_when_run_report_is_off(tmp_path, monkeypatch):
    import rvt_bench.harness.report as report

    built = []
    monkeypatch.setattr(report, "build_report", lambda *a, **kw: built.append(a))
    cfg = make_cfg(tmp_path)
    run(cfg)
    cfg.run.report = False
    run(cfg)
    assert len(built) == 1
