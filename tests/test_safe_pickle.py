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
