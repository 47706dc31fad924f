"""Ref-YouTube-VOS: its GT is not public, so its protocol scores nothing here (the server does;
the submission zip is tested in tests/test_submission.py). This module gives the contract test
(tests/test_protocol_contract.py) samples of its format."""
from __future__ import annotations

from dataclasses import replace

from rvt_bench.core.types import Target
from tests.contract_samples import revos_samples


def contract_samples(rng, node):
    """Samples without GT, keyed as its loader keys them (video, exp_id)."""
    return [replace(s, target=Target(), meta={"video": s.id, "exp_id": "0"}) for s in revos_samples(rng)]


def test_it_is_declared_as_server_scored_with_a_per_frame_submission():
    from hydra.utils import instantiate

    from rvt_bench.core import benchmark

    decl = benchmark.declaration("refytvos")
    assert "{frame_id}" in decl["submission"]["path"] and "{video}" in decl["submission"]["path"]
    assert instantiate(decl["protocol"]).headline == []  # no public GT: the contract expects a warning, no metrics
