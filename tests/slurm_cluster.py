"""A real single-node Slurm cluster for tests: munged, slurmctld and slurmd from Debian's
`slurm-wlm` and `munge` packages (.ci/run installs them), each a foreground process of ours, with a
munge key, a slurm.conf, state and logs written under one directory. No job accounting (as on many
small clusters), no cgroups, no GPUs; the node has this machine's CPUs and memory.

Clients (sbatch, squeue, scancel, submitit) find the cluster through SLURM_CONF (`env()`).
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "sinfo")
NODE = "rvtnode"


def which(program: str) -> str | None:
    """The program's path, looking in /usr/sbin and /sbin too (Debian's daemons; not on every PATH)."""
    return shutil.which(program, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))


def missing_binaries() -> list[str]:
    """The Slurm and munge programs this machine lacks (none once `apt-get install slurm-wlm munge`)."""
    return [b for b in BINARIES if which(b) is None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_hardware() -> str:
    """`slurmd -C`'s view of this machine: "CPUs=2 Boards=1 ... RealMemory=24105"."""
    line = subprocess.run([which("slurmd"), "-C"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    return " ".join(f for f in line.split() if f.split("=")[0] in ("CPUs", "Boards", "SocketsPerBoard",
                                                                    "CoresPerSocket", "ThreadsPerCore", "RealMemory"))


class SlurmCluster:
    """start() brings the cluster up in `root` and waits until its node is idle; stop() ends the
    three daemons it started (by their process ids) and waits for them."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.conf = self.root / "slurm.conf"
        self.procs: list[subprocess.Popen] = []
        self.socket_dir: Path | None = None

    def env(self) -> dict[str, str]:
        """os.environ with SLURM_CONF pointing at this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self, timeout_s: float = 90.0) -> "SlurmCluster":
        r = self.root
        for d in ("state", "spool", "log"):
            (r / d).mkdir(parents=True, exist_ok=True)
        key = r / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        # munged wants every directory above its socket searchable by all (pytest's are 0700)
        self.socket_dir = Path(tempfile.mkdtemp(prefix="rvt-munge-"))
        self.socket_dir.chmod(0o755)
        socket_path = self.socket_dir / "munge.sock"
        self.conf.write_text("\n".join([
            "ClusterName=rvttest",
            f"SlurmctldHost={socket.gethostname()}(127.0.0.1)",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "SlurmUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={socket_path}",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'slurmd.pid'}",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "ReturnToService=2",
            "KillWait=5",  # seconds between scancel's SIGTERM and its SIGKILL
            f"NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname={socket.gethostname()} {_node_hardware()} State=UNKNOWN",
            "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ]) + "\n")
        env = self.env()
        out = open(r / "log" / "daemons.out", "ab")
        self.procs.append(subprocess.Popen(
            [which("munged"), "--foreground", f"--key-file={key}", f"--socket={socket_path}", f"--pid-file={r / 'munged.pid'}",
             f"--log-file={r / 'log' / 'munged.log'}", f"--seed-file={r / 'munged.seed'}"], stdout=out, stderr=out))
        self._wait(lambda: socket_path.exists(), timeout_s, "munged's socket")
        self.procs.append(subprocess.Popen([which("slurmctld"), "-D", "-f", str(self.conf)], env=env, stdout=out, stderr=out))
        self.procs.append(subprocess.Popen([which("slurmd"), "-D", "-N", NODE, "-f", str(self.conf)], env=env, stdout=out, stderr=out))
        self._wait(lambda: self.node_state() == "idle", timeout_s, "the node to be idle")
        return self

    def node_state(self) -> str:
        proc = subprocess.run(["sinfo", "--noheader", "--format=%T"], env=self.env(), capture_output=True, text=True)
        return proc.stdout.strip()

    def jobs(self) -> list[tuple[str, str]]:
        """(job id, state) of every job slurmctld holds, finished ones included."""
        proc = subprocess.run(["squeue", "--noheader", "--states=all", "--format=%i|%T"], env=self.env(),
                              capture_output=True, text=True, check=True)
        return [tuple(line.split("|")) for line in proc.stdout.split()]  # type: ignore[misc]

    def _wait(self, ready, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"--- {f.name}\n{f.read_text()[-1500:]}" for f in sorted((self.root / "log").glob("*")))
                self.stop()
                raise RuntimeError(f"Slurm test cluster: no {what} after {timeout_s} s (exited: {dead})\n{logs}")
            time.sleep(0.2)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        if self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
