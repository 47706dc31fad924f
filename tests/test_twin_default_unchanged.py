"""The default twin is what it was before instance embeddings and metric depth were added: the
demo's first sample under oracle and tiny foundation perception (every tool the DT-R1 prompt lists),
as the policy (full and compact JSON), the sandbox (code payload) and a twin file (to_dict) see it,
byte for byte against tests/data/twin_default/ (written by its make_reference.py at commit 2351c02)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent / "data" / "twin_default"


def test_the_default_twin_is_byte_identical_to_before(tmp_path):
    spec = importlib.util.spec_from_file_location("make_reference", HERE / "make_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    now = module.reference(tmp_path)
    pinned = {p.name: p.read_text(encoding="utf-8") for p in HERE.glob("*.json")}
    assert sorted(now) == sorted(pinned) and len(pinned) == 8
    for name, text in pinned.items():
        assert now[name] == text, name
