"""rvt_bench.metrics.protocols.ref_davis17_referformer_matching.linear_sum_assignment equals scipy's on random, rectangular and tied
matrices (davis2017-evaluation's matching calls scipy; ties decide which pair's J and F count)."""
from __future__ import annotations

import numpy as np
import pytest

from rvt_bench.metrics.protocols.ref_davis17_referformer_matching import linear_sum_assignment

scipy_optimize = pytest.importorskip("scipy.optimize")


@pytest.mark.parametrize("seed", range(300))
def test_equals_scipy_on_random_and_tied_matrices(seed):
    rng = np.random.default_rng(seed)
    rows, cols = int(rng.integers(1, 7)), int(rng.integers(1, 7))
    if seed % 3 == 0:
        cost = rng.integers(0, 3, (rows, cols)).astype(float) / 4  # many ties
    elif seed % 3 == 1:
        cost = np.round(rng.random((rows, cols)), 1)
        cost[:, rng.integers(0, cols)] = cost[0, 0]  # an empty proposal's row of equal values
    else:
        cost = rng.random((rows, cols))
    for maximize in (False, True):
        ours = linear_sum_assignment(cost, maximize=maximize)
        ref = scipy_optimize.linear_sum_assignment(cost, maximize=maximize)
        assert [a.tolist() for a in ours] == [a.tolist() for a in ref], (seed, maximize, cost)


def test_davis2017s_call_on_a_negated_matrix():
    m = np.array([[0.5, 0.5], [0.5, 0.5], [0.25, 0.75]])
    assert [a.tolist() for a in linear_sum_assignment(-m)] == [a.tolist() for a in scipy_optimize.linear_sum_assignment(-m)]


def test_empty_and_bad_matrices():
    assert [a.tolist() for a in linear_sum_assignment(np.zeros((3, 0)))] == [[], []]
    with pytest.raises(ValueError):
        linear_sum_assignment(np.array([[np.nan]]))
