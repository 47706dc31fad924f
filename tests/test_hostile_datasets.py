"""Every benchmark's declared files under the standard attacks (tests/hostile_kit.py; issue 41 item 4).

One row per (benchmark, declared file, attack), from conf/dataset/*.yaml `files` alone: a benchmark
added later is attacked with no case written for it. The kit runs once per session in one process
under an address-space limit (hostile_kit.ADDRESS_SPACE_GB) and a time limit, forking a worker per
benchmark; each row then reads its result. A row holds when its attack ends as samples failed with
their reasons, or the dataset refused in one line, within the limits (the kit's docstring).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from rvt_bench.core import benchmark
from tests import hostile_kit
from tests.hostile_kit import REPO

ROWS = hostile_kit.rows()
KIT_SECONDS = 600  # the whole kit (73 s measured, docs/adding-a-benchmark.md); its time is printed (-s)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, dict]:
    out, work = tmp_path_factory.mktemp("hostile_results"), tmp_path_factory.mktemp("hostile_work")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "tests.hostile_kit", str(out), str(work)], cwd=REPO,
                          capture_output=True, text=True, timeout=KIT_SECONDS,
                          env={**os.environ, "TQDM_DISABLE": "1"})
    print(f"hostile kit: {len(ROWS)} rows in {time.monotonic() - started:.1f} s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    found: dict[str, dict] = {}
    for path in sorted(out.glob("*.jsonl")):
        found.update(hostile_kit.read_results(path)[0])
    return found


def test_every_benchmark_declares_its_files_and_has_a_fixture():
    names = benchmark.declared_names()
    assert names
    undeclared = [n for n in names if not benchmark.declared_files(n)]
    assert not undeclared, f"declare `files` in conf/dataset/<name>.yaml (docs/adding-a-benchmark.md): {undeclared}"
    without = [n for n in names if hostile_kit.fixture_of(n) is None]
    assert not without, [hostile_kit.NO_FIXTURE.format(name=n) for n in without]


def test_every_role_is_attacked():
    roles = {r for a in hostile_kit.ATTACKS.values() for r in a.roles}
    assert roles == set(benchmark.FILE_ROLES)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_attack(results, row):
    result = results.get(row.id)
    assert result is not None, f"{row.id}: no result (the kit stopped before it)"
    assert result["ok"], f"{row.id}: {result['note']}"


# --- the kit itself: it fails what breaks the rule -------------------------------------------------------


def test_the_judge_fails_what_breaks_the_rule():
    attack = hostile_kit.ATTACKS["fifo"]
    named = ["a.json"]
    assert hostile_kit.judge(attack, "completed", ["file /r/a.json is not a regular file (a FIFO); refused"], [], named) is None
    assert "unnoticed" in hostile_kit.judge(attack, "completed", [], [], named)
    assert "not as data errors" in hostile_kit.judge(attack, "crashed", [], ["RecursionError (...)"], named)
    assert "naming none" in hostile_kit.judge(attack, "completed", ["sample 3 failed"], [], named)
    assert "address-space limit" in hostile_kit.judge(attack, "refused", ["/r/a.json: (MemoryError: )"], [], named)
    assert "lines" in hostile_kit.judge(attack, "refused", ["/r/a.json bad\nTraceback (most recent call last):"], [], named)
    every = "x: every one of the 2 samples of /r failed to load; first reasons:\n  s1: /r/a.json bad\n  s2: /r/a.json bad"
    assert hostile_kit.judge(attack, "refused", [every], [], named) is None
    names = hostile_kit.ATTACKS["dotdot_name"]
    assert "without any of" in hostile_kit.judge(names, "completed", ["frame /r/../x.jpg is not a readable image"], [], [])
    assert hostile_kit.judge(names, "completed", ["name '../x' leaves /r (a '..' path); refused"], [], []) is None
    assert hostile_kit.judge(names, "completed", [], [], []) is None  # a field never read as a path
    pixels = hostile_kit.ATTACKS["png_over_limit"]
    assert "max_image_pixels" in hostile_kit.judge(pixels, "completed", ["frame /r/a.json: cannot load this image"], [], named)


def test_an_attack_that_changes_nothing_fails_its_row(tmp_path):
    """End to end on ReasonSeg's fixture: a harmless "attack" is unnoticed, so its row fails; the real
    FIFO holds."""
    base = tmp_path / "fixture"
    base.mkdir()
    root = hostile_kit.FIXTURES["reasonseg"](base)
    before = hostile_kit.baseline("reasonseg", base, root, tmp_path / "baseline")
    row = hostile_kit.Row("reasonseg", "{split}/*.json", "json", "harmless")
    hostile_kit.ATTACKS["harmless"] = hostile_kit.Attack(("json",), hostile_kit._one(lambda t: None))
    try:
        ok, note = hostile_kit.attack_row(row, base, root, tmp_path / "row", before)
    finally:
        del hostile_kit.ATTACKS["harmless"]
    assert not ok and "unnoticed" in note
    ok, note = hostile_kit.attack_row(hostile_kit.Row("reasonseg", "{split}/*.json", "json", "fifo"), base, root,
                                      tmp_path / "fifo", before)
    assert ok and "a.json is not a regular file (a FIFO)" in note, note


def test_a_benchmark_declared_later_gets_rows_and_without_a_fixture_fails_them(tmp_path, monkeypatch):
    (tmp_path / "conf" / "dataset").mkdir(parents=True)
    (tmp_path / "conf" / "dataset" / "laterbench.yaml").write_text(
        "name: laterbench\nfiles:\n  - {path: 'meta.json', role: json}\n  - {path: 'frames/*/*.jpg', role: image}\n")
    monkeypatch.setenv(benchmark.CONF_PATH_ENV, str(tmp_path / "conf"))
    rows = hostile_kit.rows(["laterbench"])
    assert {r.attack for r in rows} == {"fifo", "dev_zero", "symlink_out", "truncated", "deep_json", "huge_int",
                                        "dotdot_name", "absolute_name", "png_over_limit", "png_bomb_repeated"}
    assert hostile_kit.fixture_of("laterbench") is None
    hostile_kit.run_kit(tmp_path / "out", tmp_path / "work", ["laterbench"])
    done, _ = hostile_kit.read_results(tmp_path / "out" / "laterbench.jsonl")
    assert sorted(done) == sorted(r.id for r in rows)
    assert all(not r["ok"] and "define hostile_fixture" in r["note"] for r in done.values())
