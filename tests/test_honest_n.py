"""What a run did not score is never shown as scored (issue 44): on a MeViS fixture whose reference
drops 3 of 12 expressions, n is the 9 the headline averages in metrics.json, the leaderboard CSV, the
summary and report.html, the 3 are listed apart with their reason; the reference's and the honest
(failed-zero) number are in one run; `render` marks a variant run and sorts by a value every row has;
`compare` compares the samples both runs scored; a run without GT ends with its submission."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests import mevis_fixture

DROPPED = ["vidA/2", "vidA/3", "vidB/1"]


def write_with_drops(out: Path) -> tuple[Path, Path, Path]:
    """tests/mevis_fixture.py's release with two more expressions (vidA/4, vidB/3: copies of vidA/0 and
    vidB/0, predictions included): 12 expressions; its submission without vidA/2's folder, so the
    reference drops 3 (vidA/2, vidA/3, vidB/1) and zeroes vidC's 2. Returns (root, pred, pred_full):
    pred_full keeps vidA/2, so the reference drops only 2 there."""
    root, pred = mevis_fixture.write(out)
    meta_path = root / "valid_u" / "meta_expressions.json"
    meta = json.loads(meta_path.read_text())
    meta["videos"]["vidA"]["expressions"]["4"] = dict(meta["videos"]["vidA"]["expressions"]["0"])
    meta["videos"]["vidB"]["expressions"]["3"] = dict(meta["videos"]["vidB"]["expressions"]["0"])
    meta_path.write_text(json.dumps(meta))
    shutil.copytree(pred / "vidA" / "0", pred / "vidA" / "4")
    shutil.copytree(pred / "vidB" / "0", pred / "vidB" / "3")
    full = out / "pred_full"
    shutil.copytree(pred, full)
    shutil.rmtree(pred / "vidA" / "2")
    return root, pred, full


def _run(root: Path, pred: Path, tmp: Path, *extra: str):
    from hydra import compose, initialize_config_dir

    import run_bench  # noqa: F401  (registers the ${repo:} resolver)
    from rvt_bench.harness.runner import run

    conf = Path(__file__).resolve().parents[1] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose("config", overrides=["+dataset=mevis", f"dataset.root={root}", "+model=precomputed",
                                           f"model.root={pred}", f"run.root={tmp / 'runs'}",
                                           f"leaderboard.dir={tmp / 'boards'}", "run.bootstrap.B=200", *extra])
    return run(cfg)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("honest")
    root, pred, full = write_with_drops(tmp / "data")
    reference = _run(root, pred, tmp)
    zero = _run(root, pred, tmp, "dataset.protocol.failed=zero", "run.report=false")
    fuller = _run(root, full, tmp, "run.report=false", "leaderboard.publish=false")
    return tmp, reference, zero, fuller


def _rows(tmp: Path) -> list[dict[str, str]]:
    with open(tmp / "boards" / "mevis.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_n_is_what_the_headline_averages_and_the_dropped_are_excluded_with_their_reason(runs):
    tmp, reference, _, _ = runs
    body = reference.metrics
    assert body["n"] == 9 and body["excluded"] == {next(iter(body["excluded"])): 3} and body["failures"] == 5
    assert [e["sample_id"] for e in body["excluded_samples"]] == DROPPED
    assert all("eval_mevis.py drops it" in e["reason"] for e in body["excluded_samples"])
    # both numbers in one run, the reference's the headline; its interval over the 9
    assert list(body["metrics"])[:3] == ["J&F", "J", "F"] and body["headline"] == ["J&F", "J", "F"]
    assert body["metrics"]["J&F[failed-zero]"] < body["metrics"]["J&F"] and "variant" not in body
    assert body["ci"]["J&F"]["n"] == 9
    row = next(r for r in _rows(tmp) if r["fingerprint"] == body["fingerprint"])
    assert (row["n"], row["excluded"], row["failures"], row["variant"]) == ("9", "3", "5", "")
    assert float(row["J&F[failed-zero]"]) == pytest.approx(body["metrics"]["J&F[failed-zero]"])


def test_the_summary_header_and_its_table_say_the_same_n(runs):
    from rvt_bench.harness.summary import format_summary

    _, reference, _, _ = runs
    text = format_summary(reference)
    assert "n=9 excluded=3 failures=5" in text.splitlines()[0]
    assert "excluded by the protocol's rule" in text
    jf_lines = [line for line in text.splitlines() if line.strip().startswith("J&F")]
    assert len(jf_lines) == 2 and jf_lines[0].split()[-1] == "9"  # J&F (n 9), then J&F[failed-zero] (n 12)
    assert jf_lines[1].strip().startswith("J&F[failed-zero]") and jf_lines[1].split()[-1] == "12"


def test_the_report_shows_9_scores_and_lists_the_3_dropped_never_as_a_score_of_0(runs):
    _, reference, _, _ = runs
    page = (reference.run_dir / "report.html").read_text()
    assert "9 of 12 samples have one; 3 excluded by the protocol's rule" in page
    listed = page.split('<details id="excluded"', 1)[1].split("</details>", 1)[0]
    assert all(sid in listed for sid in DROPPED) and listed.count("eval_mevis.py drops it") == 3
    assert page.count("score:\nnone: excluded, dropped as eval_mevis.py") == 3
    with open(reference.run_dir / "report_images" / "samples.csv", newline="") as f:
        listing = {r["sample_id"]: r for r in csv.DictReader(f)}
    assert len(listing) == 12 and sum(1 for r in listing.values() if r["score"]) == 9
    for sid in DROPPED:
        assert listing[sid]["score"] == "" and "eval_mevis.py drops it" in listing[sid]["excluded"]
    assert listing["vidC/0"]["score"] == "0.000000" and listing["vidC/0"]["excluded"] == ""  # scored 0, as eval_mevis.py


def test_a_failed_zero_run_has_the_same_two_numbers_and_is_marked_as_the_variant(runs):
    tmp, reference, zero, _ = runs
    body = zero.metrics
    assert body["n"] == 12 and "excluded" not in body and body["variant"] == "failed=zero"
    assert body["headline"][0] == "J&F[failed-zero]" and list(body["metrics"])[0] == "J&F[failed-zero]"
    for key in ("J&F", "J&F[failed-zero]"):
        assert body["metrics"][key] == pytest.approx(reference.metrics["metrics"][key], abs=1e-12)
    row = next(r for r in _rows(tmp) if r["fingerprint"] == body["fingerprint"])
    assert (row["n"], row["excluded"], row["variant"]) == ("12", "0", "failed=zero")


def test_render_shows_one_row_each_the_variant_marked_sorted_by_a_value_both_have(runs):
    from rvt_bench.leaderboards.render import render

    tmp, reference, zero, _ = runs
    text = render("mevis", tmp / "boards")
    runs_table = text.split("\n\n")[2].splitlines()
    assert "sorted by J&F " in text.split("\n\n")[1] or "sorted by J&F." in text.split("\n\n")[1]
    head = [c.strip() for c in runs_table[0].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in runs_table[2:]]
    assert len(rows) == 2
    marked = [r for r in rows if "[variant: failed=zero]" in r[head.index("model")]]
    assert len(marked) == 1 and marked[0][head.index("run")] == zero.metrics["run_name"]
    jf = head.index("J&F (%)")
    assert all(r[jf] != "n/a" for r in rows)  # the sort's value: every row has it
    # the paper table: the variant's line apart and marked, its reference columns the reference's J&F
    paper = [line for line in text.splitlines() if line.startswith("| precomputed")]
    variant_lines = [line for line in paper if "[variant: failed=zero]" in line]
    assert len(paper) == 2 and len(variant_lines) == 1
    shown = f"{100 * reference.metrics['metrics']['J&F']:.1f}"
    assert shown in variant_lines[0] and f"{100 * zero.metrics['metrics']['J&F[failed-zero]']:.1f} " not in variant_lines[0]


def test_a_variant_key_never_fills_the_reference_column():
    from rvt_bench.leaderboards.tables import paper_table

    # a row written before a run held both numbers: only the variant's keys
    old = {"dataset": "mevis", "split": "valid_u", "model": "m", "metrics": {"J&F[failed-zero]": 0.25, "J[failed-zero]": 0.2,
                                                                             "F[failed-zero]": 0.3}}
    line = next(line for line in paper_table(old).splitlines() if line.startswith("| m"))
    assert "25.0" not in line and "20.0" not in line


def test_compare_over_the_shared_scored_samples_prints_deltas_and_what_it_left_out(runs, capsys):
    from rvt_bench.harness import compare

    _, reference, _, fuller = runs
    result = compare.compare(reference.run_dir, fuller.run_dir, b=200)
    jf = next(r for r in result["metrics"] if r["key"] == "J&F")
    assert result["n_shared"] == 9 and jf["n"] == 9 and "reason" not in jf and jf["delta"] == pytest.approx(0.0, abs=1e-12)
    assert dict((why.split(":")[0], k) for why, k in result["left_out"]) == {"excluded by A's protocol rule": 3}
    assert all(f["sample_id"] not in DROPPED for f in result["flips"])
    compare.main([str(reference.run_dir), str(fuller.run_dir), "--B", "50"])
    out = capsys.readouterr().out
    assert "compared over the samples both runs scored: 9" in out and "left out: 3 excluded by A's protocol rule" in out
    jf_line = next(line for line in out.splitlines() if line.startswith("| J&F |"))
    assert "n/a" not in jf_line and "caveat: J&F: only 4 independent units" in out  # 4 videos
    # --union: every sample, the dropped one counted 0 (the [failed-zero] keys): B is better by vidA/2's score
    union = compare.compare(reference.run_dir, fuller.run_dir, b=200, union=True)
    row = next(r for r in union["metrics"] if r["key"] == "J&F[failed-zero]")
    assert union["n_shared"] == 12 and row["n"] == 12 and row["delta"] > 0
    assert [f["sample_id"] for f in union["flips"]] in ([], ["vidA/2"])


def test_a_ci_that_rests_on_few_videos_gets_its_caveat():
    from rvt_bench.harness.compare import caveat

    row = {"key": "J&F", "low": 0.01, "high": 0.05, "p_value": 0.26, "clusters": 4}
    assert "only 4 independent units" in caveat(row) and "p = 0.26" in caveat(row)
    assert caveat({**row, "clusters": 200}) == ""


def test_compare_page_names_its_samples_and_its_caveat(runs, tmp_path):
    from rvt_bench.harness import compare
    from rvt_bench.harness.report.comparison import write_many

    _, reference, _, fuller = runs
    results = compare.compare_many([reference.run_dir, fuller.run_dir], b=50, per_sample=True)
    page = write_many(results, tmp_path / "cmp.html").read_text()
    assert "compared over the samples both runs scored: 9" in page and "excluded by A&#x27;s protocol rule" in page
    assert "only 4 independent units" in page  # 4 videos


def test_a_run_without_gt_ends_with_its_submission_not_with_metrics(tmp_path):
    from PIL import Image

    from rvt_bench.harness.summary import format_summary

    split = tmp_path / "mevis" / "valid"
    (split / "JPEGImages" / "v1").mkdir(parents=True)
    Image.fromarray(np.zeros((4, 6, 3), dtype=np.uint8)).save(split / "JPEGImages" / "v1" / "00000.jpg")
    (split / "meta_expressions.json").write_text(json.dumps(
        {"videos": {"v1": {"expressions": {"0": {"exp": "the cat"}, "1": {"exp": "the dog"}}, "frames": ["00000"]}}}))
    for exp in ("0", "1"):
        (tmp_path / "pred" / "v1" / exp).mkdir(parents=True)
        Image.fromarray(np.full((4, 6), 255, dtype=np.uint8), mode="L").save(tmp_path / "pred" / "v1" / exp / "00000.png")
    result = _run(tmp_path / "mevis", tmp_path / "pred", tmp_path, "dataset.split=valid")
    assert result.metrics["n"] == 0 and sum(result.metrics["excluded"].values()) == 2
    assert result.leaderboard is None and result.not_published is None and not (tmp_path / "boards" / "mevis.csv").exists()
    text = format_summary(result)
    assert "no public GT" in text.splitlines()[0] and "produced: predictions of 2 samples" in text
    assert f"python -m rvt_bench.harness.submission mevis DATA_ROOT {result.run_dir} submission.zip" in text
    assert "codalab" in text  # the server, from the run's config
    for absent in ("funnel", "result correct", "J&F", "| ", "paper"):
        assert absent not in text, absent
    page = (result.run_dir / "report.html").read_text()
    assert 'id="submission"' in page and 'id="results"' not in page and "Paper table" not in page
    assert "funnel" not in page.split('id="samples-head"')[0].lower()


def test_any_named_variant_is_marked_by_the_same_mechanism(tmp_path):
    """The row's `variant` label (metrics.json "variant", Protocol.variant_label) is what every table
    marks: a named variant (dataset.protocol.variant=segzero) as much as failed=zero."""
    import pandas as pd

    from rvt_bench.leaderboards.render import render
    from rvt_bench.leaderboards.tables import paper_table

    (tmp_path / "boards").mkdir()
    rows = [{"run_name": name, "fingerprint": name, "dataset": "reasonseg", "split": "val", "model": "m", "source": "run",
             "headline": "gIoU", "headlines": json.dumps(["gIoU", "cIoU"]), "gIoU": g, "cIoU": c, "n": 4,
             "excluded": 0, "failures": 0, "variant": variant}
            for name, g, c, variant in (("ref", 0.4, 0.5, ""), ("var", 0.6, 0.7, "segzero"))]
    pd.DataFrame(rows).to_csv(tmp_path / "boards" / "reasonseg.csv", index=False)
    text = render("reasonseg", tmp_path / "boards", paper=False)
    lines = [line for line in text.splitlines() if line.startswith("| 1 ") or line.startswith("| 2 ")]
    assert "m [variant: segzero]" in lines[0] and "[variant" not in lines[1]  # sorted by gIoU, the variant marked
    body = {"dataset": "reasonseg", "split": "val", "model": "m", "variant": "segzero", "metrics": {"gIoU": 0.6, "cIoU": 0.7}}
    assert "m [variant: segzero]" in paper_table(body)
    assert "m [variant" not in paper_table({**body, "variant": None})  # (the caption explains the mark either way)


def test_visualize_never_picks_a_dropped_expression_as_the_worst(runs, tmp_path):
    from rvt_bench.harness.visualize import render_run

    _, reference, _, _ = runs
    worst = render_run(reference.run_dir, worst=5, out_dir=tmp_path / "worst")
    assert len(worst) == 5 and not any(sid.replace("/", "__") + ".png" == p.name for p in worst for sid in DROPPED)
    assert [p.name for p in render_run(reference.run_dir, ids=["vidA/2"], out_dir=tmp_path / "one")] == ["vidA__2.png"]
