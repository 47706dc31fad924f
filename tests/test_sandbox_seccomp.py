"""The sandbox's seccomp allow-list (adapters/sandbox/seccomp.py): a call the runtime does not need
is ENOSYS, a dangerous one EPERM, and ordinary rounds (NumPy, OpenCV, json, math, processes) still
run. Runs real bubblewrap (as root in CI)."""
import errno
import os
import re
from pathlib import Path

import pytest

from rvt_bench.adapters.sandbox import seccomp
from rvt_bench.adapters.sandbox.runner import SandboxPool, SandboxSettings, bwrap_problem

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.skipif(os.geteuid() != 0 and bwrap_problem() is not None,
                                 reason="a normal user without unprivileged user namespaces gets no sandbox"),
              pytest.mark.skipif(not seccomp.supported(), reason="the filter covers x86_64 only")]


@pytest.fixture(scope="module")
def session():
    pool = SandboxPool(SandboxSettings(timeout_s=10.0, isolation="bwrap", pool_size=0))
    s = pool.session()
    yield lambda code: s.execute(code, {"variables": {}, "masks": None})
    s.close()
    pool.close()


def _errno_of(session, call: str) -> str:
    code = f"import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nprint({call}, ctypes.get_errno())"
    return session(code).output


@pytest.mark.parametrize("name, nr", [("landlock_create_ruleset", 444), ("memfd_secret", 447),
                                      ("listmount", 458), ("statmount", 457), ("a number no kernel has", 999)])
def test_a_call_off_the_list_is_enosys(session, name, nr):
    assert _errno_of(session, f"libc.syscall({nr}, 0, 0, 0, 0)") == f"-1 {errno.ENOSYS}\n", name


@pytest.mark.parametrize("call", ["libc.syscall(310, 1, 0, 0, 0, 0, 0)",   # process_vm_readv
                                  "libc.syscall(438, 0, 0, 0)",             # pidfd_getfd
                                  "libc.syscall(308, 0, 0)",                # setns
                                  "libc.syscall(272, 0)"])                  # unshare, even of nothing
def test_a_dangerous_call_is_eperm(session, call):
    assert _errno_of(session, call) == f"-1 {errno.EPERM}\n"


def test_ordinary_rounds_still_run(session):
    code = ("import json, math, os, subprocess, sys, threading, tempfile\n"
            "a = np.arange(12, dtype=np.float64).reshape(3, 4)\n"
            "img = cv2.GaussianBlur(np.zeros((32, 32), np.uint8), (3, 3), 0)\n"
            "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os._exit(7)\n"
            "status = os.waitpid(pid, 0)[1]\n"
            "with tempfile.NamedTemporaryFile('w') as f:\n"
            "    f.write('x')\n"
            "print(float(a.sum()), img.shape, json.dumps({'r': math.sqrt(16)}), os.waitstatus_to_exitcode(status))")
    result = session(code)
    assert (result.ok, result.output) == (True, '66.0 (32, 32) {"r": 4.0} 7\n'), result


def test_the_documented_list_is_the_filters():
    doc = (REPO / "docs/sandbox.md").read_text()
    listed = re.search(r"<!-- seccomp-allow -->\n(.*?)\n<!-- /seccomp-allow -->", doc, re.S)
    assert listed is not None, "docs/sandbox.md lost its list of allowed system calls"
    assert sorted(listed.group(1).replace("`", "").replace(",", " ").split()) == sorted(seccomp.ALLOWED)
