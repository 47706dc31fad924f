"""Entry script of the sandbox process (started by adapters.sandbox.runner, never imported).

Usage: ``python -I child.py <workdir> <repo_root>``. Reads ``twin.json``, ``masks.json`` (instance id
-> frame index -> RLE) and ``code.py`` from workdir, runs the code with ``twin``, ``masks``, ``np``,
``cv2``, ``math`` and ``json`` in scope, and on an exception writes the exception's last traceback
line (type: message) to ``error.txt`` and exits with status 1. Its stdout is a file the runner reads.
"""
from __future__ import annotations

import json
import math
import os
import resource
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path

EXIT_CODE_ERROR = 1


class LazyMasks(Mapping):
    """instance id -> (T, H, W) bool array, decoded on first access (a twin may hold many masks and
    the code usually reads few). Keys are ints; a digit string ("3") is accepted as the same id."""

    def __init__(self, rles: dict[str, dict[str, dict]], num_frames: int, size: list[int], np_mod, decode):
        self._rles = {int(k): v for k, v in rles.items()}
        self._shape = (num_frames, int(size[0]), int(size[1]))
        self._np, self._decode, self._cache = np_mod, decode, {}

    def __getitem__(self, key):
        iid = int(key) if isinstance(key, str) and key.strip().isdigit() else key
        if iid not in self._rles:
            raise KeyError(f"no instance {key!r} in the twin (ids: {sorted(self._rles)})")
        if iid not in self._cache:
            out = self._np.zeros(self._shape, dtype=bool)
            for t, rle in self._rles[iid].items():
                out[int(t)] = self._decode(rle)
            self._cache[iid] = out
        return self._cache[iid]

    def __iter__(self):
        return iter(sorted(self._rles))

    def __len__(self):
        return len(self._rles)


def main() -> None:
    workdir, repo_root = Path(sys.argv[1]), sys.argv[2]
    sys.path.insert(0, repo_root)
    import cv2
    import numpy as np

    from bench.masks import decode

    cv2.setNumThreads(1)
    twin = json.loads((workdir / "twin.json").read_text())
    masks = LazyMasks(json.loads((workdir / "masks.json").read_text()),
                      twin["video"]["num_frames"], twin["video"]["size"], np, decode)
    code = (workdir / "code.py").read_text()
    # From here on no new process or thread: RLIMIT_NPROC counts every process of the user, so it
    # cannot be set before exec without knowing that count; 0 after the imports blocks all forks.
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    scope = {"__name__": "__main__", "twin": twin, "masks": masks, "np": np, "cv2": cv2,
             "math": math, "json": json}
    try:
        exec(compile(code, "<execute>", "exec"), scope)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            _fail(workdir, f"SystemExit: {exc.code}")
    except BaseException as exc:  # noqa: BLE001 - every failure of model code is reported, not raised
        _fail(workdir, traceback.format_exception_only(type(exc), exc)[-1].strip())
    sys.stdout.flush()


def _fail(workdir: Path, line: str) -> None:
    sys.stdout.flush()
    (workdir / "error.txt").write_text(line)
    os._exit(EXIT_CODE_ERROR)


if __name__ == "__main__":
    main()
