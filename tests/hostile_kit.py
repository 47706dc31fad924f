"""The hostile-dataset kit: the standard attacks on every file every benchmark declares, through a
whole run, each in bounded memory and time (issue 41 item 4; tests/test_hostile_datasets.py runs it).

What is attacked comes from the declarations alone: each conf/dataset/<name>.yaml lists under
`files` the globs its loader reads under root and their roles (rvt_bench.core.benchmark
.declared_files). A row is (benchmark, declared file, attack); the attacks of a role are in
ATTACKS. A benchmark added later is attacked as soon as it declares its files and has a fixture:
`hostile_fixture(base) -> root` in its own test module (tests/test_datasets_<name>.py, as its
`contract_samples`), writing its valid minimal release; the benchmarks of 2026-12 have theirs in
FIXTURES here, reusing the builders their tests already have. A benchmark without either fails
the kit (every row, and test_every_benchmark_declares_its_files_and_has_a_fixture): it cannot skip it.

One attack = a fresh copy of the benchmark's fixture, one file made hostile (the glob's first match
that a sample reads, when the pristine run tells; every match in its folder for the repeated PNG bomb), then the
runner's phases with the benchmark's own loader and protocol and its YAML's settings (load_samples,
the runner's FrameChecker, a model that reads every frame and answers the ground truth, the
protocol's score_or_fail and aggregate; without the run directory, whose files cost more than the
attack). It holds when the run ends as samples failed as data errors, each reason naming the file
(or, for a hostile name, saying it was refused; for the pixel limit, naming max_image_pixels), and
no other failure; or as the dataset refused in one line (a DatasetFormatError behind the exception;
the loaders' "every one of the N samples failed" may follow it with indented reasons). The reasons
the pristine fixture already gives (a bad sample some fixtures hold on purpose) are set aside.
Anything else fails the row: the attack unnoticed, another exception (RecursionError,
DecompressionBombError...), a reason that is a MemoryError (bounded by the kit's limit only),
more than ATTACK_SECONDS, or the process dying (a segfault, a kill at the address-space limit).

Memory and time: the kit runs in one process started by `python -m tests.hostile_kit` under an
address-space limit (RLIMIT_AS, ADDRESS_SPACE_GB), which imports the harness once and forks one
worker per benchmark; a worker that dies or overruns is replaced for the benchmark's remaining
rows, the row it was on failing with the reason.

The attacks (by role; every file role also gets fifo, dev_zero, symlink_out, truncated):
- fifo: the file replaced by a FIFO without a writer (a blocking read would hang);
- dev_zero: a symlink to /dev/zero (an unbounded read fills memory);
- symlink_out: a symlink to a file outside the root holding bytes of no format (a directory: to one
  whose files hold such bytes); links out of the root are followed by design (core.files.inside),
  so what is checked is that what they lead to is read as the hostile data it is;
- truncated: the first half of the file;
- json/jsonl: deep_json (10^6 nested arrays in place of the first value), huge_int (the first
  integer, else the first value, as 100,000 digits);
- pickle: pickle_bytearray (eight bytearray(500000000) calls, 222 bytes), pickle_memo (the two
  outer levels of lists repeated x1000 through memo references: RefCOCO's 3 KB fixture refs file
  becomes 115 KB holding 1000 x its refs, each with 1000 x its sentences),
  pickle_deep (300,000 nested lists in place of the first integer), pickle_huge_int (10^6000
  there), pickle_self_ref (a list holding itself there);
- json/jsonl/pickle: dotdot_name and absolute_name: each field of the document whose values name a
  file or folder of the fixture (a video, a frame, an image's file_name) has its first value
  replaced by a `..` path climbing to, or the absolute path of, a copy outside the root whose files
  hold bytes of no format: the reason must say the name was refused (a loader that follows it fails
  on the garbage instead, and the row fails; a field never read as a path notices nothing, allowed);
- image/mask_png: the kit's runs set dataset.limits.max_image_pixels to PIXELS (2048 x 2048), so
  that the images scale to it and the config's limit is the one checked: png_over_limit (a PNG
  header of 4096 x 4096 pixels, under PIL's own bomb limits: the reason must name
  max_image_pixels), png_bomb_repeated (every file of the glob in the attacked file's folder, one
  video's frames or masks, one PNG just under the limit, 2040 x 2040, 4 KB: within the limits, so
  it may load and score; it must stay within time and memory);
- frame_dir: fifo, dev_zero, symlink_out.
"""
from __future__ import annotations

import json
import logging
import os
import pickle
import resource
import shutil
import signal
import struct
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

REPO = Path(__file__).resolve().parent.parent
ADDRESS_SPACE_GB = 3      # RLIMIT_AS of the kit's process (the harness imported takes ~0.8 GB of it)
PIXELS = 1 << 22         # dataset.limits.max_image_pixels of the kit's runs (a 2048 x 2048 image): its images scale to it
ATTACK_SECONDS = 10       # one attack's run, fixture copy included
BENCHMARK_SECONDS = 120   # one benchmark's worker, all its rows
GARBAGE = b"not a dataset file \x00\xff\xfe" * 8
REFUSED_NAME = ("relative path", "leaves", "'..'", "absolute")  # how a refused name is worded (core.files.inside)


# --- fixtures: a valid minimal release per benchmark ------------------------------------------------


def _script(relative: str, module: str) -> Any:
    from tests.precomputed_runs import load_script

    return load_script(REPO / "tests" / "data" / relative, module)


def _parity(relative: str, module: str) -> Callable[[Path], Path]:
    return lambda base: _script(relative, module).write_fixture(base)[0]


def _corrupt_inputs(builder: str, folder: str | None, **kw: Any) -> Callable[[Path], Path]:
    def build(base: Path) -> Path:
        from tests import test_corrupt_inputs

        return getattr(test_corrupt_inputs, builder)(base / folder if folder else base, **kw)
    return build


def _mevis(base: Path) -> Path:
    from tests import mevis_fixture

    return mevis_fixture.write(base)[0]


def _demo(base: Path) -> Path:
    """tests/small_demo.py's copy without its VQA and summary queries (their caption metrics need a
    Java runtime, which the suite does not require)."""
    from tests.small_demo import make_small_demo

    root = make_small_demo(base / "demo")
    for name in ("rvtbench/test.jsonl", "splits/quick.txt"):
        path = root / name
        path.write_text("".join(line for line in path.read_text().splitlines(keepends=True)
                                if "vqa" not in line and "summary" not in line))
    return root


def _refytvos(base: Path) -> Path:
    from tests import refytvos_fixture

    return refytvos_fixture.write(base / "ref-youtube-vos")


FIXTURES: dict[str, Callable[[Path], Path]] = {
    # the benchmarks of 2026-12 -> writes its valid minimal release under a base folder, returns the
    # dataset root; a benchmark added later defines hostile_fixture in its own test module (fixture_of)
    "demo": _demo,                                                           # tests/small_demo.py
    "groundmore": _parity("groundmore_parity/make_fixture.py", "hostile_groundmore_fixture"),
    "jitbench": _corrupt_inputs("write_canonical", "JiTBench"),              # tests/test_corrupt_inputs.py
    "llmseg40k": _corrupt_inputs("write_llmseg", None),                      # root LLMSeg-40K, images in ../coco
    "mevis": _mevis,                                                         # tests/mevis_fixture.py
    "reasonseg": _corrupt_inputs("write_reasonseg", "ReasonSeg"),
    "reasonvos": _parity("reasonvos_parity/make_fixture.py", "hostile_reasonvos_fixture"),
    "ref_davis17": _parity("ref_davis17_parity/make_fixture.py", "hostile_ref_davis17_fixture"),
    "ref_davis17_referformer": _parity("ref_davis17_parity/make_fixture_referformer.py",
                                       "hostile_ref_davis17_referformer_fixture"),
    "refcoco": _parity("refcoco_parity/make_fixture.py", "hostile_refcoco_fixture"),
    "refytvos": _refytvos,                                                   # tests/refytvos_fixture.py
    "revos": _parity("visa_parity/make_fixture.py", "hostile_revos_fixture"),  # with mask_dict_foreground.json
    "rvtbench": _corrupt_inputs("write_canonical", "RVTBench", task="grounding"),
}


HOOK_MODULES = ("tests.test_datasets_{name}", "tests.test_{name}")  # as tests/test_protocol_contract.py's contract_samples


def fixture_of(name: str) -> Callable[[Path], Path] | None:
    """How benchmark `name`'s fixture is written: FIXTURES[name], else the `hostile_fixture(base) ->
    root` of its own test module (tests/test_datasets_<name>.py or tests/test_<name>.py), else None."""
    import importlib

    if name in FIXTURES:
        return FIXTURES[name]
    for pattern in HOOK_MODULES:
        module = pattern.format(name=name)
        if (REPO / (module.replace(".", "/") + ".py")).is_file():
            hook = getattr(importlib.import_module(module), "hostile_fixture", None)
            if hook is not None:
                return hook
    return None


# --- the attacks --------------------------------------------------------------------------------------


@dataclass
class Target:
    """What one attack works on: the attacked copy's root, the glob's matches in it (sorted; the
    first is the file attacked), the folder outside the root for symlink targets."""

    root: Path
    matches: list[Path]
    elsewhere: Path

    @property
    def first(self) -> Path:
        return self.matches[0]


Variant = tuple[str, Callable[[Target], None]]  # (label, change the copy) of one attack: one run each


@dataclass(frozen=True)
class Attack:
    """roles: the FILE_ROLES it applies to; variants: the runs it makes from the pristine fixture
    (the root, the glob's matches there, the files its samples read as frames); names: the reasons must name the attacked file;
    needles: each reason must hold one of them (empty: no such check); noticed: the run must find
    the attack (False: data within the limits, which may load and score, as long as it is bounded)."""

    roles: tuple[str, ...]
    variants: Callable[[Path, list[Path], set[str]], list[Variant]]
    names: bool = True
    needles: tuple[str, ...] = ()
    noticed: bool = True


def _one(change: Callable[[Target], None]) -> Callable[[Path, list[Path], set[str]], list[Variant]]:
    return lambda root, matches, frames: [("", change)]


def _replace(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _fifo(t: Target) -> None:
    _replace(t.first)
    os.mkfifo(t.first)


def _dev_zero(t: Target) -> None:
    _replace(t.first)
    os.symlink("/dev/zero", t.first)


def _symlink_out(t: Target) -> None:
    outside = t.elsewhere / t.first.name
    if t.first.is_dir():
        outside.mkdir(parents=True)
        for child in t.first.iterdir():
            (outside / child.name).write_bytes(GARBAGE)
    else:
        outside.parent.mkdir(parents=True, exist_ok=True)
        outside.write_bytes(GARBAGE)
    _replace(t.first)
    os.symlink(outside, t.first)


def _rewrite(path: Path, data: bytes) -> None:
    """Replace the file at `path` by a new one holding `data` (the copy's files are hard links to
    the pristine fixture's: never written in place)."""
    path.unlink()
    path.write_bytes(data)


def _truncated(t: Target) -> None:
    data = t.first.read_bytes()
    _rewrite(t.first, data[: len(data) // 2])


MARKER = "HOSTILE-KIT-MARKER-41"


def _leaves(value: Any, where: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """(path, leaf) of every non-container value of a JSON or pickled document, in document order."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, where + (k,))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _leaves(v, where + (i,))
    else:
        yield where, value


def _set(value: Any, where: tuple, new: Any) -> Any:
    """`value` with the leaf at `where` replaced by `new` (tuples rebuilt)."""
    if not where:
        return new
    head, rest = where[0], where[1:]
    if isinstance(value, dict):
        return {k: (_set(v, rest, new) if k == head else v) for k, v in value.items()}
    items = [(_set(v, rest, new) if i == head else v) for i, v in enumerate(value)]
    return tuple(items) if isinstance(value, tuple) else items


def _first_int(doc: Any) -> tuple:
    leaves = list(_leaves(doc))
    ints = [w for w, v in leaves if isinstance(v, int) and not isinstance(v, bool)]
    return ints[0] if ints else leaves[0][0]


def _read_doc(path: Path) -> tuple[str, Any]:
    """(kind, document) of a fixture file: json, jsonl (a list of line documents) or pickle. The
    fixture is the kit's own valid file, so the standard readers are used."""
    if path.suffix == ".jsonl":
        return "jsonl", [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if path.suffix in (".p", ".pkl", ".pickle"):
        return "pickle", pickle.loads(path.read_bytes())
    return "json", json.loads(path.read_text())


def _write_doc(path: Path, kind: str, doc: Any, splice: bytes | None = None) -> None:
    """Write `doc` back as `kind`; `splice` (bytes) replaces the MARKER string's encoding."""
    if kind == "pickle":
        data = pickle.dumps(doc, protocol=2)  # protocol 2: no frames, so a splice keeps it valid
        if splice is not None:
            encoded = MARKER.encode()
            data = data.replace(b"X" + struct.pack("<I", len(encoded)) + encoded, splice, 1)
        _rewrite(path, data)
        return
    text = "\n".join(json.dumps(d) for d in doc) + "\n" if kind == "jsonl" else json.dumps(doc)
    if splice is not None:
        text = text.replace(json.dumps(MARKER), splice.decode(), 1)
    _rewrite(path, text.encode())


def _spliced(new_bytes: bytes, pick: Callable[[Any], tuple] = _first_int) -> Callable[[Target], None]:
    """Put `new_bytes` (JSON text or pickle opcodes) in place of the document's value that `pick`
    chooses (of its first line, for JSON lines)."""
    def change(t: Target) -> None:
        kind, doc = _read_doc(t.first)
        where = ((0,) + pick(doc[0])) if kind == "jsonl" else pick(doc)
        _write_doc(t.first, kind, _set(doc, where, MARKER), splice=new_bytes)
    return change


def _pickled(value_of: Callable[[], Any]) -> Callable[[Target], None]:
    def change(t: Target) -> None:
        _, doc = _read_doc(t.first)
        _rewrite(t.first, pickle.dumps(_set(doc, _first_int(doc), value_of()), protocol=2))
    return change


def _self_ref() -> list:
    loop: list = []
    loop.append(loop)
    return loop


DEEP_JSON = 10**6
DEEP_PICKLE = 300_000


def _bytearray_pickle(t: Target) -> None:
    call = b"cbuiltins\nbytearray\nJ" + struct.pack("<i", 500_000_000) + b"\x85R"
    _rewrite(t.first, b"\x80\x02](" + call * 8 + b"e.")


def _amplified(value: Any, levels: int = 2, times: int = 1000) -> Any:
    """`value` with the elements of its `levels` outer levels of lists repeated `times` times: the
    same objects, so the pickle holds memo references, a few bytes each."""
    if isinstance(value, dict):
        return {k: _amplified(v, levels, times) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and levels > 0:
        items = [_amplified(v, levels - 1, times) for v in value]
        return [v for v in items for _ in range(times)]
    return value


def _memo_pickle(t: Target) -> None:
    _, doc = _read_doc(t.first)
    _rewrite(t.first, pickle.dumps(_amplified(doc), protocol=2))


def _png(width: int, height: int, rows: bytes | None = None) -> bytes:
    """A grayscale 8-bit PNG: rows (filter byte + pixels per row, zlib-compressed) or no IDAT at all."""
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    idat = chunk(b"IDAT", zlib.compress(rows, 9)) if rows is not None else b""
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + idat + chunk(b"IEND", b""))


def _png_over_limit(t: Target) -> None:
    _rewrite(t.first, _png(4096, 4096))  # 4 x PIXELS, under PIL's own limits: only max_image_pixels refuses it


BOMB_SIDE = 2040  # BOMB_SIDE**2 just under PIXELS


def _png_bomb_repeated(t: Target) -> None:
    bomb = t.elsewhere / "bomb.png"
    bomb.parent.mkdir(parents=True, exist_ok=True)
    bomb.write_bytes(_png(BOMB_SIDE, BOMB_SIDE, bytes(BOMB_SIDE + 1) * BOMB_SIDE))
    for path in [m for m in t.matches if m.parent == t.first.parent]:  # one sample's files: a video's frames or masks
        path.unlink()
        os.link(bomb, path)


# names: the fields of a document whose values name a file or folder of the fixture


def _known(root: Path, matches: list[Path]) -> list[Path]:
    """Every path of the fixture under root, and the declared matches (a `../` glob's too)."""
    return sorted(set(root.rglob("*")) | set(matches))


def _named(text: str, known: list[Path]) -> Path | None:
    """The fixture path `text` names (a trailing run of its components, with or without the file's
    suffix), or None."""
    if not text or len(text) > 255 or "\x00" in text or text.startswith(("/", ".")):
        return None
    parts = tuple(p for p in text.split("/") if p)
    for path in known:
        if path.parts[-len(parts):] == parts:
            return path
    for path in known:
        if path.suffix and path.with_suffix("").parts[-len(parts):] == parts:
            return path.with_suffix("")
    return None


def _name_fields(doc: Any, known: list[Path]) -> dict[tuple, list[tuple[tuple, bool, Path]]]:
    """{field: [(where, is_key, named path), ...]} of the values of each field naming a fixture path;
    a field is the document path with list indices and named keys wildcarded. A key is a name when
    most keys of its mapping are (videos by name, not a record's `frames`)."""
    out: dict[tuple, tuple[tuple, bool, Path]] = {}

    def walk(value: Any, where: tuple, field: tuple) -> None:
        if isinstance(value, dict):
            names = {k: _named(k, known) if isinstance(k, str) else None for k in value}
            named_keys = sum(n is not None for n in names.values())
            keyed = named_keys >= 2 and 2 * named_keys > len(names)  # a mapping keyed by names, not a record
            for k, v in value.items():
                named = names[k] if keyed else None
                if named is not None:
                    out.setdefault(field + ("{key}",), []).append((where + (k,), True, named))
                walk(v, where + (k,), field + ("{}" if named is not None else k,))
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, where + (i,), field + ("[]",))
        elif isinstance(value, str):
            named = _named(value, known)
            if named is not None:
                out.setdefault(field, []).append((where, False, named))

    walk(doc, (), ())
    return out


def _rename_key(doc: Any, where: tuple, new: str) -> Any:
    if len(where) == 1:
        return {(new if k == where[0] else k): v for k, v in doc.items()}
    head = where[0]
    if isinstance(doc, dict):
        return {k: (_rename_key(v, where[1:], new) if k == head else v) for k, v in doc.items()}
    return [(_rename_key(v, where[1:], new) if i == head else v) for i, v in enumerate(doc)]


def _garbage_copy(source: Path, dest: Path) -> None:
    """`source`'s shape at `dest` (a file, or a folder tree of files), every file holding GARBAGE."""
    if source.is_dir():
        for path in source.rglob("*"):
            if path.is_file():
                (dest / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
                (dest / path.relative_to(source)).write_bytes(GARBAGE)
        dest.mkdir(parents=True, exist_ok=True)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(GARBAGE)


def _name_variants(hostile: Callable[[str], str]) -> Callable[[Path, list[Path], set[str]], list[Variant]]:
    """One variant per name field of the document: its first value replaced by hostile(the absolute
    path of a copy, outside the root, of the file or folder it names, every file of it GARBAGE). A
    loader that refuses the name says so; one that follows it reads garbage and fails for that
    reason, not the name's (the row fails); one that never reads the field as a path notices nothing."""
    def variants(root: Path, matches: list[Path], frames: set[str]) -> list[Variant]:
        kind, doc = _read_doc(matches[0])
        fields = {f: _first_read_name(found, root, frames) for f, found in _name_fields(doc, _known(root, matches)).items()}

        def change_for(where: tuple, is_key: bool, named: Path) -> Callable[[Target], None]:
            relative = os.path.relpath(named, root)
            stem_only = not named.exists()  # the name is the file's stem: its loader adds the suffix

            def change(t: Target) -> None:
                kind, doc = _read_doc(t.first)
                source = Path(os.path.normpath(t.root / relative))
                if stem_only:
                    source = next(source.parent.glob(glob_escape(source.name) + ".*"))
                outside = t.elsewhere / "named" / source.name
                _garbage_copy(source, outside)
                new = hostile(str(outside.with_suffix("") if stem_only else outside))
                doc = _rename_key(doc, where, new) if is_key else _set(doc, where, new)
                _write_doc(t.first, kind, doc)
            return change

        return [("/".join(map(str, field)), change_for(*fields[field])) for field in sorted(fields, key=str)]
    return variants


def _first_read_name(found: list[tuple[tuple, bool, Path]], root: Path, frames: set[str]) -> tuple[tuple, bool, Path]:
    """The first value naming what a sample reads (a frame, or a folder of frames), else the first."""
    for where, is_key, named in found:
        relative = os.path.relpath(named, root)
        if any(f == relative or f.startswith(relative + os.sep) or f.startswith(relative + ".") for f in frames):
            return where, is_key, named
    return found[0]


def glob_escape(text: str) -> str:
    import glob

    return glob.escape(text)


def _dotdot(absolute: str) -> str:
    return "../" * 40 + absolute.lstrip("/")


FILES = ("json", "jsonl", "pickle", "image", "mask_png", "text")
DOCS = ("json", "jsonl", "pickle")
IMAGES = ("image", "mask_png")

ATTACKS: dict[str, Attack] = {
    "fifo": Attack(FILES + ("frame_dir",), _one(_fifo)),
    "dev_zero": Attack(FILES + ("frame_dir",), _one(_dev_zero)),
    "symlink_out": Attack(FILES + ("frame_dir",), _one(_symlink_out)),
    "truncated": Attack(FILES, _one(_truncated)),
    "deep_json": Attack(("json", "jsonl"), _one(_spliced(("[" * DEEP_JSON + "]" * DEEP_JSON).encode()))),
    "huge_int": Attack(("json", "jsonl"), _one(_spliced(b"9" * 100_000))),
    "pickle_bytearray": Attack(("pickle",), _one(_bytearray_pickle)),
    "pickle_memo": Attack(("pickle",), _one(_memo_pickle)),
    "pickle_deep": Attack(("pickle",), _one(_spliced(b"]" * DEEP_PICKLE + b"a" * (DEEP_PICKLE - 1)))),
    "pickle_huge_int": Attack(("pickle",), _one(_pickled(lambda: 10**6000))),
    "pickle_self_ref": Attack(("pickle",), _one(_pickled(_self_ref))),
    "dotdot_name": Attack(DOCS, _name_variants(_dotdot), names=False, needles=REFUSED_NAME, noticed=False),
    "absolute_name": Attack(DOCS, _name_variants(lambda absolute: absolute), names=False, needles=REFUSED_NAME,
                            noticed=False),
    "png_over_limit": Attack(IMAGES, _one(_png_over_limit), needles=("max_image_pixels",)),
    "png_bomb_repeated": Attack(IMAGES, _one(_png_bomb_repeated), names=False, noticed=False),
}


# --- rows ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    benchmark: str
    path: str      # the declared glob
    role: str
    attack: str

    @property
    def id(self) -> str:
        return f"{self.benchmark}:{self.path}:{self.attack}"


def rows(names: list[str] | None = None) -> list[Row]:
    """Every (benchmark, declared file, attack) of the declared benchmarks (or of `names`)."""
    from rvt_bench.core import benchmark

    out = []
    for name in names if names is not None else benchmark.declared_names():
        for entry in benchmark.declared_files(name):
            out += [Row(name, entry.path, entry.role, a) for a, spec in ATTACKS.items() if entry.role in spec.roles]
    return out


# --- one attack through a whole run -------------------------------------------------------------------


class AttackTimeout(BaseException):
    """ATTACK_SECONDS passed (a BaseException: no `except Exception` in the harness swallows it)."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise AttackTimeout()


def _run_config(name: str, root: Path, work: Path) -> Any:
    from omegaconf import OmegaConf

    node = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "dataset" / f"{name}.yaml"))
    node["root"] = str(root)
    node["limits"] = {"max_image_pixels": PIXELS}  # the config's limits must be the ones applied
    return OmegaConf.create({
        "dataset": node,
        "model": {"name": "reader", "_target_": "tests.test_corrupt_inputs.ReadingAdapter"},
        "run": {"root": str(work / "runs"), "name": None, "shard": 0, "num_shards": 1, "merge": False, "limit": None,
                "fail_fast": False, "batch_size": 1, "verify_frames": True, "score_workers": 1,
                "report": False},
        "leaderboard": {"dir": str(work / "boards"), "publish": False},
    })


def _outcome(name: str, root: Path, work: Path) -> tuple[str, list[str], list[str]]:
    """("refused" | "completed" | "crashed", data-error reasons, other failures) of the benchmark's
    run on `root`: the runner's phases without its run directory (its files, fsyncs and report cost
    more than the attack): rvt_bench.harness.samples.load_samples, the runner's FrameChecker, the
    model (reads every frame, answers the GT), the protocol's score_or_fail and aggregate."""
    from rvt_bench.core import files
    from rvt_bench.core.types import DatasetFormatError
    from rvt_bench.harness.cli import our_error
    from rvt_bench.loaders.config import read_limits

    cfg = _run_config(name, root, work)
    reasons: list[str] = []
    other: list[str] = []
    try:
        with files.limits_in_force(read_limits(cfg.dataset)):  # as the runner does
            return _phases(cfg, reasons, other)
    except AttackTimeout:
        raise
    except BaseException as exc:  # noqa: BLE001  (what is not the dataset's refusal is the finding)
        error = our_error(exc)
        if isinstance(error, DatasetFormatError):
            return "refused", [str(error)], []
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return "crashed", [], [f"{type(exc).__name__} ({last[:300]})"]


def _phases(cfg: Any, reasons: list[str], other: list[str]) -> tuple[str, list[str], list[str]]:
    """The runner's phases on `cfg`, data-error reasons into `reasons`, other failures into `other`."""
    from hydra.utils import instantiate

    from rvt_bench.core.types import DATA, Prediction, RvtBenchError
    from rvt_bench.harness.predict import FrameChecker
    from rvt_bench.harness.samples import load_samples
    from tests.test_corrupt_inputs import ReadingAdapter

    loaded = load_samples(cfg)
    reasons += [e.message for e in loaded.errors]
    protocol, model, checker, records = instantiate(cfg.dataset.protocol), ReadingAdapter(), FrameChecker(), []
    for sample in loaded.samples:
        pred = checker.check(sample)
        if pred is None:
            try:
                pred = model.predict(sample)
            except RvtBenchError as exc:
                pred = Prediction.failure(sample.id, exc.kind, str(exc))
        record, pred = protocol.score_or_fail(sample, pred)
        records.append(record)
        if pred.error is not None:
            kind, message = pred.error["kind"], pred.error["message"]
            (reasons if kind == DATA else other).append(message if kind == DATA else f"{kind}: {message[:300]}")
    protocol.aggregate(records)
    return "completed", reasons, other


def _one_line(kind: str, reason: str) -> bool:
    """A refusal is one line, or rvt_bench.loaders.base's "every one of the N samples failed" line
    followed by its indented first reasons, one line each (a sample's reason may list its bad
    frames on lines of their own, as ReVOS's does)."""
    lines = reason.strip("\n").split("\n")
    return kind != "refused" or len(lines) == 1 or all(line.startswith("  ") for line in lines[1:])


def judge(attack: Attack, kind: str, reasons: list[str], other: list[str], named: list[str]) -> str | None:
    """Why the outcome breaks the rule (None when it holds): data errors or a refusal, one line each
    (`_one_line`), naming one of `named` (when the attack asks it) and holding one of its needles,
    none a MemoryError (bounded only by the kit's address-space limit)."""
    if other:
        return f"{kind}, not as data errors: {other[0]}"
    if not reasons:
        return "unnoticed: the run completed without a data error" if attack.noticed else None
    for reason in reasons:
        if not _one_line(kind, reason):
            return f"a reason of {reason.count(chr(10)) + 1} lines: {reason[:300]!r}"
        if "MemoryError" in reason:
            return f"stopped only by the kit's {ADDRESS_SPACE_GB} GB address-space limit: {reason[:300]!r}"
        if attack.names and not any(n in reason for n in named):
            return f"a reason naming none of {named[:3]}: {reason[:300]!r}"
        if attack.needles and not any(n in reason for n in attack.needles):
            return f"a reason without any of {list(attack.needles)}: {reason[:300]!r}"
    return None


def _copy(base: Path, root: Path, into: Path) -> Path:
    """A copy of the fixture folder `base` in `into`; the copy's dataset root."""
    shutil.copytree(base, into / "base", symlinks=True, copy_function=os.link)  # hard links: attacks _rewrite
    return into / "base" / root.relative_to(base)


def _neutral(reasons: list[str], root: Path) -> set[str]:
    return {r.replace(str(root), "<root>") for r in reasons}


@dataclass
class Baseline:
    """The pristine fixture's run: the reasons it already gives (a fixture may hold a bad sample on
    purpose), with its root written <root>; the files its samples read as frames."""

    reasons: set[str]
    frames: set[str]


def baseline(name: str, base: Path, root: Path, work: Path) -> Baseline:
    """Run the pristine fixture of `name`. Raises AssertionError when it does not load and score."""
    from rvt_bench.core import files
    from rvt_bench.harness.samples import load_samples
    from rvt_bench.loaders.config import read_limits

    croot = _copy(base, root, work)
    kind, reasons, other = _outcome(name, croot, work)
    assert kind == "completed" and not other, f"{name}: its pristine fixture does not run: {kind} {other or reasons}"
    cfg = _run_config(name, croot, work)
    with files.limits_in_force(read_limits(cfg.dataset)):
        frames = {os.path.relpath(f, croot) for s in load_samples(cfg).samples for f in s.frames}
    shutil.rmtree(work, ignore_errors=True)
    return Baseline(_neutral(reasons, croot), frames)


def _first_read(matches: list[Path], root: Path, frames: set[str]) -> list[Path]:
    """`matches` with first the one a sample reads (a frame, or the folder of one), when any."""
    read = [m for m in matches if any(f == os.path.relpath(m, root) or f.startswith(os.path.relpath(m, root) + os.sep)
                                      for f in frames)]
    return read[:1] + [m for m in matches if m not in read[:1]]


def attack_row(row: Row, base: Path, root: Path, work: Path, before: Baseline) -> tuple[bool, str]:
    """Run every variant of `row`'s attack on copies of the fixture at `base` (dataset `root`)."""
    from rvt_bench.core.benchmark import declaration

    split = (declaration(row.benchmark) or {}).get("split", "")
    pattern = row.path.replace("{split}", str(split))
    matches = _first_read(sorted(root.glob(pattern)), root, before.frames)
    if not matches:
        return False, f"the declared {row.path!r} matches nothing in the fixture (FIXTURES in tests/hostile_kit.py)"
    attack = ATTACKS[row.attack]
    variants = attack.variants(root, matches, before.frames)
    if not variants:
        return True, "no field of the document names a file (nothing to attack)"
    notes = []
    for label, change in variants:
        copy = work / f"copy{len(notes)}"
        croot = _copy(base, root, copy)
        target = Target(croot, [croot / m.relative_to(root) for m in matches], copy / "elsewhere")
        change(target)
        kind, reasons, other = _outcome(row.benchmark, croot, copy)
        reasons = [r for r in reasons if r.replace(str(croot), "<root>") not in before.reasons]
        problem = judge(attack, kind, reasons, other, [p.name for p in target.matches[:50]])
        where = f" [{label}]" if label else ""
        if problem:
            return False, f"{row.attack}{where}: {problem}"
        notes.append(f"{kind}{where}: {reasons[0][:160] if reasons else 'no data error (within the limits)'}")
        shutil.rmtree(copy, ignore_errors=True)
    return True, " | ".join(notes)


# --- the process: forked workers, one per benchmark, under the address-space limit -----------------------

NO_FIXTURE = ("no fixture for {name}: define hostile_fixture(base) -> root (its valid minimal release written under "
              "base) in tests/test_datasets_{name}.py (tests/hostile_kit.py)")
WORKERS = 2  # benchmarks attacked at once (the suite's machines have 2 cores)


def _worker(name: str, todo: list[Row], work: Path, out: Path) -> None:
    """Attack `todo` (rows of benchmark `name`), a JSON line in `out` before ({"row", "start"}) and
    after ({"row", "ok", "note", "seconds"}) each."""
    logging.disable(logging.CRITICAL)
    signal.signal(signal.SIGALRM, _on_alarm)
    base, root = work / "fixture", Path((work / "root.txt").read_text())
    with out.open("a") as log:
        def write(record: dict) -> None:
            log.write(json.dumps(record) + "\n")
            log.flush()

        try:
            before = baseline(name, base, root, work / "baseline")
        except BaseException as exc:  # noqa: BLE001  (every row fails with it)
            for row in todo:
                write({"row": row.id, "ok": False, "seconds": 0, "note": f"no baseline: {type(exc).__name__}: {exc}"[:500]})
            return
        for k, row in enumerate(todo):
            write({"row": row.id, "start": True})
            started = time.monotonic()
            signal.alarm(ATTACK_SECONDS)
            try:
                ok, note = attack_row(row, base, root, work / f"row{k}", before)
            except AttackTimeout:
                ok, note = False, f"over {ATTACK_SECONDS} s"
            except BaseException as exc:  # noqa: BLE001  (the kit's own failure is this row's)
                ok, note = False, f"the kit failed: {type(exc).__name__}: {exc}"[:500]
            finally:
                signal.alarm(0)
            write({"row": row.id, "ok": ok, "note": note, "seconds": round(time.monotonic() - started, 2)})
            shutil.rmtree(work / f"row{k}", ignore_errors=True)


def read_results(out: Path) -> tuple[dict[str, dict], str | None]:
    """(the finished rows of a results file by id, the row started and not finished or None)."""
    done, started = {}, None
    if out.exists():
        for line in out.read_text().splitlines():
            record = json.loads(line)
            if record.get("start"):
                started = record["row"]
            else:
                done[record["row"]] = record
                started = None
    return done, started


@dataclass
class _Bench:
    name: str
    rows: list[Row]
    work: Path
    out: Path
    pid: int = 0
    deadline: float = 0.0


def _fork(bench: _Bench) -> None:
    done, _ = read_results(bench.out)
    todo = [r for r in bench.rows if r.id not in done]
    pid = os.fork()
    if pid == 0:
        try:
            _worker(bench.name, todo, bench.work, bench.out)
        finally:
            os._exit(0)
    bench.pid, bench.deadline = pid, time.monotonic() + BENCHMARK_SECONDS


def _ended(bench: _Bench, status: int | None) -> bool:
    """After its worker ended (`status`; None: killed at BENCHMARK_SECONDS): fail the row it was on;
    True when every row has its result."""
    done, started = read_results(bench.out)
    if started is not None:
        why = (f"the worker was killed after {BENCHMARK_SECONDS} s" if status is None else
               f"the process died ({'signal ' + str(os.WTERMSIG(status)) if os.WIFSIGNALED(status) else 'exit ' + str(os.WEXITSTATUS(status))})")
        with bench.out.open("a") as log:
            log.write(json.dumps({"row": started, "ok": False, "seconds": None, "note": why}) + "\n")
        done[started] = {}
    return all(r.id in done for r in bench.rows)


def run_kit(out_dir: Path, work: Path, names: list[str] | None = None) -> None:
    """Attack every row of `names` (default: every declared benchmark), WORKERS forked workers at a
    time, one per benchmark; results as JSON lines in out_dir/<benchmark>.jsonl. A benchmark
    without a fixture gets a failed line per row; a worker that dies or overruns is replaced for
    the benchmark's remaining rows, the row it was on failed with the reason."""
    import tests.test_corrupt_inputs  # noqa: F401  (imported once, before the forks)
    from rvt_bench.harness.predict import FrameChecker  # noqa: F401
    from rvt_bench.harness.samples import load_samples  # noqa: F401

    out_dir.mkdir(parents=True, exist_ok=True)
    every = rows(names)
    pending: list[_Bench] = []
    for name in dict.fromkeys(r.benchmark for r in every):
        bench = _Bench(name, [r for r in every if r.benchmark == name], work / name, out_dir / f"{name}.jsonl")
        build = fixture_of(name)
        if build is None:
            with bench.out.open("a") as log:
                for row in bench.rows:
                    log.write(json.dumps({"row": row.id, "ok": False, "seconds": 0, "note": NO_FIXTURE.format(name=name)})
                              + "\n")
            continue
        (bench.work / "fixture").mkdir(parents=True)
        (bench.work / "root.txt").write_text(str(build(bench.work / "fixture")))
        pending.append(bench)
    running: list[_Bench] = []
    while pending or running:
        while pending and len(running) < WORKERS:
            bench = pending.pop(0)
            _fork(bench)
            running.append(bench)
        time.sleep(0.02)
        for bench in list(running):
            finished, status = os.waitpid(bench.pid, os.WNOHANG)
            if not finished and time.monotonic() > bench.deadline:
                os.kill(bench.pid, signal.SIGKILL)
                os.waitpid(bench.pid, 0)
                finished, status = bench.pid, None
            if finished:
                running.remove(bench)
                if not _ended(bench, status):
                    pending.insert(0, bench)


def limit_address_space(gigabytes: float = ADDRESS_SPACE_GB) -> None:
    """RLIMIT_AS of this process (a preexec_fn of the kit's subprocess)."""
    size = int(gigabytes * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (size, size))


def main(argv: list[str]) -> int:
    """python -m tests.hostile_kit OUT_DIR WORKDIR [benchmark ...]"""
    out, work, names = Path(argv[0]), Path(argv[1]), argv[2:] or None
    limit_address_space()
    os.environ["TQDM_DISABLE"] = "1"
    run_kit(out, work, names)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
