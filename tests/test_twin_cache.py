"""adapters/twin/cache.py: content-addressed keys, lossless round trips, atomic concurrent writes."""
from __future__ import annotations

import multiprocessing as mp
import numpy as np
import pytest

from rvt_bench.adapters.twin.cache import ToolCache, cache_key, video_digest
from rvt_bench.core.types import AdapterError


def _frames(tmp_path, contents):
    paths = []
    for i, data in enumerate(contents):
        p = tmp_path / f"f{i}.jpg"
        p.write_bytes(data)
        paths.append(str(p))
    return paths


def test_video_digest_addresses_content_not_names(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _frames(tmp_path / "a", [b"one", b"two"])
    moved = _frames(tmp_path / "b", [b"one", b"two"])
    assert video_digest(first) == video_digest(moved)
    assert video_digest(first) != video_digest(list(reversed(first)))
    assert video_digest(first) != video_digest(first[:1])


def test_video_digest_length_prefix_prevents_concatenation_collisions(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert video_digest(_frames(tmp_path / "a", [b"ab", b"c"])) != video_digest(_frames(tmp_path / "b", [b"a", b"bc"]))


def test_video_digest_of_a_missing_frame_names_it(tmp_path):
    with pytest.raises(AdapterError, match="nope.jpg"):
        video_digest([str(tmp_path / "nope.jpg")])


def test_key_ignores_dict_order_and_separates_every_component():
    base = cache_key("v", "SAM2", {"model_id": "m", "revision": "r"}, {"a": 1, "b": [1, 2]})
    assert base == cache_key("v", "SAM2", {"revision": "r", "model_id": "m"}, {"b": [1, 2], "a": 1})
    variants = [
        cache_key("w", "SAM2", {"model_id": "m", "revision": "r"}, {"a": 1, "b": [1, 2]}),
        cache_key("v", "OWLv2", {"model_id": "m", "revision": "r"}, {"a": 1, "b": [1, 2]}),
        cache_key("v", "SAM2", {"model_id": "m2", "revision": "r"}, {"a": 1, "b": [1, 2]}),
        cache_key("v", "SAM2", {"model_id": "m", "revision": "r2"}, {"a": 1, "b": [1, 2]}),
        cache_key("v", "SAM2", {"model_id": "m", "revision": "r"}, {"a": 2, "b": [1, 2]}),
    ]
    assert len({base, *variants}) == 6


def test_key_of_non_json_params_is_an_adapter_error():
    with pytest.raises(AdapterError, match="not JSON"):
        cache_key("v", "SAM2", {}, {"x": object()})


def test_round_trip_keeps_arrays_bit_exact_and_json_leaves(tmp_path):
    cache = ToolCache(tmp_path)
    depth = np.random.default_rng(0).normal(size=(2, 3, 5)).astype(np.float16)
    value = {"depth": depth, "unit": "relative", "tracks": [{"score": 0.25, "label": None,
                                                            "masks": [{"size": [2, 2], "counts": "04"}, None]}],
             "flags": np.array([True, False]), "n": np.int64(3)}
    returned = cache.put("k" * 64, value)
    stored = cache.get("k" * 64)
    for got in (returned, stored):
        assert got["depth"].dtype == np.float16 and np.array_equal(got["depth"], depth)
        assert got["flags"].tolist() == [True, False]
        assert got["tracks"] == value["tracks"] and got["unit"] == "relative" and got["n"] == 3


def test_get_or_compute_computes_once(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"x": np.arange(3)}

    cache = ToolCache(tmp_path)
    first, hit1 = cache.get_or_compute("a" * 64, compute)
    second, hit2 = ToolCache(tmp_path).get_or_compute("a" * 64, compute)
    assert (hit1, hit2) == (False, True) and len(calls) == 1
    assert np.array_equal(first["x"], second["x"])
    assert (cache.stats.hits, cache.stats.misses) == (0, 1)


def test_a_corrupt_entry_is_recomputed_and_overwritten(tmp_path):
    cache = ToolCache(tmp_path)
    key = "c" * 64
    cache.put(key, {"x": 1})
    cache.path(key).write_bytes(b"PK\x03\x04 torn")
    value, hit = cache.get_or_compute(key, lambda: {"x": 2})
    assert (value, hit, cache.stats.corrupt) == ({"x": 2}, False, 1)
    assert ToolCache(tmp_path).get(key) == {"x": 2}


def test_disabled_cache_stores_nothing(tmp_path):
    cache = ToolCache(tmp_path / "c", enabled=False)
    value, hit = cache.get_or_compute("d" * 64, lambda: {"x": np.ones(2, np.float16)})
    assert not hit and value["x"].dtype == np.float16
    assert not (tmp_path / "c").exists()


def test_values_must_be_dicts_of_json_or_arrays(tmp_path):
    with pytest.raises(AdapterError, match="dicts"):
        ToolCache(tmp_path).put("e" * 64, [1, 2])
    with pytest.raises(AdapterError, match="set"):
        ToolCache(tmp_path).put("e" * 64, {"x": {1, 2}})


def _writer(root: str, key: str, rounds: int) -> None:
    cache = ToolCache(root)
    big = np.full((256, 256), 7, dtype=np.float32)  # same content from every writer
    for _ in range(rounds):
        cache.put(key, {"depth": big, "who": "any"})
        got = cache.get(key)
        assert got is not None and float(got["depth"].sum()) == 7 * 256 * 256


def test_concurrent_shards_writing_one_key_leave_a_complete_entry(tmp_path):
    key = "f" * 64
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), key, 20)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert float(ToolCache(tmp_path).get(key)["depth"].sum()) == 7 * 256 * 256
    assert [p.name for p in (tmp_path / key[:2]).iterdir() if p.suffix == ".tmp"] == []
