"""Every byte a loader, protocol, adapter or the harness reads from a dataset, a prediction folder or
a file a setting names goes through the checked reading layer, rvt_bench.core.files (regular file,
bounded size, bounded pixels, names confined to their root): read from the source, by construction.

`direct_reads` parses a module (``ast``) and lists every call that opens or reads a file by
itself: ``open``, ``io.open``, ``os.open``, any ``<x>.open(...)`` (``Image.open``, ``Path.open``,
``tarfile.open``...), ``cv2.imread`` / ``VideoCapture``, ``<x>.read_bytes()`` / ``<x>.read_text()``,
``np.load`` / ``fromfile`` / ``loadtxt``, ``pickle.load(s)``, ``json.load``, ``torch.load``,
safetensors' ``load_file`` / ``safe_open``. A call on the checked layer itself (``files.read_text``,
names imported from rvt_bench.core.files) is not direct. Each call left is in ALLOWED, keyed
(file, enclosing function, call), with the reason it does not read hostile data unchecked; a new
one fails this test until it is routed through rvt_bench.core.files or given a reason here.
"""
from __future__ import annotations

import ast
import struct
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCANNED = ("bench/core", "bench/loaders", "bench/harness", "metrics", "adapters", "leaderboards")
CHECKED_LAYER = "bench/core/files.py"
CHECKED_MODULE = "rvt_bench.core.files"

# call names (the dotted callee as written, its last part for method calls) that read a file
_READ_METHODS = {"open", "read_bytes", "read_text", "imread", "imreadmulti", "VideoCapture", "fromfile",
                 "loadtxt", "genfromtxt", "memmap", "safe_open", "load_file", "Unpickler", "ZipFile", "ParquetFile"}
_READ_CALLS = {"open", "np.load", "numpy.load", "pickle.load", "pickle.loads", "json.load", "torch.load"}

_OWN_RUN_FILES = "the run's own files, written by the harness itself (core/store.py's domain)"
_HOST = "a file of the host, not of data: /proc, cgroup control files, the interpreter's pyvenv.cfg, /dev/null"
_WEIGHTS = ("model weights from the checkpoint the user names (a trusted model, not benchmark data): safetensors "
            "parses a bounded header and maps the file; torch.load runs with weights_only=True")
_SHIPPED = "a file shipped with rvt-bench (conf/, constraints/), not one a dataset or setting names"

# (file, enclosing function, call) -> why the call reads no hostile file unchecked
ALLOWED: dict[tuple[str, str, str], str] = {
    ("bench/core/store.py", "PredictionLog._repair_tail", "open"):
        _OWN_RUN_FILES + ": predictions.jsonl, checked to be a regular file, its torn tail cut in bounded pieces",
    ("bench/core/store.py", "atomic_folder", "os.open"): "a directory descriptor, for fsync after a rename (no byte read)",
    ("bench/core/store.py", "umask", "open"): _HOST,
    ("bench/harness/manifest.py", "_shipped_names", "read_text"): _SHIPPED,
    ("bench/harness/manifest.py", "lock_state", "read_text"): _SHIPPED,
    ("bench/harness/submission.py", "_entry_problem", "Image.open"):
        "decodes bytes already read out of the zip, their size and pixels checked first (it opens no file)",
    ("bench/harness/loggers/tensorboard_logger.py", "_read_rgb", "cv2.imread"):
        "a picture the harness itself just wrote into the run's report_images/",
    ("adapters/twin/cache.py", "_decode", "np.load"):
        "decodes bytes files.read_bytes already read from the perception cache, allow_pickle=False",
    ("adapters/lisa/weights.py", "read_state_dict", "load_file"): _WEIGHTS,
    ("adapters/lisa/weights.py", "read_state_dict", "torch.load"): _WEIGHTS,
    ("adapters/sa2va/weights.py", "load_into", "load_file"): _WEIGHTS,
    ("adapters/twin/backends/sam2_pkg.py", "Sam2PkgBackend.load", "torch.load"): _WEIGHTS,
    ("adapters/policy/gguf_files.py", "file_sha256", "open"): "hashes a GGUF weight file of an installed package: " + _WEIGHTS[:60],
    ("adapters/policy/llama_lib.py", "_other_ggml_loaded", "read_text"): _HOST,
    ("adapters/sandbox/world.py", "venv_home", "read_text"): _HOST,
    ("adapters/sandbox/cgroup.py", "CgroupSet.create", "read_text"): _HOST,
    ("adapters/sandbox/cgroup.py", "CgroupSet.oom_kills", "read_text"): _HOST,
    ("adapters/sandbox/cgroup.py", "CgroupSet.pids", "read_text"): _HOST,
    ("adapters/sandbox/cgroup.py", "_layout", "read_text"): _HOST,
    ("adapters/sandbox/process.py", "Sandbox.start", "read_bytes"): "the sandbox's own child program, shipped with rvt-bench",
    ("adapters/sandbox/process.py", "Sandbox.start.prepare", "os.open"): _HOST,
    ("adapters/sandbox/child.py", "_worker", "os.open"): _HOST,
    ("adapters/sandbox/child.py", "_children", "open"): _HOST,
    ("adapters/sandbox/child.py", "main", "os.open"): _HOST,
}


def _dotted(node: ast.AST) -> str | None:
    """"a.b.c" of a Name / Attribute chain, None for anything else (a call's result, a subscript)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _checked_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(names bound to the module rvt_bench.core.files, names imported from it) in a module."""
    modules, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == CHECKED_MODULE and a.asname:
                    modules.add(a.asname)
        elif isinstance(node, ast.ImportFrom) and node.module == "rvt_bench.core":
            modules.update(a.asname or a.name for a in node.names if a.name == "files")
        elif isinstance(node, ast.ImportFrom) and node.module == CHECKED_MODULE:
            functions.update(a.asname or a.name for a in node.names)
    return modules, functions


def _writes(call: ast.Call) -> bool:
    """Whether an ``open`` or ``ZipFile`` call names a literal mode that only writes ("w", "wb", "x";
    "a" too for open): no byte is read."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
    if name not in ("open", "ZipFile"):
        return False
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    reads = set("r+") | ({"a"} if name == "ZipFile" else set())
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and not reads & set(mode.value)


def direct_reads(source: str, name: str = "<module>") -> list[tuple[str, str, int]]:
    """[(enclosing function qualname or "<module>", callee as written, line)] of every call in
    `source` that reads a file without rvt_bench.core.files (module docstring). A call is checked
    when it is the layer's own (``files.read_data(...)``) or when its first argument is: a checked
    call, or a name bound (in the same function) from one, or from a call on such a name
    (``fd, _ = files.open_regular(p)``; ``fh = os.fdopen(fd)``; ``Image.open(fh)``)."""
    tree = ast.parse(source, name)
    modules, functions = _checked_names(tree)
    # `from PIL.Image import open as load_png`, `from numpy import load`: the reader under another name
    renamed = {a.asname or a.name: f"{node.module}.{a.name}" for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module and node.module != CHECKED_MODULE
               for a in node.names if a.name in _READ_METHODS | {"load", "loads"}}
    found: list[tuple[str, str, int]] = []

    def layer_call(call: ast.AST) -> bool:
        if not isinstance(call, ast.Call):
            return False
        func = call.func
        if isinstance(func, ast.Attribute):
            receiver = _dotted(func.value)
            return receiver is not None and (receiver in modules or receiver.endswith(CHECKED_MODULE))
        return isinstance(func, ast.Name) and func.id in functions

    def checked_names(body: ast.AST) -> set[str]:
        """Names bound in `body` from a checked call, or from a call on a checked name (to a fixpoint)."""
        bound: list[tuple[ast.AST, ast.AST]] = []
        for node in ast.walk(body):
            if isinstance(node, ast.Assign):
                bound += [(t, node.value) for t in node.targets]
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                bound += [(i.optional_vars, i.context_expr) for i in node.items if i.optional_vars is not None]
        names: set[str] = set()
        while True:
            more = {n.id for target, value in bound if layer_call(value) or (
                        isinstance(value, ast.Call) and value.args and isinstance(value.args[0], ast.Name)
                        and value.args[0].id in names)
                    for n in ast.walk(target) if isinstance(n, ast.Name)} - names
            if not more:
                return names
            names |= more

    def checked(call: ast.Call, names: set[str]) -> bool:
        first = call.args[0] if call.args else None
        return layer_call(call) or layer_call(first) or (isinstance(first, ast.Name) and first.id in names)

    def visit(node: ast.AST, scope: list[str], names: set[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, [*scope, child.name], checked_names(child))
                continue
            if isinstance(child, ast.Call) and not checked(child, names) and not _writes(child):
                where = ".".join(scope) or "<module>"
                callee = _dotted(child.func)
                last = child.func.attr if isinstance(child.func, ast.Attribute) else callee
                if isinstance(child.func, ast.Name) and callee in renamed and callee not in _READ_METHODS:
                    found.append((where, renamed[callee], child.lineno))
                elif callee in _READ_CALLS or last in _READ_METHODS or last in _READ_CALLS - {"open"}:
                    module_call = callee is not None and (callee in _READ_CALLS or callee.split(".")[0] in _MODULE_RECEIVERS)
                    found.append((where, callee if module_call else last, child.lineno))
            visit(child, scope, names)

    visit(tree, [], checked_names(tree))
    return found


# receivers shown by name (a module); any other receiver (a path, a file object) is shown as the method
_MODULE_RECEIVERS = {"Image", "cv2", "np", "numpy", "os", "io", "pickle", "json", "torch", "yaml", "tarfile",
                     "gzip", "zipfile", "safetensors", "PIL"}


def scanned_files() -> list[Path]:
    return sorted(p for folder in SCANNED for p in (REPO / folder).rglob("*.py")
                  if str(p.relative_to(REPO)) != CHECKED_LAYER)


def all_direct_reads() -> dict[tuple[str, str, str], list[int]]:
    out: dict[tuple[str, str, str], list[int]] = {}
    for path in scanned_files():
        rel = str(path.relative_to(REPO))
        for scope, call, line in direct_reads(path.read_text(encoding="utf-8"), rel):
            out.setdefault((rel, scope, call), []).append(line)
    return out


def test_every_file_read_goes_through_the_checked_layer_or_has_a_reason():
    found = all_direct_reads()
    unlisted = [f"{rel}:{lines[0]} {scope}: {call}(...)" for (rel, scope, call), lines in sorted(found.items())
                if (rel, scope, call) not in ALLOWED]
    assert not unlisted, ("read these through rvt_bench.core.files (read_data, read_json, read_image, inside...) or "
                          "give a reason in ALLOWED:\n  " + "\n  ".join(unlisted))


def test_the_allow_list_holds_no_stale_entry_and_every_entry_has_a_reason():
    found = all_direct_reads()
    stale = sorted(k for k in ALLOWED if k not in found)
    assert not stale, f"these allowed reads no longer exist, remove them from ALLOWED: {stale}"
    assert all(isinstance(reason, str) and len(reason) > 20 for reason in ALLOWED.values())


LOADER = '''
from pathlib import Path
from PIL import Image
import numpy as np
from rvt_bench.core import files

def read_label(path):
    with Image.open(path) as img:
        return np.array(img)

def checked(path):
    return files.read_data(path, "mask PNG")
'''


def test_the_check_fails_when_a_loader_opens_a_png_itself():
    """The scan's own proof: a synthetic loader with a direct Image.open(path) is caught, named by its
    function, while the same module's files.read_data is not."""
    assert direct_reads(LOADER) == [("read_label", "Image.open", 8)]


def test_the_check_catches_every_kind_of_direct_read_and_passes_the_checked_layer():
    source = '''
import json, pickle, cv2, io, os
import numpy as np
import rvt_bench.core.files as checked
from rvt_bench.core.files import read_json, read_text
from pathlib import Path
from PIL.Image import open as png_open

class Loader:
    def load(self, p):
        a = open(p).read()
        b = Path(p).read_bytes()
        c = p.read_text()
        d = cv2.imread(str(p))
        e = np.load(p)
        with open(p, "rb") as fh:
            f = pickle.load(fh)
        g = json.load(p.open())
        h = io.open(p)
        i = png_open(p)
        with open(p, "w") as out:  # writing reads nothing
            out.write("")
        return checked.read_text(p), read_json(p), read_text(p)
'''
    calls = [(scope, call) for scope, call, _ in direct_reads(source)]
    assert calls == [("Loader.load", "open"), ("Loader.load", "read_bytes"), ("Loader.load", "read_text"),
                     ("Loader.load", "cv2.imread"), ("Loader.load", "np.load"), ("Loader.load", "open"),
                     ("Loader.load", "pickle.load"), ("Loader.load", "json.load"), ("Loader.load", "open"),
                     ("Loader.load", "io.open"), ("Loader.load", "PIL.Image.open")]


def blank_png(width: int, height: int) -> bytes:
    """An all-zero 1-bit grayscale PNG of width x height written by hand (valid CRCs): a few KB
    that declare any number of pixels, without building the image in memory."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = bytes(1 + (width + 7) // 8)  # filter byte 0 + the packed bits
    z = zlib.compressobj(9)
    stream = b"".join(z.compress(row) for _ in range(height)) + z.flush()
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))
            + chunk(b"IDAT", stream) + chunk(b"IEND", b""))


def test_a_parquet_file_or_zip_archive_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    """pyarrow's ParquetFile and zipfile.ZipFile block on a FIFO (measured: still waiting after 10 s);
    a hub copy's files (a local directory given as dataset.hf_dataset) are opened through the
    checked layer first."""
    import pytest

    from rvt_bench.core.files import FileLimitError
    from rvt_bench.loaders import hub
    from tests.test_corrupt_files import fifo_at

    with fifo_at(tmp_path / "data" / "test-00000-of-00001.parquet") as fifo, \
            pytest.raises(FileLimitError, match="parquet file .* is not a regular file \\(a FIFO\\); refused"):
        hub.parquet_file(fifo)
    with fifo_at(tmp_path / "zips" / "frames.zip"), \
            pytest.raises(FileLimitError, match="zip archive .*frames.zip is not a regular file \\(a FIFO\\); refused"):
        hub.extract_archives("revos", tmp_path / "zips", tmp_path / "out")
