"""The sandbox (adapters/sandbox/runner.py): model code runs in a limited child process and comes
back as stdout, or as its error's last line (DT-R1 paper, arXiv 2511.12365)."""
import os
import time
from pathlib import Path

import pytest

from adapters.sandbox.runner import TRUNCATION_MARK, run_code
from adapters.twin.builder import build_twin
from adapters.twin.oracle import OraclePerception
from tests.test_twin_oracle import ALL_TOOLS, synthetic_sample


@pytest.fixture(scope="module")
def twin():
    return build_twin(synthetic_sample(), ALL_TOOLS, OraclePerception())


def test_prints_come_back(twin):
    result = run_code('print(1 + 2)\nprint("done")', twin)
    assert (result.ok, result.output, result.error) == (True, "3\ndone\n", None)
    assert result.duration_s > 0


def test_code_sees_twin_and_masks(twin):
    code = (
        "print(sorted(masks))\n"
        "print(int(masks[1].sum()), masks[2].shape, masks['2'].dtype)\n"
        "print(twin['instances'][0]['label'], twin['video']['size'])\n"
        "print(np.__name__, cv2.__name__, round(math.pi, 2), json.dumps({'a': 1}))\n"
    )
    result = run_code(code, twin)
    assert result.ok, result.output
    # dog: 6 px in frames 0 and 1; masks are (T, H, W) = (3, 6, 8)
    assert result.output == "[1, 2]\n12 (3, 6, 8) bool\ndog [6, 8]\nnumpy cv2 3.14 {\"a\": 1}\n"


def test_exception_returns_the_last_line_only(twin):
    result = run_code('print("before")\ndef f():\n    return 1 / 0\nf()', twin)
    assert (result.ok, result.output, result.error) == (False, "ZeroDivisionError: division by zero",
                                                        "ZeroDivisionError: division by zero")


def test_unknown_mask_id_is_a_one_line_key_error(twin):
    result = run_code("masks[99]", twin)
    assert not result.ok and result.output.startswith("KeyError:") and "\n" not in result.output
    assert "99" in result.output


def test_syntax_error_is_reported(twin):
    result = run_code("for x in\n", twin)
    assert not result.ok and result.output.startswith("SyntaxError:")


@pytest.mark.parametrize("code, ok, output", [
    ("import sys\nsys.exit(3)", False, "SystemExit: 3"),
    ("print('bye')\nexit()", True, "bye\n"),
])
def test_exit_status_decides_success(twin, code, ok, output):
    result = run_code(code, twin)
    assert (result.ok, result.output) == (ok, output)


def test_infinite_loop_is_killed_at_the_timeout(twin):
    start = time.monotonic()
    result = run_code("while True:\n    pass", twin, timeout_s=1.0)
    assert not result.ok and result.output.startswith("TimeoutError")
    assert 1.0 <= result.duration_s < 3.0 and time.monotonic() - start < 5.0


def test_timeout_kills_forked_children_too(twin, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("as a normal user RLIMIT_NPROC = 0 forbids the fork (tested below)")
    pid_file = tmp_path / "pid"
    code = (f"import os, time\npid = os.fork()\nif pid == 0:\n    time.sleep(60)\n"
            f"open({str(pid_file)!r}, 'w').write(str(pid))\nwhile True:\n    pass")
    # isolation="none": the rlimits-and-process-group path (the pid must be visible to this test);
    # the namespaced path is test_a_detached_grandchild_dies_with_the_sandbox.
    assert not run_code(code, twin, timeout_s=1.5, isolation="none").ok
    pid = int(pid_file.read_text())
    time.sleep(0.2)
    status = Path(f"/proc/{pid}/status")
    assert not status.exists() or "State:\tZ" in status.read_text()


@pytest.mark.skipif(os.geteuid() == 0, reason="RLIMIT_NPROC is not enforced for root")
def test_new_processes_are_refused(twin):
    result = run_code("import os\nos.fork()", twin)
    assert not result.ok and "BlockingIOError" in result.output


@pytest.mark.parametrize("code", ["x = bytearray(4 * 1024 ** 3)", "x = np.ones((1 << 30,), dtype=np.float64)"])
def test_memory_bomb_hits_the_limit(twin, code):
    result = run_code(code, twin, memory_mb=1024)
    assert not result.ok and "MemoryError" in result.output and "\n" not in result.output


def test_environment_has_no_secrets(twin, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    result = run_code("import os\nprint('OPENAI_API_KEY' in os.environ)\nprint(dict(os.environ))", twin)
    assert result.ok and result.output.startswith("False\n")
    assert "sk-must-not-leak" not in result.output


def test_output_is_truncated(twin):
    result = run_code("print('x' * 5000)", twin, max_output_chars=100)
    assert result.ok and len(result.output) == 100
    assert result.output == "x" * (100 - len(TRUNCATION_MARK)) + TRUNCATION_MARK


def test_runs_in_a_temporary_directory_that_is_removed(twin):
    result = run_code("import os\nprint(os.getcwd())", twin)
    workdir = Path(result.output.strip())
    assert result.ok and workdir != Path.cwd() and workdir.name.startswith("rvt-sandbox-")
    assert not workdir.exists()


# --- isolation (network, PID and mount namespaces through unshare(1)) ----------------------------

needs_namespaces = pytest.mark.skipif(not __import__("adapters.sandbox.runner", fromlist=["x"]).namespaces_available(),
                                      reason="this kernel refuses unprivileged/privileged namespaces")


@needs_namespaces
def test_network_is_unreachable(twin):
    code = ("import socket\n"
            "for host in ('127.0.0.1', '8.8.8.8'):\n"
            "    try:\n"
            "        socket.create_connection((host, 53), timeout=1); print(host, 'open')\n"
            "    except OSError as e:\n"
            "        print(host, 'blocked')\n")
    result = run_code(code, twin)
    assert result.output == "127.0.0.1 blocked\n8.8.8.8 blocked\n", result.output


@needs_namespaces
def test_harness_environment_is_not_readable_through_proc(twin):
    marker = "RVT_SANDBOX_SECRET_MARKER"
    os.environ[marker] = "sk-should-not-leak"  # the harness's own environment, as at start-up
    try:
        code = ("import os\nfound = []\n"
                "for pid in os.listdir('/proc'):\n"
                "    try:\n"
                "        found.append(open(f'/proc/{pid}/environ', 'rb').read())\n"
                "    except Exception:\n"
                "        pass\n"
                f"print(any(b'{marker}' in e for e in found), os.getpid())\n")
        result = run_code(code, twin)
    finally:
        del os.environ[marker]
    assert result.ok and result.output.startswith("False"), result.output


@needs_namespaces
def test_filesystem_is_read_only_outside_the_working_directory(twin, tmp_path):
    target = tmp_path / "escape.txt"
    code = (f"try:\n    open({str(target)!r}, 'w').write('x'); print('escaped')\n"
            "except OSError as e:\n    print(e.strerror)\n"
            "open('mine.txt', 'w').write('ok'); print(open('mine.txt').read())\n")
    result = run_code(code, twin)
    assert result.output == "Read-only file system\nok\n", result.output
    assert not target.exists()


@needs_namespaces
def test_a_detached_grandchild_dies_with_the_sandbox(twin, tmp_path):
    # As root RLIMIT_NPROC is not enforced; the PID namespace still takes every process down.
    marker = tmp_path / "late.txt"
    code = ("import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid(); time.sleep(2)\n"
            f"    open({str(marker)!r}, 'w').write('alive')\n"
            "    os._exit(0)\n"
            "print('parent done')\n")
    run_code(code, twin, isolation="namespaces")
    time.sleep(3)
    assert not marker.exists()


def test_unknown_isolation_mode_is_refused(twin):
    from bench.types import SandboxError

    with pytest.raises(SandboxError, match="isolation"):
        run_code("print(1)", twin, isolation="docker")


@needs_namespaces
def test_code_cannot_undo_the_isolation_from_inside(twin):
    # Runs as uid 0 in the namespaces, but without capabilities: remounting, unmounting the private
    # /proc and joining another network namespace are all refused.
    code = ("import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "print(libc.mount(None, b'/', None, 32 | 4096, None), ctypes.get_errno())\n"   # MS_REMOUNT|MS_BIND
            "print(libc.umount2(b'/proc', 2), ctypes.get_errno())\n"
            "fd = os.open('/proc/self/ns/net', os.O_RDONLY)\n"
            "print(libc.setns(fd, 0x40000000), ctypes.get_errno())\n"                        # CLONE_NEWNET
            "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n")
    result = run_code(code, twin)
    assert result.ok, result.output
    assert result.output == "-1 1\n-1 1\n-1 1\n0000000000000000\n", result.output  # EPERM each
