"""Slurm job states for conf/hydra/launcher/slurm.yaml (hydra-submitit-launcher), read from `squeue`
where the cluster keeps no accounting.

submitit learns a job's state from `sacct`. On a cluster without accounting storage
(`AccountingStorageType=accounting_storage/none`, common on small clusters) every poll fails,
prints "Bypassing sacct error" and sacct's own "Slurm accounting storage is disabled", and a job
that ends without writing its result (cancelled with `scancel`, killed at its time limit, its node
lost) is never seen to end: the sweep waits forever. There, QueueWatcher asks `squeue`, which
lists the jobs slurmctld still holds (finished ones for MinJobAge, 300 s by default), and takes a
job it no longer lists as ended. With accounting it is submitit's own watcher, unchanged.
"""
from __future__ import annotations

import logging
import subprocess
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig
from submitit.slurm import slurm as submitit_slurm

log = logging.getLogger(__name__)

GONE = "NOT_LISTED"
"""The state QueueWatcher gives a job that squeue no longer lists: ended (submitit then reports
whatever the job left, or that it produced no output)."""

_HEADER = "JobID|State|NodeList"  # sacct's header for the columns submitit reads


def accounting_enabled(timeout_s: float = 30.0) -> bool:
    """Whether the cluster keeps job accounting (AccountingStorageType is not
    accounting_storage/none in `scontrol show config`). True when scontrol cannot tell, so the
    stock sacct watcher is kept."""
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=timeout_s).stdout
    except (OSError, subprocess.SubprocessError):
        return True
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "AccountingStorageType":
            return value.strip() not in ("accounting_storage/none", "(null)", "")
    return True


class QueueWatcher(submitit_slurm.SlurmInfoWatcher):
    """submitit's SlurmInfoWatcher, reading `squeue --me --states=all` instead of sacct when the
    cluster has no accounting (decided once, on the first poll)."""

    def __init__(self, delay_s: int = 60) -> None:
        super().__init__(delay_s=delay_s)
        self.accounting: bool | None = None

    def _make_command(self) -> list[str] | None:
        command = super()._make_command()
        if command is None:
            return None
        if self.accounting is None:
            self.accounting = accounting_enabled()
            if not self.accounting:
                log.info("the cluster keeps no job accounting: job states come from squeue")
        if self.accounting:
            return command
        return ["squeue", "--me", "--noheader", "--states=all", "--format=%i|%T|%N"]

    def read_info(self, string: bytes | str) -> dict[str, dict[str, str]]:
        if self.accounting:
            return super().read_info(string)
        text = string.decode() if isinstance(string, bytes) else string
        info = super().read_info(_HEADER + "\n" + text)
        for job_id in self._registered - self._finished:
            if job_id not in info and job_id.split("_")[0] not in info:
                info[job_id] = {"JobID": job_id, "State": GONE, "NodeList": ""}
        return info


class SlurmStates(Callback):
    """A Hydra callback (conf/hydra/launcher/slurm.yaml) that has submitit's Slurm jobs watched by
    QueueWatcher. Hydra takes launchers only from its `hydra_plugins` package, callbacks from anywhere."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # submitit keeps one watcher for all Slurm jobs, as a class attribute of SlurmJob.
        if not isinstance(submitit_slurm.SlurmJob.watcher, QueueWatcher):
            submitit_slurm.SlurmJob.watcher = QueueWatcher(delay_s=submitit_slurm.SlurmJob.watcher._delay_s)
