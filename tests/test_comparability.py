"""A value its own run calls not comparable is marked in every table, with the comparable variant
named; that variant has an interval; A and R are in ReVOS's layout (leaderboards/tables.py, revos)."""
import numpy as np

from rvt_bench.core.records import ScoreRecord
from rvt_bench.harness.table_cis import table_cis
from rvt_bench.leaderboards.tables import NOT_COMPARABLE, cell_keys, paper_table
from rvt_bench.metrics.protocols.revos import ReVOSProtocol, ReVOSValues


def records(nonbinary, n=20, seed=0):
    rng = np.random.default_rng(seed)
    return [ScoreRecord(f"v{k // 2}/{k}", meta={"type_id": k % 2}, source=f"v{k // 2}",
                        values={"revos": ReVOSValues(k % 2, *(float(x) for x in rng.random(2)), 0.5, {},
                                                     A=float(rng.random()), R=float(rng.random()), nonbinary=nonbinary)})
            for k in range(n)]


def body(protocol, recs):
    agg = protocol.aggregate(recs)
    out = {"dataset": "revos", "split": "valid", "model": "VISA-7B", "run_name": "r", **agg}
    out["ci"] = table_cis(protocol, recs, out, 200, 0)
    return out


def test_a_0_255_run_marks_a_and_r_in_markdown_and_latex_and_names_the_comparable_variant():
    run = body(ReVOSProtocol(), records(nonbinary=True))
    assert set(run["not_comparable"]) >= {"A", "R", "referring/R"}
    md = paper_table(run, "markdown", [])
    assert md.count(NOT_COMPARABLE) >= 3 and "comparable: R[binarized]" in md
    head = md.splitlines()[2]
    assert "| A |" in head and "| R |" in head  # A and R both columns of VISA's layout
    tex = paper_table(run, "latex", [])
    assert "$^\\ddagger$" in tex and "R[binarized]" in tex


def test_a_binary_run_is_not_marked_and_the_binarized_variant_has_its_interval():
    protocol = ReVOSProtocol(variant="binarized")
    run = body(protocol, records(nonbinary=True))
    assert "not_comparable" not in run
    assert "R[binarized]" in cell_keys("revos", run)
    ci = run["ci"]["R[binarized]"]
    assert ci["low"] is not None and ci["low"] <= run["metrics"]["R[binarized]"] <= ci["high"]
    assert NOT_COMPARABLE not in paper_table(run, "markdown", [])
    assert "not_comparable" not in body(ReVOSProtocol(), records(nonbinary=False))


def test_published_rows_name_their_evidence_and_sit_only_where_their_source_says():
    from rvt_bench.leaderboards.paper import evidence, paper_rows

    visa = paper_rows("revos")
    assert {evidence(r).split(" (")[0] for r in visa} >= {"secondary source"}
    assert evidence({"status": "verified"}) == "paper text"
    assert evidence({"status": "unverified", "evidence_source": "github:wangjunchi/LLMSeg imgs/x.png"}) == \
        "authors' README or code (wangjunchi/LLMSeg)"
    md = paper_table([], "markdown", paper_rows("llmseg40k"))
    for line in md.splitlines():
        if line.startswith("| ") and "(paper," in line:
            values = [c.strip() for c in line.split(" | ")[1:-1] if c.strip() not in ("–", "")]
            assert len(values) == len(set(values)) or len(set(values)) > 1, line  # no value shown twice
    tex = paper_table([], "latex", paper_rows("revos"))
    assert "secondary source (ReVSeg)" in tex


def test_data_that_is_not_the_published_data_marks_every_value_and_keeps_the_protocols_own_reasons():
    # rvt_bench.harness.results.mark_not_comparable: what the runner does for a data source that
    # says it is not comparable (e.g. RefCOCO's dataset.loader.gt=hub_polygon)
    from rvt_bench.harness.results import mark_not_comparable

    run = body(ReVOSProtocol(), records(nonbinary=True))
    own = dict(run["not_comparable"])
    mark_not_comparable(run, "the copy is not the release")
    assert {k: run["not_comparable"][k] for k in own} == own
    assert run["not_comparable"]["J&F"] == "the copy is not the release"
    assert all(run["not_comparable"].get(k) for k in cell_keys("revos", run) if k in run["metrics"])
    assert any("=" in k for k in run["not_comparable"])  # breakdown cells too
    tex = paper_table(run, "latex", [])
    assert "the copy is not the release" in tex and "$^\\ddagger$" in tex
    plain = body(ReVOSProtocol(), records(nonbinary=False))
    mark_not_comparable(plain, "the copy is not the release")
    assert NOT_COMPARABLE in paper_table(plain, "markdown", [])
