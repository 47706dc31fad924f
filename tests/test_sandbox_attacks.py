"""Hostile model code against the sandbox (adapters/sandbox), as an RL-trained policy hunting for
reward would write it. Every attack asserts containment (the host and the harness are unchanged),
the outcome the model gets back (`reason` and its one line), and that the harness process is
unaffected (autouse `host_unchanged`). Runs as CI runs: as root, where bubblewrap needs no user
namespaces, so none of these skip there; isolation="bwrap" makes a missing sandbox a failure."""
import base64
import errno
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rvt_bench.adapters.sandbox.cgroup import CgroupSet
from rvt_bench.adapters.sandbox.runner import SandboxPool, SandboxSettings, bwrap_problem
from rvt_bench.adapters.twin.builder import build_twin
from rvt_bench.adapters.twin.oracle import OraclePerception
from tests.test_twin_oracle import ALL_TOOLS, synthetic_sample

REPO = Path(__file__).resolve().parents[1]
SECRET = "sk-attack-suite-must-not-leak"
pytestmark = pytest.mark.skipif(os.geteuid() != 0 and bwrap_problem() is not None,
                                reason="a normal user without unprivileged user namespaces gets the fallback")
SETTINGS = SandboxSettings(timeout_s=5.0, memory_mb=1024, max_output_chars=2000, max_processes=16, disk_mb=32,
                           isolation="bwrap", pool_size=2)


@pytest.fixture(scope="module")
def pool():
    p = SandboxPool(SETTINGS)
    yield p
    p.close()


@pytest.fixture(scope="module")
def twin():
    """What code sees of a twin: the plain JSON payload the sandbox loads (Twin.to_code_payload)."""
    return build_twin(synthetic_sample(), ALL_TOOLS, OraclePerception()).to_code_payload()


@pytest.fixture
def attack(pool, twin):
    """Run code as one sample's <execute> round in a fresh sandbox interpreter."""
    sessions = []

    def run(code: str, settings_pool=None):
        session = (settings_pool or pool).session()
        sessions.append(session)
        return session.execute(code, twin)

    yield run
    for s in sessions:
        s.close()


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _settled(pool: SandboxPool) -> None:
    """Wait for the pool's warm sandboxes to finish starting: each holds its pipes, the pool's own and
    not an attack's leak, so they are counted before and after a test alike."""
    for fut in list(pool._warm):
        try:
            fut.result(timeout=60)
        except Exception:  # noqa: BLE001 - one that failed to start holds nothing
            pass


@pytest.fixture(autouse=True)
def host_unchanged(monkeypatch, pool):
    from rvt_bench.adapters.sandbox import pool as pools

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    _settled(pool)
    process_wide = set(pools._POOLS)
    watched = ["/proc/sys/kernel/hostname", "/proc/sys/kernel/core_pattern",
               "/sys/kernel/mm/transparent_hugepage/enabled"]
    before = {p: _read(p) for p in watched}
    dev, cwd = sorted(os.listdir("/dev")), os.getcwd()
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    fds = len(os.listdir("/proc/self/fd"))
    yield
    assert {p: _read(p) for p in watched} == before
    assert sorted(os.listdir("/dev")) == dev
    assert {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"} == env and os.getcwd() == cwd
    # a process-wide pool an adapter started (get_pool) keeps warm sandboxes, and their pipes, until exit
    for settings in set(pools._POOLS) - process_wide:
        pools._POOLS.pop(settings).close()
    _settled(pool)
    assert len(os.listdir("/proc/self/fd")) <= fds + 8  # no pipe or file left open per attack


def _error(result, startswith: str):
    assert (result.ok, result.reason) == (False, "error"), result
    assert result.output.startswith(startswith) and "\n" not in result.output, result.output


# --- host-global writes ----------------------------------------------------------------------------

@pytest.mark.parametrize("path, expected", [
    ("/proc/sys/kernel/core_pattern", "OSError: [Errno 30] Read-only file system"),
    ("/proc/sys/kernel/hostname", "OSError: [Errno 30] Read-only file system"),
    ("/proc/sysrq-trigger", ("OSError: [Errno 30]", "PermissionError", "FileNotFoundError")),  # absent on some kernels
    ("/sys/kernel/mm/transparent_hugepage/enabled", "FileNotFoundError"),
    ("/sys/fs/cgroup/cgroup.procs", "FileNotFoundError"),
])
def test_host_kernel_settings_cannot_be_written(attack, path, expected):
    _error(attack(f"open({path!r}, 'w').write('|/tmp/pwn')"), expected)


def test_dev_is_read_only_and_minimal(attack):
    result = attack("import os\nprint(sorted(os.listdir('/dev')))\nopen('/dev/pwn', 'w').write('#!/bin/sh')")
    _error(result, "OSError: [Errno 30] Read-only file system")
    assert not Path("/dev/pwn").exists()


def test_devices_cannot_be_created_in_scratch(attack):
    _error(attack("import os, stat\nos.mknod('/scratch/mem', stat.S_IFCHR | 0o666, os.makedev(1, 1))"),
           "PermissionError")


def test_runtime_is_read_only(attack):
    _error(attack("import numpy, os\nopen(os.path.join(os.path.dirname(numpy.__file__), 'pwn.py'), 'w')"), "OSError: [Errno 30]")


def test_checkout_and_host_tmp_are_invisible(attack, tmp_path):
    target = tmp_path / "escape.txt"
    result = attack(f"import os\nprint(os.path.exists({str(REPO)!r}), os.path.exists({str(tmp_path)!r}))\n"
                    f"open({str(target)!r}, 'w').write('x')")
    assert not result.ok and not target.exists()
    assert result.output.startswith(("FileNotFoundError", "OSError: [Errno 30]"))


def test_remounting_is_refused(attack):
    code = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "print(libc.mount(b'none', b'/usr', b'tmpfs', 0, None), ctypes.get_errno())")
    assert attack(code).output == f"-1 {errno.EPERM}\n"


# --- reads of the host, the answers and other runs -------------------------------------------------

def test_etc_shadow_is_not_there(attack):
    _error(attack("print(open('/etc/shadow').read())"), "FileNotFoundError")


def test_ground_truth_of_the_dataset_is_invisible(attack, tmp_path):
    gt = tmp_path / "data" / "revos" / "mask_dict.json"
    gt.parent.mkdir(parents=True)
    gt.write_text('{"anno_id": "SECRET-RLE"}')
    result = attack(f"print(open({str(gt)!r}).read())")
    _error(result, "FileNotFoundError")
    assert "SECRET-RLE" not in result.output


def test_the_repository_test_data_is_invisible(attack):
    _error(attack(f"import os\nprint(os.listdir({str(REPO / 'tests' / 'data')!r}))"), "FileNotFoundError")


def test_other_runs_are_invisible(attack, tmp_path):
    run = tmp_path / "runs" / "revos" / "dtr1" / "abc"
    run.mkdir(parents=True)
    (run / "predictions.jsonl").write_text('{"sample_id": "x"}\n')
    (run / "metrics.json").write_text('{"J&F": 0.5}')
    _error(attack(f"print(open({str(run / 'metrics.json')!r}).read())"), "FileNotFoundError")
    _error(attack(f"open({str(run / 'predictions.jsonl')!r}, 'a').write('{{}}')"), "FileNotFoundError")
    assert (run / "predictions.jsonl").read_text() == '{"sample_id": "x"}\n'


def test_harness_environment_is_not_readable_through_proc(attack):
    code = ("import os\nfound = []\n"
            "for pid in os.listdir('/proc'):\n"
            "    try:\n"
            "        found.append(open(f'/proc/{pid}/environ', 'rb').read())\n"
            "    except Exception:\n"
            "        pass\n"
            f"print(any(b'{SECRET}' in e for e in found), len([p for p in os.listdir('/proc') if p.isdigit()]))\n")
    assert attack(code).output == "False 3\n"  # bwrap's init, the supervisor and the round's worker only


def test_own_environment_has_no_secrets(attack):
    result = attack("import os\nprint(sorted(os.environ))")
    assert result.ok and SECRET not in result.output and "OPENAI_API_KEY" not in result.output


def test_harness_memory_is_unreachable(attack):
    _error(attack(f"open('/proc/{os.getpid()}/mem', 'rb').read(1)"), "FileNotFoundError")


def test_home_directories_are_empty(attack):
    result = attack("import os\nprint(os.path.exists('/home'), [n for n in os.listdir('/root') if n != '.pyenv'] "
                    "if os.path.exists('/root') else [])")
    assert result.output == "False []\n", result.output


# --- sockets of every family -----------------------------------------------------------------------

def _listener(kind: str, tmp_path: Path):
    """A host socket that records whether anything reached it."""
    got = []
    if kind == "tcp":
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        addr = srv.getsockname()
    elif kind == "udp":
        srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        srv.bind(("127.0.0.1", 0))
        addr = srv.getsockname()
    elif kind == "unix":
        addr = str(tmp_path / "harness.sock")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(addr)
        srv.listen()
    else:
        addr = "\0rvt-attack-suite"
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(addr)
        srv.listen()
    srv.settimeout(0.2)

    def watch():
        try:
            if kind == "udp":
                got.append(srv.recv(100))
            else:
                got.append(srv.accept())
        except OSError:
            pass

    t = threading.Thread(target=watch)
    t.start()
    return srv, addr, got, t


@pytest.mark.parametrize("kind, family, kind_const", [("unix", "AF_UNIX", "SOCK_STREAM"),
                                                       ("abstract", "AF_UNIX", "SOCK_STREAM")])
def test_host_unix_sockets_are_unreachable(attack, tmp_path, kind, family, kind_const):
    srv, addr, got, t = _listener(kind, tmp_path)
    try:
        code = (f"import socket\ns = socket.socket(socket.{family}, socket.{kind_const})\n"
                f"s.settimeout(1)\ns.connect({addr!r})\ns.send(b'{SECRET}')\nprint('sent')")
        result = attack(code)
    finally:
        t.join()
        srv.close()
    assert not result.ok and result.output.startswith(("ConnectionRefusedError", "FileNotFoundError")), result
    assert got == []


@pytest.mark.parametrize("kind", ["tcp", "udp"])
def test_host_ip_sockets_are_unreachable(attack, tmp_path, kind):
    srv, addr, got, t = _listener(kind, tmp_path)
    try:
        const = "SOCK_STREAM" if kind == "tcp" else "SOCK_DGRAM"
        result = attack(f"import socket\ns = socket.socket(socket.AF_INET, socket.{const})\n"
                        f"s.connect({addr!r})\ns.send(b'{SECRET}')")
    finally:
        t.join()
        srv.close()
    _error(result, f"OSError: [Errno {errno.EAFNOSUPPORT}]")
    assert got == []


def test_internet_is_unreachable(attack):
    _error(attack("import socket\nsocket.create_connection(('8.8.8.8', 53), timeout=1)"), f"OSError: [Errno {errno.EAFNOSUPPORT}]")


@pytest.mark.parametrize("family", [40, 17, 16, 38])  # AF_VSOCK, AF_PACKET, AF_NETLINK, AF_ALG
def test_other_socket_families_are_refused(attack, family):
    _error(attack(f"import socket\nsocket.socket({family}, socket.SOCK_RAW if {family} == 17 else socket.SOCK_STREAM)"),
           "OSError: [Errno 97]")


# --- harness-side file tricks (the harness reads no file of the sandbox) ---------------------------

@pytest.mark.parametrize("name", ["stdout.txt", "error.txt", "twin.json", "code.py"])
def test_symlinks_in_the_working_directory_are_not_followed_by_the_harness(attack, name):
    result = attack(f"import os\nos.symlink('/proc/self/environ', {name!r})\nos.symlink('/dev/zero', 'zero')\n"
                    "raise ValueError('x')")
    assert (result.reason, result.output) == ("error", "ValueError: x") and SECRET not in result.output


def test_a_fifo_in_the_working_directory_does_not_block_the_harness(attack):
    start = time.monotonic()
    result = attack("import os\nos.mkfifo('stdout.txt')\nos.mkfifo('error.txt')\nprint('done')")
    assert result.output == "done\n" and time.monotonic() - start < 5


def test_a_directory_named_like_a_result_file_is_only_the_models_outcome(attack):
    result = attack("import os\nos.mkdir('error.txt')\nos.mkdir('stdout.txt')\nimport sys\nsys.exit(2)")
    assert (result.reason, result.output) == ("error", "SystemExit: 2")


def test_bytes_written_to_every_descriptor_reach_only_the_rounds_own_output(attack):
    # A frame header announcing 2 GiB and garbage, on every fd the code has: none of them is the
    # reply pipe, so the round ends normally with those bytes as (part of) its own output.
    code = ("import os, struct\n"
            "for fd in range(1024):\n"
            "    try:\n"
            "        os.write(fd, struct.pack('>I', 2**31) + b'\\x00\\x00')\n"
            "    except OSError:\n"
            "        pass\n"
            "print('done')")
    result = attack(code)
    assert (result.ok, result.reason) == (True, "ok") and result.output.endswith("done\n"), result


def test_closing_every_descriptor_then_exiting_is_an_exit(attack):
    result = attack("import os\nos.closerange(0, 1024)\nos._exit(0)")
    assert (result.ok, result.reason) == (False, "exit") and "status 0" in result.output


def test_reading_zero_bytes_forever_does_not_grow_the_harness(attack):
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = attack("import os\nos.symlink('/dev/zero', 'stdout.txt')\nprint(open('/dev/zero', 'rb').read(10**6).count(0))")
    assert result.output == "1000000\n"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 100_000  # KiB


# --- processes, threads, memory, disk --------------------------------------------------------------

def test_fork_bomb_is_capped(attack):
    code = ("import os\nn = 0\n"
            "try:\n"
            "    while True:\n"
            "        if os.fork() == 0:\n"
            "            import time; time.sleep(30); os._exit(0)\n"
            "        n += 1\n"
            "except OSError as e:\n"
            "    print(n, type(e).__name__)\n")
    result = attack(code)
    n, kind = result.output.split()
    assert int(n) < SETTINGS.max_processes and kind == "BlockingIOError"


def test_thread_bomb_is_capped(attack):
    code = ("import threading, time\nn = 0\n"
            "try:\n"
            "    while True:\n"
            "        threading.Thread(target=time.sleep, args=(30,), daemon=True).start(); n += 1\n"
            "except RuntimeError as e:\n"
            "    print(n, e)\n")
    result = attack(code)
    assert int(result.output.split()[0]) < SETTINGS.max_processes and "can't start new thread" in result.output


def test_one_big_allocation_is_a_memory_error(attack):
    _error(attack("x = bytearray(2 * 1024 ** 3)"), "MemoryError")


def _cgroups_writable() -> bool:
    probe = CgroupSet.create(2**30)
    if probe is not None:
        probe.remove()
    return probe is not None


@pytest.mark.skipif(not _cgroups_writable(), reason="no writable cgroup: memory is limited per process only")
def test_memory_spread_over_processes_is_capped_in_total(attack):
    # Three processes of 600 MiB each: every one is under the per-process limit, the sum is not.
    code = ("import os, time\npids = []\n"
            "for _ in range(3):\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        x = bytearray(600 * 1024 ** 2)\n"
            "        for i in range(0, len(x), 4096): x[i] = 1\n"
            "        time.sleep(20); os._exit(0)\n"
            "    pids.append(pid)\n"
            "for p in pids: os.waitpid(p, 0)\n")
    result = attack(code)
    assert (result.ok, result.reason) == (False, "memory") and "1024 MiB" in result.output


def test_disk_flood_stops_at_the_scratch_size(attack):
    code = ("block = b'x' * 2**20\nn = 0\n"
            "try:\n"
            "    with open('flood', 'wb') as f:\n"
            "        while n < 400:\n"
            "            f.write(block); f.flush(); n += 1\n"
            "except OSError as e:\n"
            "    print(n, e.errno)\n")
    result = attack(code)
    n, code_ = result.output.split()
    assert int(n) <= SETTINGS.disk_mb and int(code_) in (errno.ENOSPC, errno.EFBIG)


def test_scratch_does_not_leak_into_the_next_sample(attack):
    attack("open('/scratch/note.txt', 'w').write('from sample a')")
    assert attack("import os\nprint(os.listdir('/scratch'))").output == "[]\n"


def test_infinite_loop_is_a_timeout(attack):
    result = attack("while True:\n    pass")
    assert (result.reason, result.output) == ("timeout", "TimeoutError: code ran longer than 5 s and was killed")


# --- signals, orphans, daemons ---------------------------------------------------------------------

def test_signalling_everything_reaches_only_the_sandbox(attack):
    # kill(-1) reaches every process the uid may signal except the caller: inside the sandbox only
    # its own supervisor, so the round fails (the harness, outside, is untouched: host_unchanged).
    result = attack("import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('survived')")
    assert not result.ok and result.reason in ("signal", "exit"), result


def test_killing_its_supervisor_fails_the_round(attack):
    # The worker's parent is the supervisor (same uid): killing it ends the sandbox, never a result.
    result = attack("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('all good')")
    assert not result.ok and result.reason in ("signal", "exit"), result


def test_killing_itself_is_recorded_with_the_signal(attack):
    result = attack("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    assert (result.reason, result.output) == ("signal", "SandboxError: the interpreter was killed by SIGSEGV")


def test_a_detached_daemon_dies_with_the_sample(pool, twin, tmp_path):
    session = pool.session()
    code = ("import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        time.sleep(60); os._exit(0)\n"
            "    os._exit(0)\n"
            "print(os.getuid())\n")
    uid = int(session.execute(code, twin).output)
    session.close()
    time.sleep(0.2)
    assert [d for d in Path("/proc").iterdir() if d.name.isdigit() and _uid_of(d) == uid] == []


def _uid_of(proc_dir: Path) -> int | None:
    try:
        return int((proc_dir / "status").read_text().split("Uid:\t")[1].split()[0])
    except (OSError, IndexError):
        return None


# --- privileges, ctypes, syscalls ------------------------------------------------------------------

def test_runs_unprivileged_with_no_new_privs(attack):
    code = ("import os\ns = open('/proc/self/status').read()\n"
            "print(os.getuid() != 0, s.split('CapEff:')[1].split()[0], s.split('NoNewPrivs:')[1].split()[0], "
            "os.getgroups() in ([], [os.getgid()]))")
    assert attack(code).output == "True 0000000000000000 1 True\n"


@pytest.mark.parametrize("call, expected", [
    ("libc.setuid(0)", errno.EPERM),
    ("libc.unshare(0x10000000)", errno.EPERM),               # CLONE_NEWUSER
    ("libc.ptrace(16, 1, 0, 0)", errno.EPERM),               # PTRACE_ATTACH to init
    ("libc.syscall(250, 0, 0, 0, 0)", errno.EPERM),          # keyctl
    ("libc.syscall(425, 8, 0)", errno.EPERM),                # io_uring_setup
    ("libc.syscall(321, 0, 0, 0)", errno.EPERM),             # bpf
    ("libc.ioctl(0, 0x5412, ctypes.c_char_p(b'x'))", errno.EPERM),  # TIOCSTI
    ("libc.syscall(154, 0, 0, 0)", errno.EPERM),             # modify_ldt
])
def test_dangerous_system_calls_are_refused(attack, call, expected):
    code = f"import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nprint({call}, ctypes.get_errno())"
    assert attack(code).output == f"-1 {expected}\n"


def test_a_segfault_through_ctypes_is_recorded(attack):
    result = attack("import ctypes\nctypes.string_at(0)")
    assert (result.reason, result.output) == ("signal", "SandboxError: the interpreter was killed by SIGSEGV")


def test_os_exit_zero_is_not_silently_a_success(attack):
    result = attack("print('partial')\nimport os\nos._exit(0)")
    assert (result.ok, result.reason) == (False, "exit") and "status 0" in result.output


# --- output, recursion, exceptions, the harness's own modules --------------------------------------

def test_huge_output_comes_back_truncated(attack):
    result = attack("print('x' * 10**8)")
    assert result.ok and len(result.output) == SETTINGS.max_output_chars


def test_deep_recursion_is_a_one_line_error(attack):
    _error(attack("def f(n):\n    return f(n + 1)\nf(0)"), "RecursionError")


def test_a_huge_exception_message_is_one_truncated_line(attack):
    result = attack("raise ValueError('a\\nb' * 10**6)")
    assert result.reason == "error" and len(result.output) <= SETTINGS.max_output_chars and "\n" not in result.output.split("...[")[0]


def test_an_exception_whose_str_raises_still_reports(attack):
    code = "class E(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\nraise E()"
    result = attack(code)
    assert result.reason == "error" and result.output.startswith("E")


def test_keyboard_interrupt_in_the_code_does_not_interrupt_the_harness(attack):
    _error(attack("raise KeyboardInterrupt"), "KeyboardInterrupt")


@pytest.mark.parametrize("module", ["rvt_bench.harness.runner", "rvt_bench.metrics.masks", "rvt_bench.adapters.dtr1.rewards", "rvt_bench.leaderboards.publish"])
def test_the_harness_cannot_be_imported_to_change_scores(attack, module):
    _error(attack(f"import {module}"), "ModuleNotFoundError")


# --- the seven holes of issue 23, each closed -----------------------------------------------------

# Issue 34: the code never holds the reply channel. This snippet once wrote a framed `ok` reply to
# fd 3 (the reply pipe) and was recorded as an "ok" round ("code runs OK 100.0 %"), its real reply
# queued as the next round's result; GRPO's execution reward read the same events.
FORGED = ("import json, os, struct\n"
          "msg = json.dumps({'ok': True, 'output': 'all good'}).encode()\n"
          "for fd in range(1024):\n"
          "    try:\n"
          "        os.write(fd, struct.pack('>I', len(msg)) + msg)\n"
          "    except OSError:\n"
          "        pass\n"
          "1/0\n")


def test_34_a_forged_reply_on_every_descriptor_is_an_error_round(pool, twin):
    session = pool.session()
    try:
        first = session.execute(FORGED, twin)
        second = session.execute("print('second')", twin)  # no forged frame waits in the pipe
    finally:
        session.close()
    _error(first, "ZeroDivisionError")
    assert (second.ok, second.output) == (True, "second\n")


@pytest.mark.parametrize("then", ["1/0", "raise SystemExit(3)"])
def test_34_a_forged_closing_record_then_a_lost_one_is_no_success(attack, then):
    # The code writes an `ok` closing record on every fd (the worker's status pipe among them), then
    # points them all at /dev/null so that the worker's real record is lost, then fails: the
    # verdict is the worker's exit status, so this is no "ok" round. (What the code can choose is
    # success itself, as by catching its own exception: a forged record and os._exit(0) is "ok".)
    code = ("import os\nrec = b'\\n{\"error\": null}\\n'\nnull = os.open('/dev/null', os.O_WRONLY)\n"
            "for fd in range(3, 1024):\n"
            "    try:\n"
            "        os.write(fd, rec)\n"
            "        if fd != null:\n"
            "            os.dup2(null, fd)\n"
            "    except OSError:\n"
            "        pass\n" + then)
    result = attack(code)
    assert not result.ok and result.reason == "exit", result


def _scripted_samples(n: int, code: str):
    # distinct queries: the scripted policy replays its script for every distinct chat
    from rvt_bench.adapters.policy.scripted import ScriptedPolicy

    samples = []
    for i in range(n):
        s = synthetic_sample()
        s.id, s.query = f"synthetic/{i}", f"the ball, take {i}"
        samples.append(s)
    turns = ['<think>p</think><dt_plan>{"SAM2": []}</dt_plan>',
             f"<think>x</think><execute>\n{code}</execute>",
             '<think>a</think><task>segmentation</task><answer>{"instances": [2]}</answer>']
    return samples, ScriptedPolicy(turns, per_rollout=True)


def test_34_a_forged_reply_in_an_evaluation_is_an_error_round_in_predictions_jsonl(tmp_path):
    from rvt_bench.adapters.dtr1.adapter import DTR1Adapter
    from rvt_bench.core.store import PredictionLog, read_jsonl
    from rvt_bench.harness.predict import predict_batch

    samples, policy = _scripted_samples(2, FORGED)
    adapter = DTR1Adapter(policy=policy, perception=OraclePerception(), sandbox={"timeout_s": 5.0, "isolation": "bwrap"})
    log = PredictionLog(tmp_path / "predictions.jsonl")
    try:
        for pred in predict_batch(adapter, samples, fail_fast=False):
            log.append(pred)
    finally:
        log.close()
    records = list(read_jsonl(tmp_path / "predictions.jsonl"))
    assert len(records) == 2
    for record in records:
        rounds = [e for e in record["trace"]["events"] if e["stage"] == "execute"]
        assert [(e["ok"], e["reason"]) for e in rounds] == [(False, "error")], rounds
        assert "all good" not in json.dumps(rounds)


def test_34_a_forged_reply_in_grpo_rollouts_gets_the_execution_penalty():
    from rvt_bench.adapters.dtr1 import prompt as prompts
    from rvt_bench.adapters.dtr1.rewards import r_exec
    from rvt_bench.adapters.dtr1.rollout import Rollout, RolloutLimits, run_rollouts
    from rvt_bench.adapters.dtr1.training import DTR1RolloutFunc
    from rvt_bench.adapters.twin.registry import describe_tools

    samples, policy = _scripted_samples(2, FORGED)
    func = DTR1RolloutFunc({s.id: s for s in samples}, OraclePerception(), RolloutLimits(),
                           sandbox={"timeout_s": 5.0, "isolation": "bwrap"}, policy=policy, batch_size=2)
    jobs = [(prompts.messages(s, describe_tools(), 10), func._env(s)) for s in samples]
    results = run_rollouts(policy, jobs, RolloutLimits())
    assert all(isinstance(r, Rollout) for r in results), results
    assert [[e["reason"] for e in r.events if e["stage"] == "execute"] for r in results] == [["error"]] * 2
    assert [r_exec(r.events) for r in results] == [-0.5, -0.5]


@pytest.mark.parametrize("mode", ["as root (a fresh uid)", "as a user (a user namespace)"])
def test_34_the_reply_channel_is_unreachable_through_proc_pidfd_and_ptrace(twin, mode, monkeypatch):
    # The supervisor (the worker's parent) is non-dumpable: the kernel refuses its /proc/<pid>/fd/N,
    # /proc/<pid>/mem, ptrace and pidfd_getfd to a process without CAP_SYS_PTRACE (and seccomp
    # refuses the last two); /proc/1 (bwrap's init, dumpable in the user-namespace mode) is an
    # empty read-only tmpfs. The user-namespace mode is bwrap_argv's command line run as root here.
    from rvt_bench.adapters.sandbox import process

    if mode.startswith("as root") and os.geteuid() != 0:
        pytest.skip("the root mode needs the harness to run as root (CI does)")
    code = ("import ctypes, errno, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "def opened(pid):\n"
            "    out = []\n"
            "    for n in range(64):\n"
            "        try:\n"
            "            out.append(os.open(f'/proc/{pid}/fd/{n}', os.O_WRONLY))\n"
            "        except OSError:\n"
            "            pass\n"
            "    return out\n"
            "ppid = os.getppid()\n"
            "try:\n"
            "    open(f'/proc/{ppid}/mem', 'rb').read(1)\n"
            "    mem = 'reached'\n"
            "except OSError as exc:\n"
            "    mem = type(exc).__name__\n"
            "pidfd = os.pidfd_open(ppid)\n"
            "got = max(libc.syscall(438, pidfd, fd, 0) for fd in range(64))\n"  # pidfd_getfd
            "traced = (libc.ptrace(16, ppid, 0, 0), ctypes.get_errno() == errno.EPERM)\n"  # PTRACE_ATTACH
            "caps = open('/proc/self/status').read().split('CapEff:')[1].split()[0]\n"
            "print([opened(ppid), opened(1), mem, os.listdir('/proc/1'), got, traced, caps])")
    with monkeypatch.context() as m:
        if mode.startswith("as a user"):
            m.setattr(process.os, "geteuid", lambda: 1000)
        box = process.Sandbox.start(SETTINGS)
    try:
        box.load(twin)
        result = box.run(code)
    finally:
        box.kill()
    assert result.output == "[[], [], 'PermissionError', [], -1, (-1, True), '0000000000000000']\n", result


def test_34_a_sigkilled_worker_is_a_signal_round(attack):
    result = attack("import os, signal\nprint('all good')\nos.kill(os.getpid(), signal.SIGKILL)")
    assert (result.reason, result.output) == ("signal", "SandboxError: the interpreter was killed by SIGKILL")


def test_34_leftovers_of_a_round_cannot_write_into_the_next(pool, twin):
    session = pool.session()
    leftover = ("import json, os, struct, time\n"
                "if os.fork() == 0:\n"
                "    os.setsid()\n"
                "    time.sleep(0.3)\n"
                "    msg = json.dumps({'ok': True, 'output': 'from the leftover', 'error': None, 'end': None}).encode()\n"
                "    for fd in range(1024):\n"
                "        try:\n"
                "            os.write(fd, struct.pack('>I', len(msg)) + msg)\n"
                "        except OSError:\n"
                "            pass\n"
                "    os._exit(0)\n"
                "print('first')")
    try:
        first = session.execute(leftover, twin)
        second = session.execute("import time\ntime.sleep(0.6)\nprint('second')", twin)
    finally:
        session.close()
    assert (first.output, second.output) == ("first\n", "second\n")


def test_34_cleanup_after_a_forking_round_spares_every_process_outside_the_sandbox(twin):
    # isolation=none runs the code as the harness's own uid, outside any PID namespace: a cleanup
    # by uid or kill(-1) would end this test process and CI's runner. The round's daemon dies; a
    # process of the same uid outside the sandbox lives on.
    outside = subprocess.Popen(["sleep", "30"])
    pool = SandboxPool(SandboxSettings(timeout_s=5.0, isolation="none", pool_size=0))
    try:
        session = pool.session()
        try:
            result = session.execute("import os, time\n"
                                     "r, w = os.pipe()\n"
                                     "if os.fork() == 0:\n"
                                     "    os.setsid()\n"
                                     "    if os.fork() == 0:\n"
                                     "        os.write(w, str(os.getpid()).encode()); time.sleep(30); os._exit(0)\n"
                                     "    os._exit(0)\n"
                                     "print(os.read(r, 32).decode())", twin)
            after = session.execute("print('next')", twin)
        finally:
            session.close()
        daemon = int(result.output)
        assert after.output == "next\n"
        assert outside.poll() is None  # alive
        assert not Path(f"/proc/{daemon}").exists() or "Z" in Path(f"/proc/{daemon}/stat").read_text().split(")")[-1][:3]
    finally:
        pool.close()
        outside.kill()
        outside.wait(timeout=5)


# A stand-in supervisor that answers every run with the body given in its settings: what the
# harness does with a reply no real supervisor sends (adapters/sandbox/protocol.py).
FAKE_SUPERVISOR = r"""
import json, os, struct, sys
settings = json.loads(sys.argv[1])
req, rep = settings["fds"]
body = bytes.fromhex(settings["body"])
os.write(rep, struct.pack(">I", len(json.dumps({"ready": True}))) + json.dumps({"ready": True}).encode())
while True:
    head = os.read(req, 1 << 20)
    if not head:
        os._exit(0)
    if b'"op": "run"' in head:
        header = struct.pack(">I", settings.get("length", len(body)))
        os.write(rep, header + body)
"""


@pytest.mark.parametrize("body, length, reason, words", [
    (b"[" * 20000 + b"]" * 20000, None, "protocol", "brackets"),   # deeper than any parser's recursion
    (b'{"ok": tru', None, "protocol", "not JSON"),
    (b"\"" + b"\\\"" * 20000, None, "protocol", "not JSON"),   # ~12 s in the old, quadratic scan
    (b"", 2**31, "output_limit", "output limit"),
])
def test_a_reply_no_supervisor_sends_is_a_protocol_outcome_at_once(twin, tmp_path, monkeypatch, body, length, reason,
                                                                      words):
    from rvt_bench.adapters.sandbox import process, world

    script = tmp_path / "fake_child.py"
    script.write_text(FAKE_SUPERVISOR)
    extra = {"body": body.hex(), **({"length": length} if length else {})}
    monkeypatch.setattr(world, "plain_argv", lambda settings: [sys.executable, "-I", str(script),
                                                               json.dumps({**settings, **extra})])
    box = process.Sandbox.start(SandboxSettings(timeout_s=5.0, isolation="none"))
    start = time.monotonic()
    try:
        box.load(twin)
        result = box.run("print(1)")
    finally:
        box.kill()
    assert (result.ok, result.reason) == (False, reason) and words in result.output, result
    assert time.monotonic() - start < 3  # not the whole timeout_s


def test_2_no_ip_socket_holds_memory_outside_the_cgroup(pool, twin):
    # Loopback TCP buffers are not charged to the memory cgroup: a sandbox filled 1.5 GiB of them at
    # memory_mb=512 and ended "ok". No AF_INET / AF_INET6 socket can be made at all.
    code = ("import socket\nsrv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\nsrv.bind(('127.0.0.1', 0))\n"
            "srv.listen()\na = socket.create_connection(srv.getsockname())\nb, _ = srv.accept()\n"
            "a.setblocking(False)\nheld = 0\n"
            "while held < 64 * 2**20:\n    held += a.send(b'x' * 65536)\nprint(held)")
    for family in ("AF_INET", "AF_INET6"):
        for kind in ("SOCK_STREAM", "SOCK_DGRAM"):
            session = pool.session()
            try:
                result = session.execute(code.replace("AF_INET, socket.SOCK_STREAM", f"{family}, socket.{kind}"), twin)
            finally:
                session.close()
            _error(result, f"OSError: [Errno {errno.EAFNOSUPPORT}] Address family not supported")


@pytest.mark.parametrize("error", [False, True])
def test_5_non_ascii_output_at_a_large_limit_is_a_legal_reply(twin, error):
    # JSON writes a character beyond the BMP as 12 bytes (two \\uXXXX escapes): the old bound of
    # 4 bytes per character killed this sandbox as "output_limit".
    pool = SandboxPool(SandboxSettings(timeout_s=5.0, max_output_chars=8192, isolation="bwrap", pool_size=0))
    session = pool.session()
    try:
        code = "print('\\U0001F600' * 10000)" + ("\nraise ValueError('\\U0001F600' * 10000)" if error else "")
        result = session.execute(code, twin)
    finally:
        session.close()
        pool.close()
    assert result.reason == ("error" if error else "ok"), result.output[:200]
    assert len(result.output) == 8192 and result.output.startswith("ValueError: \U0001F600" if error else "\U0001F600")


@pytest.mark.parametrize("mode", ["as root (a fresh uid)", "as a user (a user namespace)"])
def test_7_proc_sys_is_read_only_in_every_mode(twin, mode, monkeypatch):
    from rvt_bench.adapters.sandbox import process

    if mode.startswith("as root") and os.geteuid() != 0:
        pytest.skip("the root mode needs the harness to run as root (CI does)")
    with monkeypatch.context() as m:
        if mode.startswith("as a user"):
            m.setattr(process.os, "geteuid", lambda: 1000)  # bwrap_argv's user-namespace command line
        box = process.Sandbox.start(SETTINGS)
    try:
        box.load(twin)
        result = box.run("mounts = {l.split()[4]: l.split()[5].split(',')[0] for l in open('/proc/self/mountinfo')}\n"
                         "print(mounts['/proc'], mounts['/proc/sys'])\n"
                         "open('/proc/sys/kernel/hostname', 'w').write('pwned')")
    finally:
        box.kill()
    assert result.output.startswith("OSError: [Errno 30] Read-only file system: '/proc/sys/kernel/hostname'"), result


KEY = "sk-key-the-server-echoes-0123456789"
URL_SECRET = "url-password-0123456789"


class _EchoingServer:
    """An OpenAI-compatible server that lists one model and answers every completion with HTTP 401
    quoting the credential it was sent, as servers do ("Incorrect API key provided: ...")."""

    def __init__(self):
        import base64
        import json

        from tests.loopback import JSONHandler, Loopback

        self.seen: list[str] = []
        seen = self.seen

        class Handler(JSONHandler):
            def do_GET(self):
                if self.path.startswith("/refuse/"):  # the policy's check before the run: the point stops
                    raw = self.headers.get("Authorization") or ""
                    self.send_json(401, json.dumps({"error": {"message": f"bad credentials: {raw}"}}).encode())
                    return
                self.send_json(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                raw = self.headers.get("Authorization") or ""
                scheme, _, cred = raw.partition(" ")
                if scheme == "Basic":
                    cred = base64.b64decode(cred).decode().partition(":")[2]
                seen.append(cred)
                # the key as sent, and the header itself (Basic: base64 of "user:password")
                self.send_json(401, json.dumps({"error": {"message": f"Incorrect API key provided: {cred} ({raw})",
                                                          "code": "invalid_api_key"}}).encode())

        self.loopback = Loopback(Handler)
        self.host = self.loopback.root.removeprefix("http://")


def test_3_4_secrets_reach_no_file_and_no_console_of_a_sweep(tmp_path):
    # A sweep (-m) with policy.api_key on the command line, one point with a password inside
    # policy.base_url, against a server that echoes the credential in its 401 body: Hydra's
    # multirun.yaml and job logs, every run file, the leaderboard and the console stay clean.

    from tests.test_sandbox_cli import _small_reasonseg

    server = _EchoingServer()
    root = _small_reasonseg(tmp_path / "data")
    try:
        proc = subprocess.run(
            [sys.executable, str(REPO / "run_bench.py"), "-m", "+dataset=reasonseg", f"dataset.root={root}",
             "dataset.split=val", "+model=dtr1", "policy=openai", "policy.model=m", "policy.chat_template=gemma3",
             "policy.max_retries=0", f"policy.api_key={KEY}",
             f"policy.base_url=http://user:{URL_SECRET}@{server.host}/v1,http://{server.host}/v1,"
             f"http://user:{URL_SECRET}@{server.host}/refuse/v1,http://{server.host}/refuse/v1",
             f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}"],
            cwd=REPO, capture_output=True, text=True, timeout=600)
    finally:
        server.loopback.close()
    assert proc.returncode == 2, proc.stderr[-3000:]  # the two refused points failed; the sweep went on
    assert set(server.seen) == {KEY, URL_SECRET}  # both were sent, and echoed
    written = [f for f in tmp_path.rglob("*") if f.is_file() and "data" not in f.parts]
    assert any(f.name == "multirun.yaml" for f in written) and any(f.name == "run_bench.log" for f in written)
    assert any(f.name == "rvt_point.json" for f in written) and any(f.name == "points.md" for f in written)
    basic = base64.b64encode(f"user:{URL_SECRET}".encode()).decode()
    for secret in (KEY, URL_SECRET, basic):
        assert secret not in proc.stdout + proc.stderr
        for f in written:
            assert secret not in f.read_text(errors="replace"), f
    errors = [json.loads(line)["error"]["message"] for f in written if f.name == "predictions.jsonl"
              for line in f.read_text().splitlines()]
    assert len(errors) == 2 and all("Incorrect API key provided: <redacted>" in e for e in errors), errors


def test_34_no_host_path_of_the_checkout_or_bwraps_options_is_visible_inside(attack):
    # bwrap's options travel on an fd (--args), child.py is copied in (--file), /proc/1 is hidden:
    # the checkout's adapters/ path and bwrap's options appear in no cmdline and no mount.
    from rvt_bench.adapters.sandbox import world

    needles = [str(world.CHILD.parent), "--ro-bind", "--seccomp", "--args", "/sandbox/child.py"]
    code = ("import os\nseen = open('/proc/self/mountinfo').read()\n"
            "for p in os.listdir('/proc'):\n"
            "    try:\n"
            "        seen += open(f'/proc/{p}/cmdline', 'rb').read().decode(errors='replace')\n"
            "    except OSError:\n"
            "        pass\n"
            f"print([n in seen for n in {needles!r}])")
    result = attack(code)
    assert result.output == "[False, False, False, False, True]\n", result  # child.py by its inside path only
