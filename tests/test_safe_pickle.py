"""rvt_bench.core.safe_pickle: a benchmark pickle holds data, never code.

Plain data (what REFER's refs(unc).p and VISA's mask_dict.pkl hold, across protocols 0-5, bytes
written by Python 3 as _codecs.encode(..., 'latin1') in protocol 2) loads unchanged; a pickle whose
__reduce__ would touch a marker file is refused with one DatasetFormatError line and the marker is
never created, whatever the global it names.
"""
from __future__ import annotations

import os
import pickle
import pickletools

import pytest

from rvt_bench.core import safe_pickle
from rvt_bench.core.types import DatasetFormatError

PLAIN = {
    "refs": [{"ref_id": 3, "ann_id": 1007, "split": "testA", "sentences": [{"sent": "man left", "sent_id": 9,
                                                                           "tokens": ["man", "left"]}],
              "bbox": (1.5, 2.0, 30.25, 40.0)}],
    "rle": {"size": [4, 5], "counts": b"\x00\x01\xff latin1 bytes"},
    "misc": [None, True, False, -7, 2 ** 70, float("inf"), "\u00e9\u4e2d", set([1, 2]), frozenset(["a"]),
             bytearray(b"ab"), complex(1, 2)],
}


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_plain_data_loads_unchanged_in_every_protocol(tmp_path, protocol):
    path = tmp_path / "refs(unc).p"
    path.write_bytes(pickle.dumps(PLAIN, protocol=protocol))
    assert safe_pickle.load(path) == PLAIN


def test_protocol_2_bytes_come_through_codecs_encode_latin1():
    data = pickle.dumps(b"\x00\xfe", protocol=2)
    assert b"_codecs" in data  # the global the real files need
    assert safe_pickle.loads(data) == b"\x00\xfe"


def test_codecs_encode_with_another_codec_is_refused():
    # _codecs.encode("x", "rot13") built by hand: the one allowed global, called with a codec it refuses
    data = b"c_codecs\nencode\n(X\x01\x00\x00\x00xX\x05\x00\x00\x00rot13tR."
    with pytest.raises(DatasetFormatError, match="not a plain-data pickle.*latin1"):
        safe_pickle.loads(data, source="evil.p")


class _Touch:
    """A harmless payload: unpickling it with pickle.load would create the marker file."""

    def __init__(self, marker, via):
        self.marker, self.via = str(marker), via

    def __reduce__(self):
        if self.via == "open":
            return (open, (self.marker, "w"))
        if self.via == "system":
            return (os.system, (f"touch {self.marker}",))
        if self.via == "eval":
            return (eval, (f"open({self.marker!r}, 'w')",))
        return (pickle.loads, (pickle.dumps(_Touch(self.marker, "open")),))  # nested: a global that unpickles


@pytest.mark.parametrize("via", ["open", "system", "eval", "nested"])
@pytest.mark.parametrize("protocol", [0, 2, 4])
def test_a_pickle_that_calls_anything_is_one_data_error_and_runs_nothing(tmp_path, via, protocol):
    marker = tmp_path / "marker"
    path = tmp_path / "refs(unc).p"
    path.write_bytes(pickle.dumps({"refs": [_Touch(marker, via)]}, protocol=protocol))
    with pytest.raises(DatasetFormatError) as err:
        safe_pickle.load(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message and "not allowed" in message
    assert not marker.exists()


def test_the_payload_really_would_touch_the_marker(tmp_path):
    # the harmless payload is live: the standard unpickler creates the marker (so the test above means something)
    marker = tmp_path / "marker"
    pickle.loads(pickle.dumps(_Touch(marker, "open")))
    assert marker.exists()


def test_a_class_instance_is_refused_by_name(tmp_path):
    data = pickle.dumps(DatasetFormatError("x"), protocol=2)
    with pytest.raises(DatasetFormatError, match=r"global rvt_bench\.core\.types\.DatasetFormatError is not allowed"):
        safe_pickle.loads(data)


def test_persistent_id_is_refused():
    data = b"(lp0\nPkey\na."  # a list holding persistent id "key"
    pickletools.dis(data, out=open(os.devnull, "w"))  # well formed
    with pytest.raises(DatasetFormatError, match="persistent ids are not allowed"):
        safe_pickle.loads(data)


@pytest.mark.parametrize("data", [b"", b"\x80\x04\x95", b"(lp0\nI1\n", b"not a pickle at all"])
def test_malformed_input_is_one_data_error(data):
    with pytest.raises(DatasetFormatError, match="^<bytes>: not a "):
        safe_pickle.loads(data)


def test_an_unreadable_file_names_itself(tmp_path):
    with pytest.raises(DatasetFormatError, match="cannot read the pickle"):
        safe_pickle.load(tmp_path / "absent.p")


# --- bounds: a pickle costs what its size says, whatever its opcodes ask for ------------------------

_BYTEARRAY = b"c__builtin__\nbytearray\n"


def _fill_bombs(count: int) -> bytes:
    """A list of `count` bytearray(500000000): each call would zero-fill 500 MB."""
    call = pickle.BINGET + b"\x00" + pickle.BININT + (500_000_000).to_bytes(4, "little") + pickle.TUPLE1 + pickle.REDUCE
    return pickle.PROTO + b"\x02" + pickle.GLOBAL + _BYTEARRAY[1:] + pickle.BINPUT + b"\x00" + pickle.POP + \
        pickle.MARK + call * count + pickle.LIST + pickle.STOP


def _amplified_refs(n: int = 1000) -> bytes:
    """REFER's refs format with one ref and one sentence each memoized and referred to `n` times:
    a few KB that unpickle to n x n sentences."""
    sent = {"sent": "man left", "sent_id": 9, "tokens": ["man", "left"], "raw": "man left"}
    ref = {"ref_id": 3, "ann_id": 1007, "image_id": 1, "split": "testA", "sentences": [sent] * n, "sent_ids": [9]}
    return pickle.dumps([ref] * n, protocol=2)


def _in_a_child(code: str, limit_mb: int = 500) -> tuple[str, float]:
    """(stdout, seconds) of `code` run by a fresh Python under an address-space limit of `limit_mb`."""
    import subprocess
    import sys
    import time

    head = (f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({limit_mb} << 20, {limit_mb} << 20))\n"
            "from rvt_bench.core import safe_pickle\nfrom rvt_bench.core.types import DatasetFormatError\n")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", head + code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, time.monotonic() - start


@pytest.mark.parametrize("make, says", [(_fill_bombs, "bytearray is accepted only of bytes"),
                                        (_amplified_refs, "every memo reference expanded")])
def test_a_fill_bomb_and_a_memo_amplified_refs_file_are_one_line_in_bounded_time_and_memory(tmp_path, make, says):
    data = make(12) if make is _fill_bombs else make()
    assert len(data) <= (139 if make is _fill_bombs else 5000)
    path = tmp_path / "refs(unc).p"
    path.write_bytes(data)
    code = (f"try:\n    safe_pickle.load({str(path)!r})\nexcept DatasetFormatError as exc:\n    print('DFE', exc)\n"
            # this process's own peak (VmHWM, reset by exec): ru_maxrss keeps the forking parent's, which
            # is pytest's whole RSS late in a full suite
            "print(next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM:')))\n")
    out, seconds = _in_a_child(code)
    line, peak_kb = out.splitlines()
    assert line.startswith(f"DFE {path}: not a plain-data pickle") and says in line
    assert seconds < 5 and int(peak_kb) < 500 << 10


def test_the_amplified_refs_would_unpickle_to_a_million_sentences():
    # what the test above refuses is real: the standard unpickler builds 1000 refs of 1000 sentences
    refs = pickle.loads(_amplified_refs())
    assert sum(len(r["sentences"]) for r in refs) == 10 ** 6


@pytest.mark.parametrize("args, says", [
    (pickle.BININT + (10 ** 9).to_bytes(4, "little") + pickle.TUPLE1, "bytearray is accepted only of bytes"),
    (pickle.BINUNICODE + b"\x01\x00\x00\x00x" + pickle.SHORT_BINUNICODE + b"\x04idna" + pickle.TUPLE2, "'idna'"),
    (pickle.BINUNICODE + b"\x01\x00\x00\x00x" + pickle.SHORT_BINUNICODE + b"\x05utf-8" + pickle.TUPLE2, "'utf-8'")])
def test_bytearray_of_a_size_or_another_codec_is_refused_before_it_allocates_or_imports(args, says):
    data = pickle.PROTO + b"\x02" + pickle.GLOBAL + _BYTEARRAY[1:] + args + pickle.REDUCE + pickle.STOP
    with pytest.raises(DatasetFormatError, match="not a plain-data pickle") as err:
        safe_pickle.loads(data)
    assert says in str(err.value)


def test_a_codec_name_imports_nothing():
    # bytearray("x", "idna") would import encodings.idna, stringprep and unicodedata
    code = ("import sys\nbefore = set(sys.modules)\n"
            "data = b'\\x80\\x02c__builtin__\\nbytearray\\nX\\x01\\x00\\x00\\x00x\\x8c\\x04idna\\x86R.'\n"
            "try:\n    safe_pickle.loads(data)\nexcept DatasetFormatError:\n    pass\n"
            "print(sorted(set(sys.modules) - before))\n")
    out, _ = _in_a_child(code, limit_mb=4096)
    assert out.strip() == "[]"


def test_bytes_of_a_size_is_refused_and_empty_bytes_in_protocol_2_loads():
    assert pickle.dumps(b"", protocol=2) == b"\x80\x02c__builtin__\nbytes\nq\x00)Rq\x01."  # what Python 3 writes
    assert safe_pickle.loads(pickle.dumps([b"", b"x"], protocol=2)) == [b"", b"x"]
    data = b"\x80\x02c__builtin__\nbytes\nJ\x00\xca\x9a;\x85R."  # bytes(1000000000)
    with pytest.raises(DatasetFormatError, match="bytes is accepted only without arguments"):
        safe_pickle.loads(data)


def test_python2_bytearray_and_shared_complete_containers_load():
    # Python 2 pickles a bytearray as bytearray(unicode, 'latin-1'); a container referred to twice once complete is data
    data = b"c__builtin__\nbytearray\n(Vab\nVlatin-1\ntR."
    assert safe_pickle.loads(data) == bytearray(b"ab")
    box = [1, 2]
    loaded = safe_pickle.loads(pickle.dumps({"a": box, "b": box, "c": [box]}, protocol=2))
    assert loaded == {"a": [1, 2], "b": [1, 2], "c": [[1, 2]]} and loaded["a"] is loaded["b"]


def _deep(levels: int, protocol_2: bool = True) -> bytes:
    """A list nested `levels` deep, built by hand (the pickler itself recurses)."""
    return (pickle.PROTO + b"\x02" if protocol_2 else b"") + pickle.EMPTY_LIST * levels + \
        pickle.APPEND * (levels - 1) + pickle.STOP


@pytest.mark.parametrize("data, says", [
    (_deep(200_000), "nested more than 64 levels"),
    (pickle.PROTO + b"\x02" + pickle.EMPTY_DICT + pickle.SHORT_BINUNICODE + b"\x06counts" + _deep(300_000)[2:-1]
     + pickle.SETITEM + pickle.STOP, "nested more than 64 levels"),
    (pickle.dumps({"sent_id": 10 ** 6000}, protocol=2), "integer of more than 100 digits"),
    (b"(dp0\nVsent_id\np1\nI" + b"9" * 6000 + b"\ns.", "integer of more than 100 digits"),
    (b"(dp0\nVsent_id\np1\nL" + b"9" * 200 + b"L\ns.", "integer of more than 100 digits"),
    (pickle.PROTO + b"\x02" + pickle.NONE + pickle.LONG_BINPUT + b"\xff\xff\xff\x7f" + pickle.STOP, "memo index"),
    (pickle.PROTO + b"\x02" + pickle.EMPTY_LIST + pickle.DUP + pickle.APPEND + pickle.STOP, "contains itself"),
])
def test_depth_digits_memo_index_and_self_reference_are_bounded(data, says):
    with pytest.raises(DatasetFormatError, match="^<bytes>: not a plain-data pickle") as err:
        safe_pickle.loads(data)
    assert says in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_a_picklers_own_sharing_is_far_below_the_fan_out_bound(protocol):
    # dict keys and short strings written once and referred to by the memo (json-loaded keys are shared)
    records = [{"a_rather_long_key_name_for_testing": k % 7, "another_long_key_name_here": "train"} for k in range(1000)]
    data = pickle.dumps(records, protocol=protocol)
    assert safe_pickle.check(data) < 1.0 * len(data) and safe_pickle.loads(data) == records


def test_the_bounds_keep_what_is_in_them():
    assert safe_pickle.loads(_deep(safe_pickle.MAX_DEPTH)) is not None
    assert safe_pickle.loads(pickle.dumps({"sent_id": 10 ** 99 - 1}, protocol=2)) == {"sent_id": 10 ** 99 - 1}


@pytest.mark.parametrize("protocol", [0, 2, 4])
def test_a_self_referencing_sent_id_list_is_refused(protocol):
    ids = [9]
    ids.append(ids)
    data = pickle.dumps([{"split": "val", "sentences": [{"sent": "x", "sent_id": ids}]}], protocol=protocol)
    with pytest.raises(DatasetFormatError, match="a structure that contains itself"):
        safe_pickle.loads(data, source="refs(unc).p")


def test_a_fifo_or_a_device_is_refused_before_a_byte_is_read(tmp_path):
    fifo = tmp_path / "refs(unc).p"
    os.mkfifo(fifo)  # no writer: a blocking read would hang
    with pytest.raises(DatasetFormatError, match="is not a regular file"):
        safe_pickle.load(fifo)
    zero = tmp_path / "mask_dict.pkl"
    zero.symlink_to("/dev/zero")  # a plain read would run until MemoryError
    with pytest.raises(DatasetFormatError, match="is not a regular file"):
        safe_pickle.load(zero)
