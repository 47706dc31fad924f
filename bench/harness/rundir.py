"""A run directory: its identity (`runs/<dataset>/<model>/<run_name>/`, run_name defaulting to the
config's fingerprint), its ownership (one invocation at a time holds a rvt_bench.core.store.RunLock on the
files it writes, and a failed start leaves nothing behind), its claim (config.yaml and
manifest.json; a directory of another configuration is refused) and the names of its results
files. Layout: docs/architecture.md "Run directory".
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from omegaconf import DictConfig, OmegaConf

from rvt_bench.core import files
from rvt_bench.core.printable import PRINTABLE_ARGS
from rvt_bench.core.store import RunLock, predictions_filename, read_run_json, write_atomic, write_json_atomic
from rvt_bench.core.types import ConfigError, DatasetFormatError, RunStoreError
from rvt_bench.harness import manifest as manifest_mod
from rvt_bench.leaderboards.row import run_sandbox

log = logging.getLogger(__name__)

RUN_LOG = "run.log"
CONFIG = "config.yaml"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class RunIdentity:
    """Where a run's files live and which part of the samples this invocation owns.

    fingerprint: manifest.fingerprint of the resolved config and the adapter's own fingerprint.
    run_dir:     <run.root>/<dataset>/<model>/<run_name> (model: manifest.model_key, not the display name).
    shard, num_shards: this invocation predicts samples[shard::num_shards].
    """

    fingerprint: str
    run_dir: Path
    run_name: str
    shard: int
    num_shards: int

    @property
    def predictions_path(self) -> Path:
        return self.run_dir / predictions_filename(self.shard, self.num_shards)


def identify(cfg: DictConfig, resolved: dict[str, Any], adapter_fingerprint: dict | None) -> RunIdentity:
    """The run's identity from the composed config; raises ConfigError on a shard outside
    [0, run.num_shards) (checked before, with every range: rvt_bench.harness.config.check_ranges)."""
    fp = manifest_mod.fingerprint(resolved, adapter_fingerprint)
    run_name = cfg.run.name or fp
    run_dir = Path(cfg.run.root) / resolved["dataset"]["name"] / manifest_mod.model_key(resolved["model"]) / run_name
    shard, num_shards = int(cfg.run.shard), int(cfg.run.num_shards)
    if not 0 <= shard < num_shards:
        raise ConfigError(f"run.shard={shard} must be in [0, run.num_shards={num_shards})")
    return RunIdentity(fp, run_dir, run_name, shard, num_shards)


@contextmanager
def owned(run_dir: Path, lock_name: str) -> Iterator[None]:
    """Hold the lock on `run_dir`'s `lock_name` file and send INFO+ log records to run.log while
    the block runs. The lock comes first, so that a second invocation on the same files stops at
    once (RunLockedError); a run directory created here and left without config.yaml (the block
    failed before claiming it) is removed again, so a failed start leaves nothing behind."""
    created = _missing_dirs(run_dir)
    lock = RunLock(run_dir, lock_name)
    lock.acquire()
    claimed = False
    handler = _attach_run_log(run_dir)
    try:
        yield
        claimed = True
    except BaseException:
        claimed = (run_dir / CONFIG).exists()
        raise
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
        lock.release()
        if not claimed:
            _remove_unclaimed(run_dir, created)


def _missing_dirs(path: Path) -> list[Path]:
    """`path` and those of its parents that do not exist yet, deepest first."""
    out = []
    while not path.exists() and path != path.parent:
        out.append(path)
        path = path.parent
    return out


def _remove_unclaimed(run_dir: Path, created: list[Path]) -> None:
    """Remove the lock files and the directories an invocation created before failing, so that a
    failed start leaves nothing behind (an empty run dir would look like a run)."""
    for name in list(run_dir.glob(".*.lock")) + list(run_dir.glob(".*.owner")) + [run_dir / RUN_LOG]:
        if created and name.exists():
            name.unlink(missing_ok=True)
    for d in created:
        try:
            d.rmdir()
        except OSError:
            break


class _QuietFileHandler(logging.FileHandler):
    """A log file that, when the disk refuses it (full, read-only), drops records silently: the
    stop is reported once by the runner, not as a logging traceback per record."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        pass


def _attach_run_log(run_dir: Path) -> logging.Handler:
    """Send the root logger's INFO+ records to <run_dir>/run.log while the run holds its lock."""
    handler = _QuietFileHandler(run_dir / RUN_LOG, encoding="utf-8", delay=True)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(PRINTABLE_ARGS)  # a name from data cannot forge a line of run.log
    logging.getLogger().addHandler(handler)
    return handler


def refuse_other_config(run_dir: Path, fp: str) -> None:
    """Raise RunStoreError when `run_dir` already holds a run of another fingerprint."""
    cfg_path = run_dir / CONFIG
    if cfg_path.exists():
        old_fp = (load_config(cfg_path) or {}).get("_fingerprint")
        if old_fp != fp:
            raise RunStoreError(
                f"{run_dir} holds a run of another configuration (fingerprint {old_fp}, this one {fp}); "
                f"choose another run.name or remove that directory")


def claim_run_dir(run_dir: Path, cfg: DictConfig, fp: str, sandbox: str | None = None) -> None:
    """Write config.yaml and manifest.json for a new run; for a resumed one keep both and append
    this invocation to the manifest's `resumes` (warning when the code changed in between).
    sandbox: how this invocation runs model-written code (Adapter.code_isolation), recorded as
    the manifest's (or the resume's) "sandbox" when the model runs code.
    Refuses (RunStoreError) a run name that already holds another configuration."""
    cfg_path, manifest_path = run_dir / CONFIG, run_dir / MANIFEST
    body = manifest_mod.redact(OmegaConf.to_container(cfg, resolve=True))  # no api keys on disk
    body["_fingerprint"] = fp
    now = manifest_mod.manifest(body, fp)
    if sandbox:
        now["sandbox"] = sandbox
    if cfg_path.exists():
        refuse_other_config(run_dir, fp)
        previous = load_config(cfg_path)
        old_root = ((previous or {}).get("dataset") or {}).get("root")
        new_root = (body.get("dataset") or {}).get("root")
        if old_root != new_root:
            log.warning("resuming %s with dataset.root=%s; its predictions so far were made on %s (the root is "
                        "not part of the run's identity: use another run.name for a different copy of the data)",
                        run_dir, new_root, old_root)
        if manifest_path.exists():
            first = read_run_json(manifest_path)
            if first.get("git_sha") != now["git_sha"]:
                log.warning("resuming %s with code %s; its first predictions were made with %s",
                            run_dir, now["git_sha"], first.get("git_sha"))
            resume = {**{k: now[k] for k in ("started_utc", "git_sha", "host", "argv", "sandbox") if k in now},
                      "dataset_root": new_root}
            first["resumes"] = [*first.get("resumes", []), resume]
            write_json_atomic(manifest_path, first)
            return
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(cfg_path, OmegaConf.to_yaml(OmegaConf.create(body)))
    write_json_atomic(manifest_path, now)


def sandbox_of(run_dir: Path) -> str:
    """How model-written code ran over every invocation of a run (manifest.json): "none" when any
    ran it unsandboxed, "bwrap", or "" when the model runs none (rvt_bench.leaderboards.row.run_sandbox)."""
    try:
        return run_sandbox(read_run_json(run_dir / MANIFEST))
    except (OSError, ValueError):
        return ""


def note_scoring(run_dir: Path, seconds: float, metrics_name: str) -> None:
    """Record the latest scoring's wall time in manifest.json under "scoring": {"seconds",
    "finished_utc", "metrics"} (the file it wrote). Timing lives in the manifest, not in
    metrics.json, so that scoring again writes a byte-identical metrics.json."""
    path = run_dir / MANIFEST
    body = read_run_json(path) if path.exists() else {}
    body["scoring"] = {"seconds": round(float(seconds), 3),
                       "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()), "metrics": metrics_name}
    write_json_atomic(path, body)


def note_prediction(run_dir: Path, seconds: float, samples: int) -> None:
    """Record this invocation's prediction wall time in manifest.json under "prediction":
    {"seconds", "samples" (predicted by this invocation), "finished_utc"}: the wall clock beside the
    per-request seconds the model's report sums (which overlap when requests run concurrently)."""
    path = run_dir / MANIFEST
    body = read_run_json(path) if path.exists() else {}
    body["prediction"] = {"seconds": round(float(seconds), 3), "samples": int(samples),
                          "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())}
    write_json_atomic(path, body)


def note_data_source(run_dir: Path, source: dict[str, Any]) -> None:
    """Record where the data came from in manifest.json under "data_source" (a hub copy:
    rvt_bench.loaders.hub.DataSource: id, revision, format, official, differences)."""
    path = run_dir / MANIFEST
    if not path.exists():
        return
    body = read_run_json(path)
    if body.get("data_source") != source:
        body["data_source"] = source
        write_json_atomic(path, body)


def load_config(path: Path) -> Any:
    """A run's config.yaml as plain containers, unresolved, read through rvt_bench.core.files (a
    regular file of bounded size); RunStoreError naming it when it cannot be read or parsed."""
    import io

    import yaml
    from omegaconf.errors import OmegaConfBaseException

    try:
        return OmegaConf.to_container(OmegaConf.load(io.BytesIO(files.read_data(path, "run file"))), resolve=False)
    except (DatasetFormatError, RecursionError, ValueError, yaml.YAMLError, OmegaConfBaseException) as exc:
        raise RunStoreError(f"{path} cannot be read as the run's config: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                            f"; remove the run directory or choose another run.name") from None


def derived_name(name: str, limit: Any) -> str:
    """scores.jsonl / metrics.json, or scores.limit3.jsonl / metrics.limit3.json for a run.limit
    run, so that a partial look never overwrites the full run's results."""
    if limit is None:
        return name
    stem, ext = name.split(".", 1)
    return f"{stem}.limit{int(limit)}.{ext}"
