"""Fixtures shared across test modules."""
import pytest

import rvt_bench.harness.config  # noqa: F401  registers the structured configs before any test composes conf/

from tests.tiny_models import build_checkpoint


@pytest.fixture(scope="session")
def tiny_r1(tmp_path_factory):
    """(directory, tokenizer, model): the tiny random R1-style checkpoint of tests/tiny_models.py,
    built once per session. Tests must not change the model's weights (training loads its own copy
    from the directory)."""
    path = tmp_path_factory.mktemp("tiny_r1")
    tok, model = build_checkpoint(path)
    return path, tok, model
