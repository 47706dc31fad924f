"""Corpus BLEU and CIDEr-D as functions of per-sample sufficient statistics, for the bootstrap.

A corpus metric is not a mean of per-sample values, so its bootstrap must recompute it on every
resampled corpus. Re-running pycocoevalcap B times is slow (minutes for B = 1000); these classes
extract, once, what pycocoevalcap's scorers read from each sample and evaluate the metric for a
whole batch of resamples at once. A resample is a (B, n) matrix of counts: how often each of the n
samples is drawn (the identity resample is all ones).

- BLEU (pycocoevalcap 1.2 `bleu/bleu_scorer.py::BleuScorer.compute_score` with option "closest",
  which `bleu/bleu.py::Bleu` passes for every corpus size): per sample the hypothesis length, its closest reference length, and per n-gram order the clipped
  matches and the hypothesis n-grams. The corpus value uses only their sums, so a resample's sums
  are counts @ statistics; the final formula runs in Python floats in the scorer's own order, so
  the identity resample reproduces pycocoevalcap's number bit for bit.
- CIDEr-D (pycocoevalcap 1.2 `cider/cider_scorer.py::CiderScorer`, n = 4, sigma = 6): the IDF is
  the corpus's own (log N - log max(1, df), df = how many samples' references contain the n-gram),
  so it is recomputed for every resample: a sample drawn twice counts twice in df, as it would in
  the scorer. With the idf weight w of each n-gram, the clipped dot product of a hypothesis and a
  reference and both squared norms are sums of (term-frequency products) x w^2: linear in w^2, so
  every resample's per-sample scores come from one gather-and-sum over precomputed entries.
  Identity resample = pycocoevalcap's value to float summation order (~1e-15).

Inputs are PTBTokenizer output as rvt_bench.metrics.text.tokenize_captions returns it ({id: [text]} for
hypotheses, {id: [text, ...]} for references); ids are taken in the order of `ids`.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Hashable, Mapping, Sequence

import numpy as np

ORDERS = 4          # BLEU-1..4, CIDEr-D's n-gram orders
_SIGMA = 6.0        # CIDEr-D's length penalty
_SMALL, _TINY = 1e-9, 1e-15  # BleuScorer's guards against division by zero
_CHUNK_CELLS = 2_000_000     # float64 cells of a (replicates x entries) work array: 16 MB


def _ngrams(text: str, n: int = ORDERS) -> Counter:
    words = text.split()
    return Counter(tuple(words[i:i + k]) for k in range(1, n + 1) for i in range(len(words) - k + 1))


def _check(res: Mapping, gts: Mapping, ids: Sequence[Hashable]) -> None:
    if not ids:
        raise ValueError("corpus statistics: no samples")
    for sid in ids:
        if len(res[sid]) != 1 or not gts[sid]:
            raise ValueError(f"corpus statistics: sample {sid!r} needs exactly one hypothesis and at least one reference")


class BleuStatistics:
    """Per-sample BLEU sufficient statistics of one corpus (pycocoevalcap 1.2 Bleu(4)).

    stats: (n, 2 + 2 * ORDERS) float64: hypothesis length, effective reference length, hypothesis
    n-grams of order 1..4 ("guess"), clipped matches of order 1..4 ("correct").
    """

    def __init__(self, res: Mapping[Hashable, list], gts: Mapping[Hashable, list], ids: Sequence[Hashable]) -> None:
        _check(res, gts, ids)
        self.ids = list(ids)
        rows = []
        for sid in self.ids:
            hyp = res[sid][0]
            counts = _ngrams(hyp)
            maxcounts: dict[tuple, int] = {}
            reflens = []
            for ref in gts[sid]:
                reflens.append(len(ref.split()))
                for g, c in _ngrams(ref).items():
                    maxcounts[g] = max(maxcounts.get(g, 0), c)
            testlen = len(hyp.split())
            reflen = min((abs(r - testlen), r) for r in reflens)[1]  # closest; a tie goes to the shorter
            correct = [0] * ORDERS
            for g, c in counts.items():
                correct[len(g) - 1] += min(maxcounts.get(g, 0), c)
            guess = [max(0, testlen - k + 1) for k in range(1, ORDERS + 1)]
            rows.append([testlen, reflen, *guess, *correct])
        self.stats = np.asarray(rows, dtype=np.float64)

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        """(B, ORDERS) corpus BLEU-1..4 from (B, 2 + 2 * ORDERS) summed statistics, computed in
        Python floats in BleuScorer's order (a few thousand operations for B = 1000)."""
        out = np.empty((len(totals), ORDERS))
        for b, row in enumerate(totals.tolist()):
            testlen, reflen, guess, correct = row[0], row[1], row[2:2 + ORDERS], row[2 + ORDERS:]
            bleu = 1.0
            for k in range(ORDERS):
                bleu *= float(correct[k] + _TINY) / (guess[k] + _SMALL)
                out[b, k] = bleu ** (1.0 / (k + 1))
            ratio = (testlen + _TINY) / (reflen + _SMALL)
            if ratio < 1:
                out[b] *= math.exp(1 - 1 / ratio)
        return out

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        """(B, ORDERS) corpus BLEU-1..4 of B resamples given as (B, n) draw counts."""
        return self.corpus(np.asarray(counts, dtype=np.float64) @ self.stats)

    def sample_scores(self) -> np.ndarray:
        """(n, ORDERS) sentence-level BLEU-1..4 (pycocoevalcap's per-sample list, same formula)."""
        out = np.empty((len(self.ids), ORDERS))
        for i, row in enumerate(self.stats.tolist()):
            testlen, reflen, guess, correct = row[0], row[1], row[2:2 + ORDERS], row[2 + ORDERS:]
            bleu = 1.0
            for k in range(ORDERS):
                bleu *= (float(correct[k]) + _TINY) / (float(guess[k]) + _SMALL)
                out[i, k] = bleu ** (1.0 / (k + 1))
            ratio = (testlen + _TINY) / (reflen + _SMALL)
            if ratio < 1:
                out[i] *= math.exp(1 - 1 / ratio)
        return out


def _segment_sums(values: np.ndarray, segments: np.ndarray, n_segments: int) -> np.ndarray:
    """(B, n_segments): per row of `values` (B, m), the sums of its entries by `segments` (m,)."""
    rows = values.shape[0]
    # one flat bincount: entry (b, j) goes to bin b * n_segments + segments[j] (faster than reduceat)
    bins = (np.arange(rows)[:, None] * n_segments + segments[None, :]).ravel()
    return np.bincount(bins, weights=values.ravel(), minlength=rows * n_segments).reshape(rows, n_segments)


class CiderStatistics:
    """Per-sample CIDEr-D terms of one corpus (pycocoevalcap 1.2 CiderScorer), IDF left open.

    For sample i, reference r, order k: score_i = 10 / (ORDERS * |refs_i|) * sum_{r,k} pen_ir *
    dot_irk / (|h_ik| |r_irk|), with dot_irk = sum_g min(tf_h, tf_r) tf_r w_g^2, |h_ik|^2 =
    sum_g tf_h^2 w_g^2, |r_irk|^2 = sum_g tf_r^2 w_g^2 and w_g = log N - log max(1, df_g).
    """

    def __init__(self, res: Mapping[Hashable, list], gts: Mapping[Hashable, list], ids: Sequence[Hashable]) -> None:
        _check(res, gts, ids)
        self.ids = list(ids)
        vocab: dict[tuple, int] = {}

        def put(term: tuple[list, list, list], row: int, g: tuple, value: float) -> None:
            term[0].append(row)
            term[1].append(vocab.setdefault(g, len(vocab)))
            term[2].append(value)

        df_rows, df_cols = [], []              # sample i's references contain n-gram g
        hyp = ([], [], [])                      # (row = i * ORDERS + k, column, tf^2)
        ref = ([], [], [])                      # (row = pair * ORDERS + k, column, tf^2)
        dot = ([], [], [])                      # (row = pair * ORDERS + k, column, min(tf_h, tf_r) * tf_r)
        pair_sample, penalty = [], []
        for i, sid in enumerate(self.ids):
            h = _ngrams(res[sid][0])
            h_len = sum(c for g, c in h.items() if len(g) == 2)  # CiderScorer's "length" counts bigrams
            for g, c in h.items():
                put(hyp, i * ORDERS + len(g) - 1, g, float(c * c))
            seen: set[tuple] = set()
            for text in gts[sid]:
                p = len(pair_sample)
                r = _ngrams(text)
                r_len = sum(c for g, c in r.items() if len(g) == 2)
                pair_sample.append(i)
                penalty.append(np.e ** (-(float(h_len - r_len) ** 2) / (2 * _SIGMA ** 2)))
                for g, c in r.items():
                    put(ref, p * ORDERS + len(g) - 1, g, float(c * c))
                    if g in h:
                        put(dot, p * ORDERS + len(g) - 1, g, float(min(h[g], c) * c))
                seen.update(r)
            for g in seen:
                df_rows.append(i)
                df_cols.append(vocab[g])
        n = len(self.ids)
        # Most n-grams (nearly all 3- and 4-grams) occur in the references of at most one sample j:
        # their df in a resample is the draw count of j (or 0), so their w^2 is f(count_j) and their
        # terms can be pooled per (row, j) once. Only n-grams shared by several samples need df sums.
        df_rows_a, df_cols_a = np.asarray(df_rows, dtype=np.int64), np.asarray(df_cols, dtype=np.int64)
        owners_per_col = np.bincount(df_cols_a, minlength=len(vocab))
        owner = np.full(len(vocab), n, dtype=np.int64)  # column n of f: df always 0, w = log N
        owner[df_cols_a[owners_per_col[df_cols_a] == 1]] = df_rows_a[owners_per_col[df_cols_a] == 1]
        shared = np.flatnonzero(owners_per_col >= 2)
        compact = np.full(len(vocab), -1, dtype=np.int64)
        compact[shared] = np.arange(len(shared))
        self.n_shared = len(shared)
        keep = owners_per_col[df_cols_a] >= 2
        self._df = self._sorted(compact[df_cols_a[keep]], df_rows_a[keep], np.ones(int(keep.sum())))
        self._terms = [self._split(t, compact, owner) for t in (hyp, ref, dot)]
        self._pair_sample = np.asarray(pair_sample, dtype=np.int64)
        self._penalty = np.asarray(penalty, dtype=np.float64)
        n_refs = np.bincount(self._pair_sample, minlength=n).astype(np.float64)
        self._scale = 10.0 / (ORDERS * n_refs)

    @staticmethod
    def _sorted(segments, columns, values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        segments, columns = np.asarray(segments, dtype=np.int64), np.asarray(columns, dtype=np.int64)
        order = np.argsort(segments, kind="stable")
        return segments[order], columns[order], np.asarray(values, dtype=np.float64)[order]

    @classmethod
    def _split(cls, term: tuple[list, list, list], compact: np.ndarray, owner: np.ndarray) -> tuple:
        """(shared entries (row, shared column, value), pooled private entries (row, owner, value sum))."""
        rows, cols, vals = (np.asarray(x) for x in term)
        rows, cols, vals = rows.astype(np.int64), cols.astype(np.int64), vals.astype(np.float64)
        is_shared = compact[cols] >= 0 if len(cols) else np.zeros(0, dtype=bool)
        shared = cls._sorted(rows[is_shared], compact[cols[is_shared]], vals[is_shared])
        priv_rows, priv_owner = rows[~is_shared], owner[cols[~is_shared]]
        keys, inverse = np.unique(np.stack([priv_rows, priv_owner]), axis=1, return_inverse=True)
        pooled = np.bincount(inverse.ravel(), weights=vals[~is_shared], minlength=keys.shape[1])
        return shared, cls._sorted(keys[0], keys[1], pooled)

    def _weights(self, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Squared idf weights under each resample's document frequencies: (B, n_shared) for the
        shared n-grams, (B, n + 1) per owning sample (column n: n-grams in no reference)."""
        log_n = np.log(float(len(self.ids)))
        seg, samples, _ = self._df
        df = _segment_sums(counts[:, samples], seg, self.n_shared)
        w_shared = log_n - np.log(np.maximum(1.0, df))
        w_owned = log_n - np.log(np.maximum(1.0, np.c_[counts, np.zeros(len(counts))]))
        return w_shared * w_shared, w_owned * w_owned

    @staticmethod
    def _term(weights: tuple[np.ndarray, np.ndarray], term: tuple, n_rows: int) -> np.ndarray:
        (s_rows, s_cols, s_vals), (p_rows, p_owner, p_vals) = term
        return (_segment_sums(weights[0][:, s_cols] * s_vals, s_rows, n_rows)
                + _segment_sums(weights[1][:, p_owner] * p_vals, p_rows, n_rows))

    def _scores(self, weights: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """(B, n) per-sample CIDEr-D under the squared idf weights of B resamples."""
        n, n_pairs = len(self.ids), len(self._pair_sample)
        h2, r2, dot = (self._term(weights, t, rows) for t, rows in
                       zip(self._terms, (n * ORDERS, n_pairs * ORDERS, n_pairs * ORDERS)))
        pair_rows = np.repeat(self._pair_sample, ORDERS) * ORDERS + np.tile(np.arange(ORDERS), n_pairs)
        norms = np.sqrt(h2[:, pair_rows]) * np.sqrt(r2)
        with np.errstate(invalid="ignore", divide="ignore"):
            cos = np.where(norms > 0, dot / np.where(norms > 0, norms, 1.0), 0.0)
        cos *= np.repeat(self._penalty, ORDERS)
        per_sample = _segment_sums(cos, np.repeat(self._pair_sample, ORDERS), n)
        return per_sample * self._scale

    def resampled_sample_scores(self, counts: np.ndarray) -> np.ndarray:
        """(B, n): every sample's CIDEr-D under each of B resamples' IDF ((B, n) draw counts)."""
        counts = np.asarray(counts, dtype=np.float64)
        widest = max([len(self._df[0]), len(self.ids) + 1] + [len(part[0]) for t in self._terms for part in t])
        step = max(1, _CHUNK_CELLS // widest)
        out = np.empty(counts.shape)
        for lo in range(0, len(counts), step):
            out[lo:lo + step] = self._scores(self._weights(counts[lo:lo + step]))
        return out

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        """(B,) corpus CIDEr-D (the mean of the drawn samples' scores) of B resamples."""
        counts = np.asarray(counts, dtype=np.float64)
        return np.sum(counts * self.resampled_sample_scores(counts), axis=1) / counts.sum(axis=1)

    def sample_scores(self) -> np.ndarray:
        """(n,) per-sample CIDEr-D with the whole corpus's IDF (pycocoevalcap's per-sample scores)."""
        return self.resampled_sample_scores(np.ones((1, len(self.ids))))[0]
