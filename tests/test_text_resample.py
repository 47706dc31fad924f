"""rvt_bench.metrics.text_resample: corpus BLEU / CIDEr-D from per-sample statistics equal pycocoevalcap's on
the identity resample and on resampled corpora (a sample drawn k times = k copies of it, CIDEr's
IDF recomputed); rvt_bench.harness.bootstrap turns them into intervals and paired tests."""
from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pycocoevalcap")
from pycocoevalcap.bleu.bleu import Bleu  # noqa: E402
from pycocoevalcap.cider.cider import Cider  # noqa: E402

from rvt_bench.core.records import ScoreRecord  # noqa: E402
from rvt_bench.harness import bootstrap  # noqa: E402
from rvt_bench.metrics.protocols.rvtbench import RVTBenchProtocol  # noqa: E402
from rvt_bench.metrics.text_resample import BleuStatistics, CiderStatistics  # noqa: E402
from rvt_bench.metrics.units.captions import TextValues  # noqa: E402

PARITY = json.loads((Path(__file__).parent / "data" / "captions" / "parity.json").read_text())
needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed")


def random_corpus(n, seed, vocabulary=30):
    """Tokenised captions as PTBTokenizer returns them: lower-case words joined by spaces; some
    hypotheses empty, 1-3 references per sample, a small vocabulary so that n-grams are shared."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(vocabulary)]

    def text(lo):
        return " ".join(rng.choice(words, size=int(rng.integers(lo, 12))))

    res = {f"s{i:03d}": [text(0)] for i in range(n)}
    gts = {f"s{i:03d}": [text(1) for _ in range(int(rng.integers(1, 4)))] for i in range(n)}
    return res, gts, list(res)


def pycoco(res, gts, counts, ids):
    """pycocoevalcap's corpus BLEU-1..4 and CIDEr-D on the corpus where sample i appears counts[i] times."""
    r2, g2 = {}, {}
    for sid, c in zip(ids, counts):
        for copy in range(int(c)):
            r2[f"{sid}#{copy}"], g2[f"{sid}#{copy}"] = res[sid], gts[sid]
    with contextlib.redirect_stdout(io.StringIO()):
        bleu, _ = Bleu(4).compute_score(g2, r2)
    cider, _ = Cider().compute_score(g2, r2)
    return np.array(bleu), float(cider)


@pytest.fixture(scope="module")
def parity_tokens():
    """The 8-sample parity corpus through PTBTokenizer (as rvt_bench.metrics.text feeds pycocoevalcap)."""
    if shutil.which("java") is None:
        pytest.skip("java is not installed")
    from rvt_bench.metrics.text import tokenize_captions

    inputs = PARITY["inputs"]
    return tokenize_captions([tuple(p) for p in inputs["predictions"]], inputs["references"])


@needs_java
def test_identity_resample_is_pycocoevalcaps_corpus_value(parity_tokens):
    res, gts = parity_tokens
    ids = list(gts)
    ones = np.ones((1, len(ids)))
    expected = PARITY["outputs"]["corpus"]  # printed by pycocoevalcap itself (tests/data/captions/README.md)
    bleu = BleuStatistics(res, gts, ids).resampled(ones)[0]
    assert bleu.tolist() == [expected[f"Bleu_{k}"] for k in (1, 2, 3, 4)]  # bit for bit
    # CIDEr-D sums the same terms in another order: equal to float rounding
    assert CiderStatistics(res, gts, ids).resampled(ones)[0] == pytest.approx(expected["CIDEr"], abs=1e-12)


@needs_java
def test_per_sample_scores_are_pycocoevalcaps(parity_tokens):
    res, gts = parity_tokens
    ids = list(gts)
    per_sample = PARITY["outputs"]["per_sample"]
    np.testing.assert_allclose(CiderStatistics(res, gts, ids).sample_scores(), [per_sample[i]["CIDEr"] for i in ids],
                               rtol=0, atol=1e-12)
    assert BleuStatistics(res, gts, ids).sample_scores()[:, 3].tolist() == [per_sample[i]["Bleu_4"] for i in ids]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_resampled_corpus_equals_pycocoevalcap_on_the_duplicated_corpus(seed):
    res, gts, ids = random_corpus(40, seed)
    bleu, cider = BleuStatistics(res, gts, ids), CiderStatistics(res, gts, ids)
    draws = np.random.default_rng(seed).multinomial(len(ids), np.full(len(ids), 1 / len(ids)), size=5)
    got_bleu, got_cider = bleu.resampled(draws), cider.resampled(draws)
    for k, counts in enumerate(draws):
        want_bleu, want_cider = pycoco(res, gts, counts, ids)
        assert got_bleu[k].tolist() == want_bleu.tolist()
        assert got_cider[k] == pytest.approx(want_cider, abs=1e-12)


def test_one_sample_corpus_uses_the_closest_reference_length_and_cider_zero():
    # Bleu passes option='closest' for every corpus size (BleuScorer's own 'average' default is unused)
    res, gts = {"a": ["a dog runs fast"]}, {"a": ["a dog runs", "a dog runs very fast today"]}
    want_bleu, want_cider = pycoco(res, gts, [1], ["a"])
    assert BleuStatistics(res, gts, ["a"]).resampled(np.ones((1, 1)))[0].tolist() == want_bleu.tolist()
    assert CiderStatistics(res, gts, ["a"]).resampled(np.ones((1, 1)))[0] == want_cider == 0.0


def text_records(res, gts, ids, task="vqa"):
    # records as RVTBenchProtocol.score writes them; texts already tokenised, which PTBTokenizer keeps
    return [ScoreRecord(i, task=task, values={"text": TextValues(res[i][0], gts[i])}) for i in ids]


@needs_java
def test_headline_ci_of_corpus_metrics_contains_the_reported_value():
    res, gts, ids = random_corpus(60, 7)
    records = text_records(res, gts, ids)
    protocol = RVTBenchProtocol(headline=["vqa/BLEU-4", "vqa/CIDEr"])
    reported = protocol.aggregate(records)["metrics"]
    cis = bootstrap.headline_cis(protocol, records, reported, b=300, seed=5)
    for key in ("vqa/BLEU-4", "vqa/CIDEr"):
        ci = cis[key]
        assert ci["low"] < reported[key] < ci["high"], (key, ci, reported[key])
        assert ci["n"] == 60 and ci["B"] == 300 and "recomputed" in ci["resampled"]
    assert cis == bootstrap.headline_cis(protocol, records, reported, b=300, seed=5)  # seeded: deterministic


@needs_java
def test_corpus_metric_of_two_runs_pairs_draws_and_swaps():
    res, gts, ids = random_corpus(50, 11)
    better = {i: gts[i][:1] for i in ids}  # B answers with a reference: higher BLEU and CIDEr
    protocol = RVTBenchProtocol(headline=["vqa/CIDEr"])
    for key in ("vqa/BLEU-4", "vqa/CIDEr"):
        ea = protocol.estimator(key, text_records(res, gts, ids))
        eb = protocol.estimator(key, text_records(better, gts, ids))
        same = bootstrap.paired(ea, ea, b=200)
        assert same.delta == 0 and same.low == same.high == 0 and same.p_value == 1.0
        result = bootstrap.paired(ea, eb, b=199)
        assert result.delta > 0 and result.low > 0 and result.p_value == pytest.approx(1 / 200)
        assert result.wins > result.losses


@needs_java
def test_runs_with_other_references_are_not_paired():
    res, gts, ids = random_corpus(10, 3)
    other = {i: ["something else entirely"] for i in ids}
    ea = RVTBenchProtocol().estimator("vqa/CIDEr", text_records(res, gts, ids))
    eb = RVTBenchProtocol().estimator("vqa/CIDEr", text_records(res, other, ids))
    with pytest.raises(ValueError, match="references differ"):
        bootstrap.paired(ea, eb, b=10)


@needs_java
def test_demo_runs_carry_corpus_intervals_and_compare_them(tmp_path):
    from rvt_bench.harness.compare import compare, format_comparison
    from tests.demo_runs import demo_run

    a, b = demo_run(tmp_path, 3, 0, "a", "run.bootstrap.B=200"), demo_run(tmp_path, 5, 1, "b", "run.bootstrap.B=200")
    body = json.loads((a.run_dir / "metrics.json").read_text())
    ci = body["ci"]["rvt/vqa/CIDEr"]
    assert ci["low"] <= body["metrics"]["rvt/vqa/CIDEr"] <= ci["high"] and ci["B"] == 200 and ci["n"] == 3
    result = compare(a.run_dir, b.run_dir, b=200)
    row = next(r for r in result["metrics"] if r["key"] == "rvt/vqa/CIDEr")
    assert row["delta"] == pytest.approx(b.metrics["metrics"]["rvt/vqa/CIDEr"] - body["metrics"]["rvt/vqa/CIDEr"])
    assert 0 < row["p_value"] <= 1 and row["wins"] + row["losses"] + row["ties"] == 3
    # CIDEr is a score: printed as it is, not x100
    assert f"| rvt/vqa/CIDEr | score | {row['a']:.3f} | {row['b']:.3f} |" in format_comparison(result)


@needs_java
def test_rouge_l_is_a_plain_mean_of_per_sample_scores_with_an_interval():
    res, gts, ids = random_corpus(30, 9)
    records = text_records(res, gts, ids)
    protocol = RVTBenchProtocol(headline=["vqa/ROUGE-L"], text_metrics=("ROUGE-L",))
    reported = protocol.aggregate(records)["metrics"]
    ci = bootstrap.headline_cis(protocol, records, reported, b=200)["vqa/ROUGE-L"]
    assert ci["low"] < reported["vqa/ROUGE-L"] < ci["high"] and ci["resampled"] == "samples"
