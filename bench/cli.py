"""What the command-line entries (run_bench.py, train_dtr1.py) do with an error: a known problem
(bench.types.RvtBenchError: missing data, a backend that cannot run, a bad setting) or a missing
required value is one line on stderr saying what to fix, exit status 2; anything else is a bug and
keeps its traceback."""
from __future__ import annotations

import sys
from typing import Callable, TypeVar

from omegaconf.errors import MissingMandatoryValue

from bench.types import RvtBenchError

T = TypeVar("T")


def our_error(exc: BaseException | None) -> RvtBenchError | None:
    """The RvtBenchError behind `exc` (Hydra wraps errors raised while instantiating), if any."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, RvtBenchError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def exit_on_known_errors(call: Callable[[], T]) -> T:
    """call(); a known error ends the process with its one-line message and status 2."""
    try:
        return call()
    except MissingMandatoryValue as exc:
        key = exc.full_key or "a required value"
        print(f"error: {key} is required: pass {key}=... on the command line (see conf/ for what it means)",
              file=sys.stderr)
        sys.exit(2)
    except Exception as exc:
        ours = our_error(exc)
        if ours is None:
            raise
        print(f"error ({type(ours).__name__}): {ours}", file=sys.stderr)
        sys.exit(2)
