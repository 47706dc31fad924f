"""Runs that meet a hostile machine: two invocations on one run directory, Ctrl-C while predicting
and while scoring, a full disk, a read-only root, a judge that is down on a resume. Each stop is one
line with its own exit status (rvt_bench.harness.cli.EXIT_CODES), the traceback goes to <run_dir>/run.log,
and the same command then completes the run with the metrics.json of an uninterrupted run."""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from rvt_bench.core import masks
from rvt_bench.core.records import JudgeVerdict
from rvt_bench.harness.cli import EXIT_CODES
from rvt_bench.harness.runner import run
from rvt_bench.core.store import RunLock, read_jsonl
from rvt_bench.core.types import Prediction, RunLockedError, RunStopped
from tests.procs import children_of, running
from tests.fakes import FakeAdapter, MeanIoUProtocol, calls, make_cfg

REPO = Path(__file__).resolve().parent.parent
DRIVER = ("import sys; from omegaconf import OmegaConf; from rvt_bench.harness.cli import exit_on_known_errors; "
          "from rvt_bench.harness.runner import run; exit_on_known_errors(lambda: run(OmegaConf.load(sys.argv[1])))")


STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _reap_started():
    """A test that fails before its runner exits leaves it (and its sandbox interpreters) running:
    kill them here, so one failure does not cost the rest of the suite CPU or a hang."""
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            for pid in [proc.pid] + children_of(proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            proc.communicate()


def start(cfg, tmp: Path, name: str = "cfg.yaml", group: bool = False, **popen) -> subprocess.Popen:
    """The runner in a child process, through rvt_bench.harness.cli as run_bench.py calls it;
    group=True: in a process group of its own, as a terminal's Ctrl-C reaches it (os.killpg)."""
    path = tmp / name
    OmegaConf.save(cfg, path)
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(path)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=group, **popen)
    STARTED.append(proc)
    return proc


def wait_for(condition, timeout_s: float = 60.0) -> None:
    deadline = time.time() + timeout_s
    while not condition():
        assert time.time() < deadline, "timed out"
        time.sleep(0.02)


def last_line(stderr: str) -> str:
    lines = [ln for ln in stderr.replace("\r", "\n").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def metrics_of(run_dir: Path) -> dict:
    body = json.loads((run_dir / "metrics.json").read_text())
    body.pop("run_name"), body.pop("fingerprint")
    # Not results: measured seconds differ between any two runs, and the protocol's variants name
    # the test-only hook (SlowIoUProtocol's `started` file) that the reference run does not have.
    report = body.get("adapter_report") or {}
    report["measures"] = [m for m in report.get("measures") or [] if m["unit"] != "s"]
    body.pop("protocol_variants", None)
    return body


def reference_metrics(tmp: Path, n: int = 6) -> dict:
    """metrics.json of the same evaluation run without interruption (its own directory)."""
    cfg = make_cfg(tmp / "reference")
    cfg.dataset.n = n
    return metrics_of(run(cfg).run_dir)


# --- one owner per run directory ---------------------------------------------------------------------


class GatedAdapter(FakeAdapter):
    """FakeAdapter that, after recording a call, waits until the file `gate` exists."""

    def __init__(self, gate: str, **kw) -> None:
        super().__init__(**kw)
        self.gate = gate

    def predict(self, sample):
        pred = super().predict(sample)
        while not os.path.exists(self.gate):
            time.sleep(0.02)
        return pred


def test_a_second_invocation_meets_the_lock_naming_pid_and_host(tmp_path):
    import socket

    cfg = make_cfg(tmp_path, gate=str(tmp_path / "open"))
    cfg.model._target_ = "tests.test_corrupt_stops.GatedAdapter"
    first = start(cfg, tmp_path)
    try:
        wait_for(lambda: len(calls(tmp_path)) >= 1)  # the first holds the run, waiting at its gate
        second = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path / "cfg.yaml")], cwd=REPO,
                                capture_output=True, text=True, timeout=300)
        assert first.poll() is None  # the second did not wait for the first
    finally:
        (tmp_path / "open").touch()
    first.wait(timeout=300)
    assert second.returncode == EXIT_CODES["locked"], second.stderr
    line = last_line(second.stderr)
    assert f"PID {first.pid}" in line and socket.gethostname() in line and "Traceback" not in second.stderr
    assert first.returncode == 0, first.stderr[-2000:]
    assert sorted(calls(tmp_path)) == [f"s{k:02d}" for k in range(6)]  # every sample predicted once, by the first


def test_a_killed_runs_lock_is_taken_over(tmp_path):
    cfg = make_cfg(tmp_path, sleep_s=0.3)
    cfg.dataset.n = 8
    proc = start(cfg, tmp_path)
    wait_for(lambda: len(calls(tmp_path)) >= 2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    result = run(OmegaConf.load(tmp_path / "cfg.yaml"))  # the kernel released the flock with the process
    assert result.metrics["n"] == 8


def test_a_resume_after_concurrent_writers_warns_once(tmp_path, caplog):
    cfg = make_cfg(tmp_path)
    result = run(cfg)
    path = result.run_dir / "predictions.jsonl"
    path.write_text(path.read_text() * 3)  # what two unlocked runs used to leave: every answer twice more
    with caplog.at_level("WARNING"):
        run(cfg)
    duplicates = [r for r in caplog.records if "duplicate" in r.getMessage()]
    assert len(duplicates) == 1 and "12 duplicate answers" in duplicates[0].getMessage()


def test_shards_lock_their_own_files_and_still_merge(tmp_path):
    holder = make_cfg(tmp_path)
    holder.run.shard, holder.run.num_shards = 0, 2
    run_dir = run(holder).run_dir  # shard 0 done; its directory exists
    lock = RunLock(run_dir, "predictions.shard0of2.jsonl")
    lock.acquire()  # someone re-running shard 0 right now
    try:
        other = make_cfg(tmp_path)
        other.run.shard, other.run.num_shards = 1, 2
        result = run(other)  # shard 1 is not blocked by shard 0's lock, and completes the union
        assert result.metrics["n"] == 6
        with pytest.raises(RunLockedError, match=f"PID {os.getpid()}"):
            run(holder)
    finally:
        lock.release()


# --- Ctrl-C ----------------------------------------------------------------------------------------------


def test_ctrl_c_while_predicting_is_one_line_and_the_same_command_completes(tmp_path):
    cfg = make_cfg(tmp_path, sleep_s=0.3)
    cfg.dataset.n = 8
    proc = start(cfg, tmp_path)
    wait_for(lambda: len(calls(tmp_path)) >= 3)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_CODES["interrupted"], stderr[-2000:]
    line = last_line(stderr)
    assert line.startswith("stopped: interrupted (Ctrl-C) while predicting") and "resumes" in line, line
    assert "Traceback" not in stderr
    run_dir = next((tmp_path / "runs").glob("fake/fake/*"))
    assert "KeyboardInterrupt" in (run_dir / "run.log").read_text()
    done = run(OmegaConf.load(tmp_path / "cfg.yaml"))
    assert metrics_of(done.run_dir) == reference_metrics(tmp_path, n=8)


class SlowIoUProtocol(MeanIoUProtocol):
    """MeanIoUProtocol that takes its time and says when scoring began (a file beside the run root)."""

    def __init__(self, started: str, sleep_s: float = 0.3) -> None:
        self.started, self.sleep_s = started, sleep_s

    def score(self, sample, pred):
        Path(self.started).touch()
        time.sleep(self.sleep_s)
        return super().score(sample, pred)


def test_ctrl_c_while_scoring_keeps_every_prediction(tmp_path):
    cfg = make_cfg(tmp_path)
    cfg.dataset.protocol = {"_target_": "tests.test_corrupt_stops.SlowIoUProtocol", "started": str(tmp_path / "scoring")}
    proc = start(cfg, tmp_path)
    wait_for(lambda: (tmp_path / "scoring").exists())
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_CODES["interrupted"], stderr[-2000:]
    assert last_line(stderr).startswith("stopped: interrupted (Ctrl-C) while scoring"), stderr[-500:]
    assert "Traceback" not in stderr
    run_dir = next((tmp_path / "runs").glob("fake/fake/*"))
    assert not (run_dir / "metrics.json").exists()
    done = run(OmegaConf.load(tmp_path / "cfg.yaml"))
    assert done.predicted == 0 and len(calls(tmp_path)) == 6  # no model work on the resume
    assert metrics_of(done.run_dir) == reference_metrics(tmp_path)


# --- the disk --------------------------------------------------------------------------------------------


class BulkyAdapter(FakeAdapter):
    """FakeAdapter whose predictions carry a 3 kB trace, to fill a small disk."""

    def predict(self, sample):
        pred = super().predict(sample)
        pred.trace = "x" * 3000
        return pred


def test_a_full_disk_stops_with_one_line_and_the_run_resumes(tmp_path, monkeypatch):
    """ENOSPC simulated at the fourth prediction (a real tmpfs is below, where the machine allows it)."""
    import rvt_bench.core.store as store

    original, count = store.PredictionLog.append, {"n": 0}

    def append(self, pred):
        count["n"] += 1
        if count["n"] == 4:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
        original(self, pred)

    monkeypatch.setattr(store.PredictionLog, "append", append)
    cfg = make_cfg(tmp_path)
    with pytest.raises(RunStopped) as stop:
        run(cfg)
    assert stop.value.reason == "no_space" and "\n" not in str(stop.value)
    assert "no space left" in str(stop.value) and "3 predictions" in str(stop.value)
    monkeypatch.setattr(store.PredictionLog, "append", original)
    done = run(cfg)
    assert metrics_of(done.run_dir) == reference_metrics(tmp_path)


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


def test_a_full_tmpfs_as_run_root(tmp_path):
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "64k"):
        pytest.skip("mounting a tmpfs needs root and CAP_SYS_ADMIN")
    try:
        cfg = make_cfg(tmp_path)
        cfg.model._target_ = "tests.test_corrupt_stops.BulkyAdapter"
        cfg.dataset.n = 40  # 40 x 3 kB > 64 kB
        cfg.run.root = str(disk / "runs")
        proc = start(cfg, tmp_path)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == EXIT_CODES["no_space"], stderr[-2000:]
        assert "No space left" in last_line(stderr) or "no space left" in last_line(stderr), stderr[-500:]
        assert "Traceback" not in stderr
        subprocess.run(["mount", "-o", "remount,size=4m", str(disk)], check=True)  # space is freed
        done = run(cfg)
        assert done.metrics["n"] == 40 and done.metrics["failures"] == 0
        ref = make_cfg(tmp_path / "reference")
        ref.model._target_ = cfg.model._target_
        ref.dataset.n = 40
        assert metrics_of(done.run_dir) == metrics_of(run(ref).run_dir)
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_read_only_run_root_is_one_line(tmp_path):
    disk = tmp_path / "ro"
    if not _mount_tmpfs(disk, "1m"):
        pytest.skip("mounting a tmpfs needs root and CAP_SYS_ADMIN")
    try:
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        cfg = make_cfg(tmp_path)
        cfg.run.root = str(disk / "runs")
        proc = start(cfg, tmp_path)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == EXIT_CODES["read_only"], stderr[-2000:]
        assert "read-only" in last_line(stderr) and "Traceback" not in stderr
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.mark.parametrize("code, reason", [(errno.EROFS, "read_only"), (errno.EACCES, "permission"),
                                          (errno.ENOSPC, "no_space")])
def test_each_os_stop_has_its_reason(tmp_path, monkeypatch, code, reason):
    import rvt_bench.harness.rundir as rundir

    def refuse(*a, **kw):
        raise OSError(code, os.strerror(code), "config.yaml")

    monkeypatch.setattr(rundir, "claim_run_dir", refuse)
    with pytest.raises(RunStopped) as stop:
        run(make_cfg(tmp_path))
    assert stop.value.reason == reason and "config.yaml" in str(stop.value)


def test_a_missing_package_is_one_line(tmp_path):
    cfg = make_cfg(tmp_path)
    cfg.model._target_ = "tests.test_corrupt_stops_no_such_module.Adapter"
    proc = start(cfg, tmp_path)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_CODES["missing_package"], stderr[-2000:]
    assert "tests.test_corrupt_stops_no_such_module" in last_line(stderr) and "Traceback" not in stderr


def test_a_server_that_is_down_is_one_line_with_its_own_status(tmp_path):
    cfg = make_cfg(tmp_path)
    cfg.model._target_ = "tests.test_corrupt_stops.DownAdapter"
    proc = start(cfg, tmp_path)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_CODES["server_down"], stderr[-2000:]
    assert "cannot be reached" in last_line(stderr) and "Traceback" not in stderr


class DownAdapter(FakeAdapter):
    def preflight(self):
        from rvt_bench.core.types import ServerUnreachableError

        raise ServerUnreachableError("the server at policy.base_url=http://127.0.0.1:9/v1 cannot be reached")


# --- a resume never makes results worse; no NaN in JSON -------------------------------------------------


class JudgedIoUProtocol(MeanIoUProtocol):
    """MeanIoUProtocol whose records carry a judge verdict: 1.0, or unscored (NaN) while the file
    `down` exists (a judge server that is down)."""

    def __init__(self, down: str) -> None:
        self.down = down

    def score(self, sample, pred):
        record = super().score(sample, pred)
        if os.path.exists(self.down):
            record.judge = JudgeVerdict(None, "judge: HTTP 503 after 3 attempt(s)")
        else:
            record.judge = JudgeVerdict(1.0, "")
        return record

    def aggregate(self, records):
        out = super().aggregate(records)
        scores = [r.judge.score for r in records if r.judge.score is not None]
        out["metrics"]["judge_score"] = float(np.mean(scores)) if scores else float("nan")
        return out


class StubJudge:
    """Stands in for rvt_bench.metrics.judge.Judge: the verdicts come from JudgedIoUProtocol."""

    def __init__(self, **kw) -> None:
        pass

    def __str__(self) -> str:
        return "judge: stub"


def judged_cfg(tmp: Path):
    cfg = make_cfg(tmp)
    cfg.dataset.protocol = {"_target_": "tests.test_corrupt_stops.JudgedIoUProtocol", "down": str(tmp / "down")}
    cfg.judge = {"_target_": "tests.test_corrupt_stops.StubJudge", "max_failure_rate": 0.02}
    return cfg


def strict_json(text: str):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_a_resume_with_the_judge_down_keeps_the_last_good_results(tmp_path):
    cfg = judged_cfg(tmp_path)
    first = run(cfg)
    good = (first.run_dir / "metrics.json").read_bytes()
    board = (tmp_path / "boards" / "fake.csv").read_bytes()
    (tmp_path / "down").touch()
    again = run(cfg)
    assert (first.run_dir / "metrics.json").read_bytes() == good
    assert (tmp_path / "boards" / "fake.csv").read_bytes() == board
    assert again.kept is not None and "NOT updated" in again.kept and "judge failed on 6" in again.kept
    assert again.metrics["judge"]["n_failed"] == 0  # what the run reports is the kept file


def test_no_nan_literal_in_any_json_written(tmp_path):
    (tmp_path / "down").touch()  # every verdict fails: the judge mean is NaN
    result = run(judged_cfg(tmp_path))
    for path in result.run_dir.iterdir():
        if path.suffix in (".json", ".jsonl"):
            for line in ([path.read_text()] if path.suffix == ".json" else path.read_text().splitlines()):
                strict_json(line)
    m = strict_json((result.run_dir / "metrics.json").read_text())
    assert m["metrics"]["judge_score"] is None and "metrics.judge_score" in m["null_values"]


def test_predictions_with_nan_are_written_as_null(tmp_path):
    from rvt_bench.core.store import PredictionLog

    log = PredictionLog(tmp_path / "predictions.jsonl")
    log.append(Prediction("s", task="grounding", boxes=[[[float("nan"), 0.0, 1.0, 1.0]]], timings={"total": float("inf")}))
    log.close()
    record = strict_json((tmp_path / "predictions.jsonl").read_text())
    assert record["boxes"] == [[[None, 0.0, 1.0, 1.0]]] and record["timings"] == {"total": None}


def test_the_run_log_holds_the_traceback_of_a_stop(tmp_path, monkeypatch):
    import rvt_bench.harness.runner as runner

    first = run(make_cfg(tmp_path))

    def refuse(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device", "metrics.json")

    monkeypatch.setattr(runner, "write_json_atomic", refuse)
    with pytest.raises(RunStopped):
        run(make_cfg(tmp_path))
    text = (first.run_dir / "run.log").read_text()
    assert "Traceback" in text and "No space left on device" in text


def test_run_bench_on_a_read_only_run_root_is_one_line(tmp_path):
    """Hydra makes its job directory under run.root before the run starts: run_bench.py checks first."""
    disk = tmp_path / "ro"
    if not _mount_tmpfs(disk, "1m"):
        pytest.skip("mounting a tmpfs needs root and CAP_SYS_ADMIN")
    try:
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), f"run.root={disk / 'runs'}"], cwd=REPO,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == EXIT_CODES["read_only"], proc.stderr[-2000:]
        assert proc.stderr.strip().splitlines() == [last_line(proc.stderr)] and "read-only" in proc.stderr
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_stop_before_the_run_directory_exists_keeps_its_traceback_in_hydras_log(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "+dataset=revos",
                           f"dataset.root={tmp_path / 'nope'}", f"run.root={tmp_path / 'runs'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == EXIT_CODES["error"] and "Traceback" not in proc.stderr
    logs = list((tmp_path / "runs" / ".hydra").rglob("run_bench.log"))
    assert len(logs) == 1 and "Traceback" in logs[0].read_text()
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [".hydra"]  # no empty run directory left


# --- signals: SIGTERM (scancel, timeout, docker stop), SIGHUP (a dropped ssh), Ctrl-C at any moment ------


def lines_of(stderr: str) -> list[str]:
    """What a person sees on the terminal: non-empty lines, progress bars left out."""
    return [ln for ln in stderr.replace("\r", "\n").splitlines() if ln.strip() and "%|" not in ln]


@pytest.mark.parametrize("sig, reason, said", [(signal.SIGTERM, "terminated", "terminated (SIGTERM)"),
                                               (signal.SIGHUP, "hangup", "hung up (SIGHUP)")])
def test_sigterm_and_sighup_stop_like_ctrl_c_and_the_same_command_completes(tmp_path, sig, reason, said):
    cfg = make_cfg(tmp_path, sleep_s=0.3)
    cfg.dataset.n = 8
    proc = start(cfg, tmp_path)
    wait_for(lambda: len(calls(tmp_path)) >= 3)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_CODES[reason] == 128 + sig, stderr[-2000:]
    shown = lines_of(stderr)
    assert len(shown) == 1 and shown[0].startswith(f"stopped: {said} while predicting") and "resumes" in shown[0], shown
    run_dir = next((tmp_path / "runs").glob("fake/fake/*"))
    assert "StopSignal" in (run_dir / "run.log").read_text()  # the traceback went to the log
    done = run(OmegaConf.load(tmp_path / "cfg.yaml"))
    assert metrics_of(done.run_dir) == reference_metrics(tmp_path, n=8)


def test_a_run_started_under_nohup_keeps_going_through_a_hangup(tmp_path):
    """`nohup python run_bench.py ... &`: SIGHUP was ignored when the run started, so the user chose
    to survive a dropped ssh; the harness keeps it ignored and the run completes."""
    cfg = make_cfg(tmp_path, sleep_s=0.2)
    cfg.dataset.n = 4
    proc = start(cfg, tmp_path, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    wait_for(lambda: len(calls(tmp_path)) >= 1)
    proc.send_signal(signal.SIGHUP)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-2000:]
    assert not any(ln.startswith("stopped:") for ln in lines_of(stderr))
    run_dir = next((tmp_path / "runs").glob("fake/fake/*"))
    assert metrics_of(run_dir) == reference_metrics(tmp_path, n=4)


def test_ctrl_c_twice_is_one_line(tmp_path):
    cfg = make_cfg(tmp_path, sleep_s=0.3)
    cfg.dataset.n = 8
    proc = start(cfg, tmp_path)
    wait_for(lambda: len(calls(tmp_path)) >= 2)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # while the first one's stop unwinds
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_CODES["interrupted"], stderr[-2000:]
    shown = lines_of(stderr)
    assert len(shown) == 1 and shown[0].startswith("stopped: interrupted (Ctrl-C) while predicting"), shown


def test_ctrl_c_while_scoring_with_two_score_workers_is_one_line(tmp_path):
    cfg = make_cfg(tmp_path)
    cfg.dataset.n = 8
    cfg.run.score_workers = 2
    cfg.dataset.protocol = {"_target_": "tests.test_corrupt_stops.SlowIoUProtocol", "started": str(tmp_path / "scoring")}
    proc = start(cfg, tmp_path, group=True)
    wait_for(lambda: (tmp_path / "scoring").exists())
    os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C: the workers get it too
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_CODES["interrupted"], stderr[-2000:]
    shown = lines_of(stderr)
    assert len(shown) == 1 and shown[0].startswith("stopped: interrupted (Ctrl-C) while scoring"), shown
    cfg.run.score_workers = 1  # not part of the run's identity: the same run, scored in this process
    done = run(cfg)
    assert done.predicted == 0 and done.metrics["n"] == 8


class SandboxedAdapter(FakeAdapter):
    """FakeAdapter whose every sample runs model-written code that never ends in the sandbox
    (isolation "none": no bwrap needed), after writing the file `running`."""

    def __init__(self, running: str, **kw) -> None:
        super().__init__(**kw)
        self.running = running

    def predict(self, sample):
        from rvt_bench.adapters.sandbox.runner import SandboxSettings, get_pool
        from rvt_bench.adapters.twin.builder import build_twin
        from rvt_bench.adapters.twin.oracle import OraclePerception
        from tests.test_twin_oracle import ALL_TOOLS, synthetic_sample

        twin = build_twin(synthetic_sample(), ALL_TOOLS, OraclePerception())
        session = get_pool(SandboxSettings(isolation="none", timeout_s=120.0)).session()
        try:
            Path(self.running).write_text(str(os.getpid()))
            session.execute("import time\nwhile True:\n    time.sleep(1)", twin.to_code_payload())
        finally:
            session.close()  # the adapter's own close path, as DT-R1's
        return super().predict(sample)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_model_code_runs_in_the_sandbox_leaves_no_process_or_cgroup(tmp_path, sig):
    """What `timeout`, `scancel` and a dropped ssh do to a DT-R1 run: one line, and the sandbox's
    interpreters (the running one and the warm pool) and their cgroups are gone with the harness
    (before, SIGTERM killed the harness outright and left them running)."""
    from rvt_bench.adapters.sandbox import cgroup

    cfg = make_cfg(tmp_path, running=str(tmp_path / "running"))
    cfg.model._target_ = "tests.test_corrupt_stops.SandboxedAdapter"
    proc = start(cfg, tmp_path)
    wait_for(lambda: (tmp_path / "running").exists())
    time.sleep(0.5)  # the code is running
    sandboxes = children_of(proc.pid)
    assert running(sandboxes), "no sandbox process found"
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, stderr[-2000:]
    shown = lines_of(stderr)
    assert len(shown) == 1 and shown[0].startswith("stopped: ") and "while predicting" in shown[0], shown
    deadline = time.monotonic() + 5
    while running(sandboxes) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running(sandboxes) == []
    layout = cgroup._layout()
    left = [d for base in (layout[1].values() if layout else []) for d in base.glob(f"{cgroup.PREFIX}{proc.pid}-*")]
    assert left == []


def test_ctrl_c_while_the_command_line_imports_is_one_line(tmp_path):
    """run_bench.py's imports take seconds (Hydra, numpy, the adapters): a Ctrl-C there is one line."""
    proc = subprocess.Popen([sys.executable, str(REPO / "run_bench.py"), f"run.root={tmp_path / 'runs'}"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # past the interpreter's own start-up (~0.1 s), inside our imports or Hydra's composition
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_CODES["interrupted"], stderr[-2000:]
    shown = lines_of(stderr)
    assert len(shown) == 1 and shown[0].startswith("stopped: interrupted (Ctrl-C)") and "Traceback" not in stderr, shown


# --- config mistakes: one line, exit status 2, before any work ---------------------------------------


@pytest.mark.parametrize("args, line", [
    (["run.limit=0"], "error: ConfigError: run.limit=0 must be >= 1 and <= 1000000000"),
    (["run.limit=-3"], "error: ConfigError: run.limit=-3 must be >= 1"),
    (["run.shard=5", "run.num_shards=2"], "error: ConfigError: run.shard=5 must be in [0, run.num_shards=2)"),
    (["model.max_rounds=-1"], "error: ConfigError: model.max_rounds=-1 must be >= 1 and <= 1000"),
    (["model.sandbox.timeout_s=inf"], "error: ConfigError: model.sandbox.timeout_s=inf must be a finite number"),
    (["run.fial_fast=true"], "error: run.fial_fast is not a setting; did you mean run.fail_fast?"),
    (["+datset=revos"], "error: 'datset' is not a config group; did you mean +dataset=revos?"),
    (["dataset.limits.max_json_depth=0"], "error: ConfigError: dataset.limits.max_json_depth=0 must be > 0"),
    # run.name is one directory under run.root/<dataset>/<model>/ (adversary: '../..' put the run outside run.root)
    (["run.name='../../../escaped'"], "error: ConfigError: run.name='../../../escaped' has a path separator or '.'/'..'"),
    (["run.name=a/b"], "error: ConfigError: run.name='a/b' has a path separator"),
    (["run.name=.."], "error: ConfigError: run.name='..' has a path separator"),
    (["run.name='bad\u202ename'"], "error: ConfigError: run.name='bad\\u202ename' has control or invisible characters"),
    (["run.name=" + "n" * 201], "error: ConfigError: run.name='" + "n" * 80 + "' has 201 characters (at most 200)"),
])
def test_a_config_mistake_is_one_line_with_status_2(tmp_path, args, line):
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), *args, f"run.root={tmp_path / 'runs'}"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == EXIT_CODES["error"], proc.stderr[-2000:]
    shown = lines_of(proc.stderr)
    assert len(shown) == 1 and shown[0].startswith(line), shown
    assert not list((tmp_path / "runs").rglob("config.yaml"))


def test_a_mistyped_option_of_a_group_names_the_closest_one(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "+dataset=revoss", f"run.root={tmp_path / 'runs'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == EXIT_CODES["error"], proc.stderr[-2000:]
    shown = lines_of(proc.stderr)
    assert len(shown) == 1 and "Could not find 'dataset/revoss'" in shown[0], shown
    assert shown[0].endswith("did you mean +dataset=revos?"), shown


def test_an_unquoted_non_ascii_path_is_read_as_typed(tmp_path):
    root = tmp_path / "ünï runs"
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "--cfg", "job", f"run.root={root}"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"root: {root}" in proc.stdout


def test_a_value_hydra_cannot_read_says_how_to_quote(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "run.name=a[b", f"run.root={tmp_path}"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == EXIT_CODES["error"]
    assert lines_of(proc.stderr) == ["error: cannot read the override 'run.name=a[b' (mismatched input '[' expecting "
                                     "<EOF>); quote a value that holds spaces, non-ASCII or special characters: run.name='...'"]


# --- what the run writes: atomically, with the umask's permissions -----------------------------------


def reasonseg_cfg(tmp: Path):
    """A run on the ReasonSeg fixture of tests/test_corrupt_inputs.py (real frames: report.html renders)."""
    from tests.test_corrupt_inputs import write_reasonseg

    cfg = make_cfg(tmp)
    root = tmp / "ReasonSeg" if (tmp / "ReasonSeg").exists() else write_reasonseg(tmp / "ReasonSeg")
    cfg.dataset = {"name": "reasonseg", "_target_": "rvt_bench.loaders.reasonseg.ReasonSegDataset",
                   "root": str(root), "split": "val",
                   "protocol": {"_target_": "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol"}}
    cfg.model = {"name": "reader", "_target_": "tests.test_corrupt_inputs.ReadingAdapter"}
    return cfg


def test_results_and_leaderboards_are_readable_by_others_under_umask_022(tmp_path):
    cfg = reasonseg_cfg(tmp_path)
    proc = subprocess.run([sys.executable, "-c", f"import os; os.umask(0o022); {DRIVER}", str(_saved(cfg, tmp_path))],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    written = [p for p in (tmp_path / "runs").rglob("*") if not p.name.startswith(".") or p.suffix == ".lock"]
    written += list((tmp_path / "boards").glob("*.csv"))
    names = {p.name for p in written}
    assert {"metrics.json", "scores.jsonl", "samples.jsonl", "manifest.json", "config.yaml", "predictions.jsonl",
            "report.html", "report_images", "00000_a.png", "reasonseg.csv"} <= names, names
    modes = {str(p.relative_to(tmp_path)): oct(p.stat().st_mode & 0o777) for p in written}
    assert {k: v for k, v in modes.items() if v != (oct(0o755) if Path(tmp_path / k).is_dir() else oct(0o644))} == {}


def _saved(cfg, tmp: Path) -> Path:
    OmegaConf.save(cfg, tmp / "cfg.yaml")
    return tmp / "cfg.yaml"


def test_a_report_that_cannot_be_written_leaves_the_previous_one_and_says_so(tmp_path, monkeypatch, caplog):
    """A full disk while report_images/ is written: report.html and its pictures stay as they were
    (no half-written page), one warning line says so, and the results are complete."""
    first = run(reasonseg_cfg(tmp_path))
    page = (first.run_dir / "report.html").read_bytes()
    pictures = {p.name: p.read_bytes() for p in (first.run_dir / "report_images").iterdir()}
    written = {"n": 0}
    original = Path.write_bytes

    def full_disk(self, data):
        if self.suffix == ".png":
            written["n"] += 1
            if written["n"] == 3:
                raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return original(self, data)

    monkeypatch.setattr(Path, "write_bytes", full_disk)
    with caplog.at_level("WARNING"):
        again = run(reasonseg_cfg(tmp_path))  # a resume: scores again, rebuilds the report
    assert again.report is None and again.metrics["n"] == 3
    warnings = [r.getMessage() for r in caplog.records if "report.html" in r.getMessage()]
    assert len(warnings) == 1 and "No space left" in warnings[0] and "previous report.html is kept" in warnings[0]
    assert (first.run_dir / "report.html").read_bytes() == page
    assert {p.name: p.read_bytes() for p in (first.run_dir / "report_images").iterdir()} == pictures
    assert not [p for p in first.run_dir.iterdir() if p.name.startswith(".report")]  # no temporary folder left


# --- names from data reach the console and run.log escaped --------------------------------------------


def test_a_file_name_with_a_newline_and_an_ansi_escape_cannot_forge_lines(tmp_path):
    from tests.test_corrupt_inputs import write_reasonseg

    root = write_reasonseg(tmp_path / "ReasonSeg")
    evil = "b\x1b[2J\nFAKE 2026-01-01 INFO all good"
    (root / "val" / "b.json").rename(root / "val" / f"{evil}.json")
    (root / "val" / "b.jpg").rename(root / "val" / f"{evil}.jpg")
    (root / "val" / f"{evil}.json").write_text("{not json")
    cfg = make_cfg(tmp_path)
    cfg.dataset = {"name": "reasonseg", "_target_": "rvt_bench.loaders.reasonseg.ReasonSegDataset", "root": str(root),
                   "split": "val", "protocol": {"_target_": "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol"}}
    cfg.model._target_ = "tests.test_corrupt_inputs.ReadingAdapter"
    cfg.model = {"name": "reader", "_target_": "tests.test_corrupt_inputs.ReadingAdapter"}
    result = run(cfg)
    assert [e["sample_id"] for e in result.metrics["data_error_samples"]] == [evil]  # the record keeps the name
    log = (result.run_dir / "run.log").read_text()
    assert "\x1b" not in log and not any(line.startswith("FAKE") for line in log.splitlines())
    assert "b\\x1b[2J\\nFAKE" in log
    for p in (root / "val").glob("*.json"):  # every sample bad now: the stop line quotes the name
        p.write_text("{not json")
    proc = start(cfg, tmp_path, name="all_bad.yaml")
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_CODES["error"] and "\x1b" not in stderr
    assert not any(line.startswith("FAKE") for line in stderr.splitlines()) and "b\\x1b[2J\\nFAKE" in stderr


@pytest.mark.parametrize("in_flight, said", [
    (["s1"], "; the sample in flight (s1) was not waited for; "),
    (["s1", "s2"], "; the 2 samples in flight (s1; s2) were not waited for; "),  # a batch of two said "the sample"
    ([], " are saved in "),
    (["a\nb"], "; the sample in flight (a\\nb) was not waited for; "),
    # ids with ", " stay apart; a batch of many names three, each cut at 40 characters (adversary: 1 KB lines)
    (["a, b", "c"], "; the 2 samples in flight (a, b; c) were not waited for; "),
    ([f"{k}" * 50 for k in range(5)], "; the 5 samples in flight (" + "; ".join([f"{k}" * 37 + "..." for k in range(3)])
     + "; +2 more) were not waited for; ")])
def test_the_stop_line_counts_the_samples_in_flight(in_flight, said):
    from rvt_bench.harness.stops import Progress, stop_for

    stop = stop_for(KeyboardInterrupt(), Progress(Path("runs/x"), "predicting", 3, in_flight), "m")
    line = str(stop)
    assert said in line and line.count("\n") == 0 and line.endswith("the same command resumes from there")
    assert ("in flight" in line) == bool(in_flight)
