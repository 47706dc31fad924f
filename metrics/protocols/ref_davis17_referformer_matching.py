"""Minimum-cost assignment, as scipy.optimize.linear_sum_assignment computes it (the shortest
augmenting path method of Crouse 2016, scipy's rectangular_lsap), so that ties fall where
scipy puts them: davis2017-evaluation's unsupervised task matches proposals to GT objects with
scipy and, on a tie, which pair wins moves J against F. Here so that the matching needs no scipy (no dependency of rvt-bench) at
run time; tests/test_ref_davis17_referformer_matching.py holds it equal to scipy on random and tied matrices.
"""
from __future__ import annotations

import numpy as np


def _augmenting_path(cost: np.ndarray, u: np.ndarray, v: np.ndarray, path: np.ndarray, row4col: np.ndarray,
                     shortest: np.ndarray, i: int, SR: np.ndarray, SC: np.ndarray) -> tuple[int, float]:
    nc = cost.shape[1]
    min_val = 0.0
    remaining = [nc - it - 1 for it in range(nc)]
    num_remaining = nc
    SR[:] = False
    SC[:] = False
    shortest[:] = np.inf
    sink = -1
    while sink == -1:
        index, lowest = -1, np.inf
        SR[i] = True
        for it in range(num_remaining):
            j = remaining[it]
            r = min_val + cost[i, j] - u[i] - v[j]
            if r < shortest[j]:
                path[j] = i
                shortest[j] = r
            # prefer an unassigned column among equals: a shorter path
            if shortest[j] < lowest or (shortest[j] == lowest and row4col[j] == -1):
                lowest = shortest[j]
                index = it
        min_val = lowest
        if min_val == np.inf:
            raise ValueError("cost matrix is infeasible")
        j = remaining[index]
        if row4col[j] == -1:
            sink = j
        else:
            i = int(row4col[j])
        SC[j] = True
        num_remaining -= 1
        remaining[index] = remaining[num_remaining]
    return sink, min_val


def linear_sum_assignment(cost, maximize: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(row indices, column indices) of a minimum-cost (maximum with `maximize`) assignment of the
    2-D float matrix `cost` [R, C]: min(R, C) pairs, rows ascending, as scipy returns them.
    Raises ValueError for a matrix that is not 2-D or holds NaN or -inf."""
    cost = np.array(cost, dtype=np.float64)
    if cost.ndim != 2:
        raise ValueError(f"expected a 2-D cost matrix, got shape {cost.shape}")
    if cost.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    transpose = cost.shape[1] < cost.shape[0]
    if transpose:
        cost = cost.T.copy()
    if maximize:
        cost = -cost
    if np.isnan(cost).any() or (cost == -np.inf).any():
        raise ValueError("cost matrix holds NaN or -inf")
    nr, nc = cost.shape
    u, v = np.zeros(nr), np.zeros(nc)
    shortest = np.full(nc, np.inf)
    path = np.full(nc, -1, np.int64)
    col4row = np.full(nr, -1, np.int64)
    row4col = np.full(nc, -1, np.int64)
    SR, SC = np.zeros(nr, bool), np.zeros(nc, bool)
    for cur in range(nr):
        sink, min_val = _augmenting_path(cost, u, v, path, row4col, shortest, cur, SR, SC)
        u[cur] += min_val
        for i in range(nr):
            if SR[i] and i != cur:
                u[i] += min_val - shortest[col4row[i]]
        for j in range(nc):
            if SC[j]:
                v[j] -= min_val - shortest[j]
        j = sink
        while True:
            i = int(path[j])
            row4col[j] = i
            col4row[i], j = j, int(col4row[i])
            if i == cur:
                break
    if transpose:
        order = np.argsort(col4row, kind="stable")
        return col4row[order].astype(np.int64), order.astype(np.int64)
    return np.arange(nr, dtype=np.int64), col4row.astype(np.int64)
