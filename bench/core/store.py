"""Run directory files: append-only predictions with resume, and atomically written derived files.

Layout of one run directory (docs/architecture.md "Run directory"):
    config.yaml, manifest.json       what ran, written at start
    predictions[.shardIofN].jsonl    one Prediction per line, appended and fsynced per sample
    scores.jsonl, metrics.json       derived by scoring; rewritten atomically (write + rename)
    .<file>.lock, .<file>.owner      RunLock: one invocation at a time per predictions file
    run.log                          diagnostics and full tracebacks of every invocation, appended
No JSON file holds NaN or Infinity (``dumps``: null instead), and no file holds a secret the
process knows (rvt_bench.core.secrets).
A predictions file is never rewritten in place. The only repair is cutting a torn last line (a
record cut short by a kill), which is then redone.
"""
from __future__ import annotations

import fcntl
import glob
import json
import logging
import math
import os
import shutil
import socket
import stat
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from rvt_bench.core import files
from rvt_bench.core.secrets import scrub
from rvt_bench.core.types import DatasetFormatError, Prediction, RunLockedError, RunStoreError

log = logging.getLogger(__name__)

PREDICTIONS_GLOB = "predictions*.jsonl"


def predictions_filename(shard: int, num_shards: int) -> str:
    """predictions.jsonl, or predictions.shard{I}of{N}.jsonl when the run is sharded."""
    return "predictions.jsonl" if num_shards == 1 else f"predictions.shard{shard}of{num_shards}.jsonl"


class PredictionLog:
    """Append-only predictions.jsonl of one run (or one shard of it).

    Opening it cuts a torn last line (no trailing newline or invalid JSON) so that the next record
    starts on a clean line; complete records are never touched.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_tail()
        self._fh = None

    def _repair_tail(self) -> None:
        if not self.path.exists():
            return
        if not stat.S_ISREG(os.stat(self.path).st_mode):
            raise RunStoreError(f"{self.path} is not a regular file; refused (move it away to start this run afresh)")
        with open(self.path, "rb+") as fh:
            size = fh.seek(0, os.SEEK_END)
            keep = size
            while keep > 0:  # back from the end to the last newline, in bounded pieces
                start = max(0, keep - (1 << 16))
                fh.seek(start)
                found = fh.read(keep - start).rfind(b"\n")
                if found >= 0:
                    keep = start + found + 1
                    break
                keep = start
            if keep < size:  # no newline after the last record: it was being written when the run died
                log.warning("%s: discarding a torn last line (%d bytes); that sample will be redone", self.path, size - keep)
                fh.truncate(keep)

    def append(self, pred: Prediction) -> None:
        """Write one record and make it durable before returning (flush + fsync)."""
        if self._fh is None:
            self._fh = open(self.path, "a", encoding="utf-8")
        line = dumps(pred.to_dict(), ensure_ascii=False, separators=(",", ":"))
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in model or code text: JSON's \u escapes carry it
            line = dumps(pred.to_dict(), ensure_ascii=True, separators=(",", ":"))
        self._fh.write(scrub(line) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _standing(pred: Prediction) -> int:
    """2: an answer; 1: the model's output that did not parse; 0: a failure outside the model."""
    if pred.error is None:
        return 2
    return 1 if pred.error.get("kind") == "parse" else 0


def read_predictions(paths: Iterable[str | Path], attempts: dict[str, int] | None = None) -> dict[str, Prediction]:
    """Finished predictions by sample id, from one or several (shard) files.

    A line that is not valid JSON is skipped with a warning only when it is the last line of its file
    (torn write); anywhere else it raises RunStoreError naming the file and line. When an id appears
    more than once (a resume retried a failure, see run.retry_failed, possibly from another shard
    file), the record that says most about the model wins: an answer over a parse failure over a
    failure outside the model; between failures of the same standing the one read last; between
    two answers the first (a later one can only come from a concurrent writer), with a warning.
    attempts: when given, filled with the number of records per sample id.
    """
    out: dict[str, Prediction] = {}
    duplicates: list[str] = []
    for path in sorted(Path(p) for p in paths):
        for lineno, line, torn in _records_of(path):
            try:
                if line is None:
                    raise files.FileLimitError(f"longer than {files.limits().max_line_mb:g} MB (dataset.limits.max_line_mb)")
                record = files.loads(line, f"{path}:{lineno}", duplicates="last")
            except DatasetFormatError as exc:
                if torn:
                    log.warning("%s:%d: torn last line ignored", path, lineno)
                    continue
                raise RunStoreError(f"{path}:{lineno}: not a JSON prediction record ({exc}); remove or repair that "
                                    f"line (its sample is then predicted again)") from None
            pred = Prediction.from_dict(record)
            if attempts is not None:
                attempts[pred.sample_id] = attempts.get(pred.sample_id, 0) + 1
            old = out.get(pred.sample_id)
            if old is not None and old.error is not None:
                if _standing(pred) >= _standing(old):
                    out[pred.sample_id] = pred  # a retry of a failed sample
                continue
            if old is not None:
                duplicates.append(f"{path.name}:{lineno} ({pred.sample_id})")
                continue
            out[pred.sample_id] = pred
    if duplicates:  # one line, not one per record: two writers on one run can leave thousands
        log.warning("%d duplicate answers ignored (the first answer of each sample kept; two runs wrote to "
                    "this run directory at once?), first: %s", len(duplicates), ", ".join(duplicates[:3]))
    return out


def _records_of(path: Path) -> Iterator[tuple[int, str | None, bool]]:
    """(line number, text or None when over the line limit, torn) per non-blank line of a JSONL run
    file read through rvt_bench.core.files (a FIFO or device refused: RunStoreError naming it); torn =
    the file's last line, without its newline (a record cut short by a kill)."""
    try:
        for lineno, raw in files.lines(path, "run file"):
            if raw is None:
                yield lineno, None, False
            elif raw.strip():
                yield lineno, raw.decode("utf-8", errors="replace").rstrip("\n"), not raw.endswith(b"\n")
    except DatasetFormatError as exc:
        raise RunStoreError(str(exc)) from None


def read_run_json(path: str | Path) -> Any:
    """A JSON file the harness wrote (manifest.json, metrics.json...), read through
    rvt_bench.core.files (regular file, bounded size and depth); RunStoreError naming it otherwise."""
    try:
        return files.read_json(path, what="run file", duplicates="last")
    except DatasetFormatError as exc:
        raise RunStoreError(str(exc)) from None


def prediction_files(run_dir: str | Path) -> list[Path]:
    return sorted(Path(run_dir).glob(PREDICTIONS_GLOB))


def finite(obj: Any, where: str = "", nulls: dict[str, str] | None = None) -> Any:
    """``obj`` with every NaN / Infinity float replaced by None (JSON has no such numbers; strict
    parsers such as JavaScript's JSON.parse reject the literals Python would write). When ``nulls``
    is given, each replaced value's dotted path (``where`` as prefix) is added to it with the reason."""
    if isinstance(obj, float) and not math.isfinite(obj):
        if nulls is not None:
            nulls[where] = "not computable (no value to average: nothing scored, or every verdict failed)" \
                if math.isnan(obj) else f"was {obj} (a division by zero)"
        return None
    if isinstance(obj, dict):
        return {k: finite(v, f"{where}.{k}" if where else str(k), nulls) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v, f"{where}[{i}]", nulls) for i, v in enumerate(obj)]
    return obj


def dumps(obj: Any, **kw: Any) -> str:
    """json.dumps of ``finite(obj)`` with allow_nan=False: every JSON file rvt-bench writes goes
    through here, so none holds a NaN or Infinity literal."""
    return json.dumps(finite(obj), allow_nan=False, **kw)


def write_json_atomic(path: str | Path, obj) -> None:
    """Write JSON via a temporary file and rename, so a reader never sees a half-written file.
    Non-finite floats are written as null (``dumps``)."""
    write_atomic(path, dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def write_jsonl_atomic(path: str | Path, records: Iterable[dict]) -> None:
    write_atomic(path, "".join(dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in records))


# --- one owner per run file ---------------------------------------------------------------------


class RunLock:
    """An exclusive lock on one run directory's writable files (``name``: e.g. the predictions file
    a shard appends to), held from before the run reads its predictions until it returns.

    The lock is ``filelock.FileLock`` on ``<run_dir>/.<name>.lock`` (flock(2) on Unix: the kernel
    releases it when the holder dies, so the lock of a killed run is taken over by the next
    invocation without any cleanup). A sidecar ``<run_dir>/.<name>.owner`` says who holds it (pid,
    host, start time, command) for the message the next invocation prints. acquire() raises
    RunLockedError naming the holder when another live process holds it."""

    def __init__(self, run_dir: str | Path, name: str) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / f".{name}.lock"
        self.owner_path = self.run_dir / f".{name}.owner"
        self._lock = None

    def acquire(self) -> None:
        from filelock import FileLock, Timeout

        self.run_dir.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.path), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise RunLockedError(f"{self.run_dir} is in use by {self.holder()}: wait for that run to end or stop it "
                                 f"(lock {self.path.name}; a killed run's lock is released by itself)") from None
        self._lock = lock
        owner = {"pid": os.getpid(), "host": socket.gethostname(),
                 "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "argv": sys.argv}
        write_atomic(self.owner_path, json.dumps(owner) + "\n")

    def holder(self) -> str:
        """'PID <pid> on host <host> (since <time>)' from the sidecar, or a plain description."""
        try:
            owner = read_run_json(self.owner_path)
            return f"PID {owner['pid']} on host {owner['host']} (since {owner['started_utc']})"
        except (RunStoreError, KeyError, TypeError):
            return "another process (its PID and host are not recorded yet)"

    def release(self) -> None:
        if self._lock is not None:
            self.owner_path.unlink(missing_ok=True)
            self._lock.release()
            self._lock = None

    def __enter__(self) -> "RunLock":
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def read_jsonl(path: str | Path) -> Iterator[dict]:
    """The records of a JSONL file the harness wrote (scores.jsonl, samples.jsonl), read through
    rvt_bench.core.files; RunStoreError naming the file and line for one it cannot use."""
    for lineno, line, _ in _records_of(Path(path)):
        try:
            if line is None:
                raise files.FileLimitError(f"longer than {files.limits().max_line_mb:g} MB")
            yield files.loads(line, f"{path}:{lineno}", duplicates="last")
        except DatasetFormatError as exc:
            raise RunStoreError(f"{path}:{lineno}: not a usable record ({exc})") from None


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write a whole file so that readers see either the old file or the complete new one: a unique
    temporary file beside it (safe with concurrent writers, threads or processes; the last rename
    wins), flushed and fsynced, then os.replace. The file gets the permissions a plain open() would
    give it (0666 minus the umask: 0644 under umask 022), not mkstemp's 0600, so colleagues on a
    shared cluster can read results and leaderboards. The temporary file is removed on any error.
    Text is written without the secrets this process knows (rvt_bench.core.secrets.scrub)."""
    path = Path(path)
    if isinstance(data, str):
        data = scrub(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:32]}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~umask())
        with os.fdopen(fd, "wb") as fh:
            # a lone surrogate (rvt_bench.core.codec) is written as its escape: in a JSON string that
            # is the same character back, and the file is written instead of a UnicodeEncodeError
            fh.write(data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def atomic_folder(path: str | Path) -> Iterator[Path]:
    """A fresh folder beside `path` for the block to fill (report_images/); when the block ends
    without error it takes `path`'s place (the old folder renamed away, the new one renamed in, the
    old one removed), so a reader sees the old folder or the complete new one. On any error (a
    full disk) the new folder is removed and `path` is left as it was. Permissions as `write_atomic`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # one writer at a time (flock on the parent folder itself: no lock file is left): any .new /
    # .old folder found under the lock is a dead writer's leftover (killed mid-way) and is removed
    lock = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for leftover in path.parent.glob(f".{glob.escape(path.name[:32])}.*"):
            if leftover.is_dir() and leftover.name.endswith((".new", ".old")):
                shutil.rmtree(leftover, ignore_errors=True)
        with _replace_folder(path) as fresh:
            yield fresh
    finally:
        os.close(lock)  # releases the flock


@contextmanager
def _replace_folder(path: Path) -> Iterator[Path]:
    fresh = Path(tempfile.mkdtemp(prefix=f".{path.name[:32]}.", suffix=".new", dir=path.parent))
    try:
        os.chmod(fresh, 0o777 & ~umask())
        yield fresh
        old = None
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name[:32]}.", suffix=".old", dir=path.parent))
            os.replace(path, old / path.name)
        os.replace(fresh, path)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def umask() -> int:
    """The process's umask, read without changing it (Linux: /proc/self/status); elsewhere set and
    restored at once."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
