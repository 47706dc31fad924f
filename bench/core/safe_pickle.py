"""Benchmark pickles read as data: a restricted, bounded unpickler for data files such as REFER's
``refs(unc).p`` (RefCOCO/+/g) and VISA's Ref-DAVIS17 ``mask_dict.pkl``.

A pickle may name any importable callable and have the unpickler call it (``__reduce__``), and its
memo lets a few bytes refer to one object many times; a benchmark file must never be able to run
code, nor cost more than its size. ``load`` reads the file through ``rvt_bench.core.files`` (a
regular file, ``dataset.limits.max_file_mb``: a FIFO or ``/dev/zero`` is refused before a byte is
read), then checks every opcode (``pickletools.genops``, nothing built) before the unpickler runs:

- only the opcodes that build plain containers and numbers (dict, list, tuple, set, frozenset, str,
  bytes, bytearray, int, float, bool, None) and the globals below; a class, ``BUILD``, a persistent
  id, an extension code or an out-of-band buffer is refused;
- the size the data has once every memo reference is expanded (each container or number 1, each
  str or bytes 1 + its length / 8) is at most ``FANOUT`` per byte of the file: a refs list whose
  entries all refer to one memoized ref with a memoized list of a thousand sentences is refused,
  where the loader would have made a million samples; a pickler's own sharing (a dict key or a
  split name written once and referred to: under 1 per byte) stays far below;
- containers nest at most ``MAX_DEPTH`` levels (a set or bytes built by a call counts its argument
  tuple), an integer has at most ``MAX_INT_DIGITS`` decimal digits, a memo index is below the
  file's size (the unpickler allocates its memo table up to the largest index);
- a container changed after a memo reference to it (``GET``, ``DUP``) is refused: that is how a
  pickle builds a structure that contains itself (Python's pickler writes a reference to a
  container only once the container is complete), which no reader of the data expects.

The globals, each called only with the arguments its own pickling writes (none allocates by an
argument's value, none looks up a codec, so nothing is imported):

- ``builtins.set(list|tuple)``, ``frozenset(list|tuple)``, ``complex(number, number)``,
  ``bytes()`` (protocol 0-2 pickles build them by name; ``b""`` is ``bytes()``);
- ``builtins.bytearray()``, ``bytearray(bytes)``, ``bytearray(str, "latin-1")`` (Python 3 and 2);
- ``_codecs.encode(str, "latin1")``: how a protocol 2 pickle written by Python 3 stores ``bytes``
  (pycocotools RLE ``counts`` in VISA's mask dict).

``bytearray(500000000)``, ``bytes(10**9)`` or ``bytearray(str, "idna")`` are refused when called,
before anything is allocated or imported. Every refusal, and truncated or malformed input, is one
``DatasetFormatError`` line naming the file.
"""
from __future__ import annotations

import io
import pickle
import pickletools
from pathlib import Path
from typing import Any

from rvt_bench.core import files
from rvt_bench.core.types import DatasetFormatError

FANOUT = 8
"""Elements the data may hold, every memo reference expanded, per byte of the file (a str or bytes
counts 1 + its length / 8). Without sharing a pickle holds at most one per byte (each element takes
at least one opcode byte); 50,000 REFER-like refs measure 0.17-0.32 per byte in protocols 0-4, a
thousand dicts sharing two long keys (26 and 34 characters) with small-int values 0.55-0.99."""
_CHARS_PER_ELEMENT = 8
MAX_DEPTH = 64
"""Containers nested in one pickle (REFER's refs and VISA's mask dict need 4)."""
MAX_INT_DIGITS = 100
"""Decimal digits of one integer (ids and sizes need under 20)."""

_LATIN1 = ("latin1", "latin-1")
_INT_BOUND = 10 ** MAX_INT_DIGITS


class _Refused(pickle.UnpicklingError):
    pass


def _set(items: Any = ()) -> set:
    if not isinstance(items, (list, tuple)):
        raise _Refused(f"builtins.set is accepted only of a list or tuple, got {type(items).__name__}")
    return set(items)


def _frozenset(items: Any = ()) -> frozenset:
    if not isinstance(items, (list, tuple)):
        raise _Refused(f"builtins.frozenset is accepted only of a list or tuple, got {type(items).__name__}")
    return frozenset(items)


def _complex(real: Any = 0.0, imag: Any = 0.0) -> complex:
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (real, imag)):
        raise _Refused("builtins.complex is accepted only of two numbers")
    return complex(real, imag)


def _bytes(*args: Any) -> bytes:
    if args:
        raise _Refused(f"builtins.bytes is accepted only without arguments (b''), got {len(args)} "
                       f"(bytes of a size would allocate it)")
    return b""


def _bytearray(*args: Any) -> bytearray:
    if not args or (len(args) == 1 and isinstance(args[0], bytes)):
        return bytearray(*args)
    if len(args) == 2 and isinstance(args[0], str) and args[1] in _LATIN1:
        return bytearray(args[0], "latin-1")
    kinds = ", ".join(type(a).__name__ if not isinstance(a, str) or i == 0 else repr(a[:20]) for i, a in enumerate(args))
    raise _Refused(f"builtins.bytearray is accepted only of bytes or (str, 'latin-1'), got ({kinds}) "
                   f"(an integer would allocate that many bytes, a codec name may import a module)")


def _latin1_encode(text: Any, encoding: str = "utf-8", *rest: Any) -> bytes:
    """``_codecs.encode`` restricted to what Python 3 writes for bytes in protocol 0-2: (str, "latin1")."""
    if rest or not isinstance(text, str) or encoding not in _LATIN1:
        raise _Refused(f"_codecs.encode is accepted only as (str, 'latin1'), got encoding {str(encoding)[:20]!r}")
    return text.encode("latin1")


_BUILTINS = {"set": _set, "frozenset": _frozenset, "bytearray": _bytearray, "complex": _complex, "bytes": _bytes}


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module in ("builtins", "__builtin__") and name in _BUILTINS:
            return _BUILTINS[name]
        if module == "_codecs" and name == "encode":
            return _latin1_encode
        raise _Refused(f"global {module[:80]}.{name[:80]} is not allowed (only plain containers and numbers)")

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused("persistent ids are not allowed (only plain containers and numbers)")


# --- the opcode walk: bounds checked before anything is built ------------------------------------

_KIND = {  # opcode name -> what the walk does with it
    **dict.fromkeys(("INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "STRING", "BINSTRING",
                     "SHORT_BINSTRING", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8", "NONE", "NEWTRUE",
                     "NEWFALSE", "UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "FLOAT",
                     "BINFLOAT"), "scalar"),
    **dict.fromkeys(("GET", "BINGET", "LONG_BINGET"), "get"),
    **dict.fromkeys(("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"), "put"),
    **dict.fromkeys(("EMPTY_LIST", "EMPTY_DICT", "EMPTY_TUPLE", "EMPTY_SET"), "empty"),
    **dict.fromkeys(("LIST", "TUPLE", "DICT", "FROZENSET"), "from_mark"),
    "TUPLE1": "tuple1", "TUPLE2": "tuple2", "TUPLE3": "tuple3", "APPEND": "append", "SETITEM": "setitem",
    **dict.fromkeys(("APPENDS", "SETITEMS", "ADDITEMS"), "into_top"),  # pop to the mark, add to the container below
    "MARK": "mark", "POP": "pop", "POP_MARK": "pop_mark", "DUP": "dup", "GLOBAL": "global",
    "STACK_GLOBAL": "stack_global", "REDUCE": "reduce", "PROTO": "skip", "FRAME": "skip", "STOP": "stop",
    **dict.fromkeys(("PERSID", "BINPERSID"), "persistent ids are not allowed"),
    **dict.fromkeys(("EXT1", "EXT2", "EXT4"), "extension codes are not allowed"),
    **dict.fromkeys(("NEXT_BUFFER", "READONLY_BUFFER"), "out-of-band buffers are not allowed"),
    **dict.fromkeys(("INST", "OBJ", "NEWOBJ", "NEWOBJ_EX"), "class instances are not allowed"),
    "BUILD": "object state (BUILD) is not allowed",
}


class _Node:
    """What the walk knows of one container (or value built by a call): its expanded size, nesting
    depth, and whether a memo reference to it was taken (after which it may not change). A scalar
    is just its size (an int) on the walk's stack, a global is None."""

    __slots__ = ("size", "depth", "shared")

    def __init__(self, size: int, depth: int) -> None:
        self.size, self.depth, self.shared = size, depth, False


def _scalar_size(arg: Any) -> int:
    if type(arg) is int and not -_INT_BOUND < arg < _INT_BOUND:
        raise _Refused(f"an integer of more than {MAX_INT_DIGITS} digits")
    return 1 + len(arg) // _CHARS_PER_ELEMENT if isinstance(arg, (str, bytes, bytearray)) else 1


def check(data: bytes) -> int:
    """Walk the opcodes of `data` without building anything; raise pickle.UnpicklingError (a
    refusal: module docstring) or ValueError (malformed) for what `loads` must not unpickle.
    Returns the size of the data with every memo reference expanded (at most FANOUT x len(data))."""
    budget, memo_cap = FANOUT * len(data) + 1024, len(data)
    stack: list[_Node | int | None] = []
    marks: list[int] = []
    memo: dict[int, _Node | int | None] = {}

    def grow(node: _Node, children: list) -> None:
        if node.shared:
            raise _Refused("a container changed after a reference to it (a structure that contains itself)")
        size, depth = node.size, node.depth
        for child in children:
            if type(child) is int:
                size += child
            elif child is None:
                raise _Refused("a global used as data")
            else:
                size += child.size
                if child.depth >= depth:
                    depth = child.depth + 1
        node.size, node.depth = size, depth
        if size > budget:
            raise _Refused(f"its data, every memo reference expanded, is over {FANOUT} elements per byte of the "
                           f"file (a few bytes referring many times to one object)")
        if depth > MAX_DEPTH:
            raise _Refused(f"containers nested more than {MAX_DEPTH} levels deep")

    def pop_mark() -> list:
        if not marks:
            raise ValueError("no MARK on the stack")
        at = marks.pop()
        items = stack[at:]
        del stack[at:]
        return items

    def pop(n: int = 1) -> list:
        if len(stack) - (marks[-1] if marks else 0) < n:
            raise ValueError("stack underflow")
        items = stack[-n:]
        del stack[-n:]
        return items

    try:
        for op, arg, _pos in pickletools.genops(data):
            kind = _KIND.get(op.name, "opcode not allowed")
            if kind == "scalar":
                stack.append(_scalar_size(arg))
            elif kind == "get":
                if arg not in memo:
                    raise ValueError(f"memo index {arg} is not defined")
                node = memo[arg]
                if type(node) is _Node:
                    node.shared = True
                stack.append(node)
            elif kind == "put":
                index = len(memo) if arg is None else arg  # MEMOIZE has no argument
                if not isinstance(index, int) or not 0 <= index < memo_cap:
                    raise _Refused(f"memo index {str(index)[:30]} is not below the file's size {memo_cap}")
                if len(stack) == (marks[-1] if marks else 0):
                    raise ValueError("memo of an empty stack")
                memo[index] = stack[-1]
            elif kind == "setitem" or kind == "append":
                items = pop(2 if kind == "setitem" else 1)
                target = pop()[0]
                if type(target) is not _Node:
                    raise _Refused("only a container may be added to")
                grow(target, items)
                stack.append(target)
            elif kind == "empty":
                stack.append(_Node(1, 1))
            elif kind == "mark":
                marks.append(len(stack))
            elif kind == "into_top":
                items = pop_mark()
                if len(stack) == (marks[-1] if marks else 0) or type(stack[-1]) is not _Node:
                    raise ValueError(f"{op.name} without a container")
                grow(stack[-1], items)
            elif kind == "from_mark" or kind.startswith("tuple"):
                node = _Node(1, 1)
                grow(node, pop_mark() if kind == "from_mark" else pop(int(kind[-1])))
                stack.append(node)
            elif kind == "global":
                module, _, attr = str(arg).partition(" ")
                _Restricted.find_class(None, module, attr)  # type: ignore[arg-type]  # refused here, by name
                stack.append(None)
            elif kind == "stack_global":
                pop(2)  # the names are checked by find_class when the unpickler runs, before any call
                stack.append(None)
            elif kind == "reduce":
                args, func = pop()[0], pop()[0]
                if func is not None or type(args) is not _Node:
                    raise _Refused("only an allowed global may be called, with a tuple")
                node = _Node(1, 0)
                grow(node, [args])  # what an allowed call builds is at most its arguments' size
                node.depth = max(args.depth - 1, 0)  # set([...]) is as deep as its list
                stack.append(node)
            elif kind == "pop":
                if marks and marks[-1] == len(stack):
                    marks.pop()
                else:
                    pop()
            elif kind == "pop_mark":
                pop_mark()
            elif kind == "dup":
                top = pop()[0]
                if type(top) is _Node:
                    top.shared = True
                stack += [top, top]
            elif kind == "skip":
                continue
            elif kind == "stop":
                if len(stack) != 1 or marks:
                    raise ValueError("STOP with a stack that does not hold one value")
                top = stack[0]
                return top if type(top) is int else 0 if top is None else top.size
            else:
                raise _Refused(f"{kind} ({op.name}; only plain containers and numbers)")
    except ValueError as exc:  # an INT / LONG of text digits over Python's limit (sys.get_int_max_str_digits)
        if "integer string conversion" in str(exc):
            raise _Refused(f"an integer of more than {MAX_INT_DIGITS} digits") from None
        raise
    raise ValueError("no STOP opcode")


def loads(data: bytes, *, source: str = "<bytes>") -> Any:
    """Unpickle ``data`` with only plain containers and numbers, within the bounds of the module
    docstring (checked on the opcodes first, nothing built until they hold).

    Raises DatasetFormatError "<source>: not a plain-data pickle (...)" for any forbidden global,
    call, persistent id, extension or bound, and "<source>: not a readable pickle (...)" for
    malformed input; one line either way.
    """
    try:
        check(data)
        return _Restricted(io.BytesIO(data), encoding="latin1").load()
    except pickle.UnpicklingError as exc:
        raise DatasetFormatError(f"{source}: not a plain-data pickle ({_line(exc)}); a benchmark pickle may hold only "
                                 f"containers and numbers, within bounds, and nothing in it is imported or called") from None
    except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
            MemoryError, RecursionError, UnicodeError) as exc:
        raise DatasetFormatError(f"{source}: not a readable pickle ({type(exc).__name__}: {_line(exc)})") from None


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:300] + "..."


def load(path: str | Path) -> Any:
    """``loads`` of the file at ``path``, read by rvt_bench.core.files (a regular file within
    dataset.limits.max_file_mb). Raises DatasetFormatError as ``loads``, and (FileLimitError for
    a FIFO, a device or an oversize file) when the file cannot be read, naming it."""
    path = Path(path)
    try:
        data = files.read_bytes(path, "pickle")
    except FileNotFoundError:
        raise DatasetFormatError(f"{path}: cannot read the pickle (it does not exist)") from None
    except files.FileLimitError:
        raise
    except OSError as exc:
        raise DatasetFormatError(f"{path}: cannot read the pickle ({exc.strerror or exc})") from None
    return loads(data, source=str(path))
