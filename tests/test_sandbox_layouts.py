"""The sandbox isolates every common interpreter layout: the harness runs on an interpreter reached
through symbolic links, copied, from the system or from a bare prefix (pyenv, conda, uv), and
the real bubblewrap sandbox started from it runs a probe round with `isolation: bwrap`. Each
layout is built cheaply in a temporary directory around this checkout's own venv (links, a
`venv --copies` whose site-packages reach this venv through a .pth line, the base interpreter with
this venv as a site directory) and exercised by a fresh process, as a user's would be."""
import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from rvt_bench.adapters.sandbox.runner import bwrap_problem

REPO = Path(__file__).resolve().parents[1]
VENV = Path(sys.prefix)                          # this checkout's venv, as this process reaches it
SITE = Path(site.getsitepackages()[0]).resolve()  # where numpy, cv2 and the editable rvt_bench live
BASE = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
pytestmark = [
    pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="the layouts are built around a venv"),
    pytest.mark.skipif(os.geteuid() != 0 and bwrap_problem() is not None,
                       reason="a normal user without unprivileged user namespaces cannot run bubblewrap"),
]

# Started by the layout's interpreter: the preflight (bubblewrap or stop, a probe round) and one
# round that reads the payload; argv[1] = a directory to use as the sandbox's scratch path ("" = default).
PROBE = """
import json, sys
if len(sys.argv) > 2:
    import site
    site.addsitedir(sys.argv[2])  # an interpreter outside any venv: this venv as a site directory
from rvt_bench.adapters.sandbox import world
if sys.argv[1]:
    world.SCRATCH = sys.argv[1]
from rvt_bench.adapters.sandbox.runner import SandboxSettings, preflight, run_code
settings = dict(isolation="auto", pool_size=0, timeout_s=20.0)
mode = preflight(SandboxSettings(**settings))
payload = {"variables": {"v": 7}, "masks": None}
r = run_code("import os, sys\\nprint(sys.executable, v, os.getcwd())", payload, **settings)
usr = run_code("import json, os\\nprint(json.dumps(sorted(os.listdir('/usr'))))", payload, **settings)
print(json.dumps({"mode": mode, "isolation": r.isolation, "reason": r.reason, "output": r.output,
                  "executable": sys.executable, "usr": usr.output}))
"""


def probe(python: Path, *args: str) -> dict:
    proc = subprocess.run([str(python), "-c", PROBE, *(args or ("",))], capture_output=True, text=True, timeout=180,
                          cwd="/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_isolated(out: dict, python: Path, scratch: str = "/scratch") -> None:
    assert (out["mode"], out["isolation"], out["reason"]) == ("bwrap", "bwrap", "ok"), out
    # inside, the interpreter runs by the very path it runs by outside
    assert out["output"] == f"{out['executable']} 7 {scratch}\n" and out["executable"] == str(python)
    # whatever the prefix (/usr for Debian's Python, /usr/local for Docker's): only where runtimes run from
    assert set(json.loads(out["usr"])) <= {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "libexec", "local"}, out


def test_a_venv_reached_through_a_symlink(tmp_path):
    # a checkout whose .venv links to a venv elsewhere (venvs on a scratch disk)
    (tmp_path / "checkout").mkdir()
    (tmp_path / "checkout" / ".venv").symlink_to(VENV.resolve())
    python = tmp_path / "checkout" / ".venv" / "bin" / "python"
    assert_isolated(probe(python), python)


def test_a_venv_inside_a_symlinked_directory(tmp_path):
    (tmp_path / "work").symlink_to(VENV.resolve().parent)
    python = tmp_path / "work" / VENV.resolve().name / "bin" / "python"
    assert_isolated(probe(python), python)


def test_a_chain_of_relative_links(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "real").symlink_to(VENV.resolve())
    (tmp_path / "a" / "venv").symlink_to("../real")
    python = tmp_path / "a" / "venv" / "bin" / "python3"
    assert_isolated(probe(python), python)


def test_a_venv_under_the_sandboxs_scratch_path(tmp_path):
    # `.venv -> /scratch/venvs/x`: the scratch tmpfs must not hide the runtime; it moves aside
    scratch = tmp_path / "scratch"
    (scratch / "checkout").mkdir(parents=True)
    (scratch / "checkout" / ".venv").symlink_to(VENV.resolve())
    python = scratch / "checkout" / ".venv" / "bin" / "python"
    assert_isolated(probe(python, str(scratch)), python, scratch=f"{scratch}-rvt1")


def test_a_venv_made_with_copies(tmp_path):
    copies = tmp_path / "copies"
    subprocess.run([str(BASE), "-m", "venv", "--copies", "--without-pip", str(copies)], check=True, timeout=120)
    python = copies / "bin" / "python"
    assert not python.is_symlink()
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "rvt_layout.pth").write_text(f"import site; site.addsitedir({str(SITE)!r})\n")
    assert_isolated(probe(python), python)


def test_the_base_interpreter_outside_any_venv(tmp_path):
    # pyenv's, conda's or uv's own prefix (the system's on CI): no pyvenv.cfg, libraries from a site dir
    assert_isolated(probe(BASE, "", str(SITE)), BASE)


def _system_python() -> Path | None:
    for name in ("/usr/bin/python3", f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"):
        path = Path(name)
        if path.exists():
            version = subprocess.run([name, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                                     text=True).stdout.strip()
            if version == str(tuple(sys.version_info[:2])):
                return path
    return None


@pytest.mark.skipif(_system_python() is None, reason=f"no /usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
def test_the_system_python(tmp_path):
    python = _system_python()
    assert_isolated(probe(python, "", str(SITE)), python)


# Started by a venv that has rvt-bench installed from its wheel (not editable): what the sandbox sees
# of the installed package, whose demo/ holds ground truth, and of the site-packages around it.
WHEEL_PROBE = """
import json, os
from rvt_bench.core.paths import CHECKOUT, PACKAGE_DIR
from rvt_bench.adapters.sandbox.runner import SandboxSettings, preflight, run_code
settings = dict(isolation="auto", pool_size=0, timeout_s=20.0)
mode = preflight(SandboxSettings(**settings))
gt = str(PACKAGE_DIR / "demo" / "revos" / "mask_dict.json")
seen = run_code(f"import os\\nprint(os.listdir({str(PACKAGE_DIR)!r}), len(os.listdir({str(PACKAGE_DIR.parent)!r})) > 1)",
                {"variables": {}, "masks": None}, **settings)
read = run_code(f"print(open({gt!r}).read()[:20])", {"variables": {}, "masks": None}, **settings)
print(json.dumps({"mode": mode, "checkout": str(CHECKOUT), "gt": os.path.isfile(gt), "seen": seen.output,
                  "read": read.output}))
"""


def test_a_wheel_installed_in_a_venvs_site_packages_runs_and_its_demo_is_invisible(tmp_path):
    from tests.test_packaging import build_docs

    src = build_docs().source_copy(tmp_path / "src")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "--disable-pip-version-check", "-w", str(tmp_path / "dist"), str(src)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("rvt_bench-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([str(BASE), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--disable-pip-version-check",
                    "--target", purelib, str(wheel)], check=True, timeout=300)
    (Path(purelib) / "rvt_layout.pth").write_text(f"{SITE}\n")  # the dependencies (a path line: no editable finder)
    proc = subprocess.run([str(python), "-c", WHEEL_PROBE], capture_output=True, text=True, timeout=180, cwd="/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (out["mode"], out["checkout"], out["gt"]) == ("bwrap", "None", True), out
    # the site-packages around it is bound (the runtime), the package is an empty directory
    assert out["seen"] == "[] True\n" and out["read"].startswith("FileNotFoundError"), out


def test_usr_shows_only_where_a_runtime_runs_from():
    from rvt_bench.adapters.sandbox.runner import run_code

    code = ("import json, os\nprint(json.dumps([sorted(os.listdir('/usr')), "
            "sorted(os.listdir('/usr/local')) if os.path.isdir('/usr/local') else []]))")
    r = run_code(code, {"variables": {}, "masks": None}, isolation="bwrap", pool_size=0, timeout_s=20.0)
    assert r.reason == "ok", r
    usr, local = json.loads(r.output)
    assert set(usr) <= {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "libexec", "local"}, usr
    assert set(local) <= {"bin", "sbin", "lib", "lib64"}, local  # no src/, share/: checkouts and data live there


def test_another_installed_copy_inside_a_bound_runtime_is_covered_too(tmp_path, monkeypatch):
    # the checkout in use is editable; a wheel of rvt-bench also sits in a bound site-packages
    from rvt_bench.adapters.sandbox import world
    from rvt_bench.adapters.sandbox.runner import run_code

    runtime = tmp_path / "runtime"
    copy = runtime / "lib" / "python3.11" / "dist-packages" / "rvt_bench" / "demo"
    copy.mkdir(parents=True)
    (copy / "gt.json").write_text('{"secret": "GROUND-TRUTH"}')
    (runtime / "lib" / "python3.11" / "dist-packages" / "other.py").write_text("x = 1\n")
    real = world.runtime_paths()
    monkeypatch.setattr(world, "runtime_paths", lambda: [*real, str(runtime.resolve())])
    payload = {"variables": {}, "masks": None}
    site = runtime / "lib" / "python3.11" / "dist-packages"
    seen = run_code(f"import os\nprint(sorted(os.listdir({str(site)!r})), os.listdir({str(copy.parent)!r}))",
                    payload, isolation="bwrap", pool_size=0, timeout_s=20.0)
    assert seen.output == "['other.py', 'rvt_bench'] []\n", seen
