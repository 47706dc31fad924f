"""rvt_bench.leaderboards.render: runs sorted by the headline with CIs, then the benchmark's
paper-layout table with the published rows, each marked and sourced, in one unit per column."""
from rvt_bench.leaderboards.publish import upsert
from rvt_bench.leaderboards.render import render
from rvt_bench.leaderboards.tables import published_value


def run_row(fp, name, giou, split="val"):
    return {"run_name": name, "fingerprint": fp, "dataset": "reasonseg", "split": split, "model": "m", "source": "run",
            "headline": "gIoU", "headlines": '["gIoU", "cIoU"]', "gIoU": giou, "gIoU ci_low": giou - 0.1,
            "gIoU ci_high": giou + 0.1, "cIoU": 0.4, "cIoU ci_low": 0.3, "cIoU ci_high": 0.5, "n": 10, "failures": 0,
            "parse_rate": 1.0}


def runs_table(markdown):
    block = markdown.split("\n\n**", 1)[0]
    return [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| rank")]


def test_runs_are_sorted_by_the_headline_with_their_intervals(tmp_path):
    upsert(tmp_path, "reasonseg", run_row("a1", "low", 0.3))
    upsert(tmp_path, "reasonseg", run_row("b2", "high", 0.6))
    rows = runs_table(render("reasonseg", tmp_path, paper=False))
    assert [r.split(" | ")[2] for r in rows] == ["high", "low"]
    assert "| 60.0 [50.0, 70.0] |" in rows[0]


def test_the_models_own_measures_are_not_metric_columns(tmp_path):
    # rows without intervals: the metric columns are the numeric ones, less counts and adapter measures
    row = {k: v for k, v in run_row("a1", "mine", 0.5).items() if "ci_" not in k}
    upsert(tmp_path, "reasonseg", {**row, "adapter/total_s": 12.5, "adapter/valid_dag_rate": 0.75})
    head = render("reasonseg", tmp_path, paper=False).splitlines()[4]
    assert "gIoU (%)" in head and "cIoU (%)" in head and "adapter/" not in head


def test_published_rows_show_their_mark_and_source_in_lisas_layout(tmp_path):
    upsert(tmp_path, "reasonseg", run_row("a1", "mine", 0.5))
    text = render("reasonseg", tmp_path)
    lines = text.splitlines()
    # LISA Table 1 (verified): LISA-13B (ft) val 56.2 / 62.9 ... test overall 51.7 / 51.1
    lisa = next(line for line in lines if line.startswith("| LISA-13B (ft) (paper, verified) |"))
    assert lisa.split(" | ")[1:3] == ["56.2", "62.9"] and "| 51.7 | 51.1 | arXiv:2308.00692 Table 1 (paper text) |" in lisa
    # DT-R1's digest value 0.812 (a fraction) is shown as the percentage it equals, unverified
    dtr1 = next(line for line in lines if line.startswith("| DT-R1 (paper, unverified) |"))
    assert "| 81.2 | 83.4 |" in dtr1 and dtr1.endswith("(digest only) |")  # its evidence level, per row
    mine = next(line for line in lines if line.startswith("| m |"))
    assert mine.split(" | ")[1] == "50.0 [40.0, 60.0]"


def test_render_latex_is_a_booktabs_table_that_marks_the_unverified(tmp_path):
    from tests.test_paper_tables import parse_booktabs

    text = render("revos", tmp_path, fmt="latex")
    table = parse_booktabs(text)  # toprule / header / midrule / body / bottomrule, every row as wide as the spec
    assert any(row[0] == "VISA-13B$^\\dagger$" for row in table["rows"]) and "J\\&F" in text
    assert "not checked against the paper's text" in text


def test_a_value_whose_unit_does_not_fit_the_column_is_kept_out_of_it():
    cider = {"value_printed": "0.789", "unit": "fraction"}
    assert published_value(cider, "vqa/CIDEr") is None  # a CIDEr of unknown scale is no score
    assert published_value({"value_printed": "0.837", "unit": "fraction"}, "J") == "83.7"
    assert published_value({"value_printed": "0.670", "unit": "fraction"}, "J") == "67.0"
    assert published_value({"value_printed": "56.2", "unit": "percent"}, "gIoU") == "56.2"


def test_a_board_without_a_paper_layout_has_one_column_per_headline_metric(tmp_path):
    # a leaderboard row holds the headline list JSON-encoded ("headlines") and its first one ("headline")
    upsert(tmp_path, "mybench", {**run_row("a1", "mine", 0.5), "dataset": "mybench"})
    table = render("mybench", tmp_path, fmt="latex")
    header = next(line for line in table.splitlines() if line.startswith("Method &"))
    assert [c.strip() for c in header.rstrip("\\ ").split("&")] == ["Method", "gIoU", "cIoU", "Source"]


def test_render_of_a_board_that_does_not_exist_stops_in_one_line(tmp_path, capsys):
    import pytest

    from rvt_bench.leaderboards.render import main

    upsert(tmp_path, "reasonseg", run_row("a1", "mine", 0.5))
    with pytest.raises(SystemExit) as stop:
        main(["nope", "--dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and err.count("\n") == 0
    assert err.startswith("error: no leaderboard nope.csv") and err.endswith("boards there: reasonseg")
    assert "no benchmark of that name (benchmarks: " in err and "reasonseg" in err.split("(benchmarks: ")[1]


def test_a_benchmark_without_runs_or_published_rows_prints_its_empty_layout_and_how_to_make_a_run(
        tmp_path, capsys, monkeypatch):
    """`render ref_davis17` (a layout, then no published rows) stopped with exit 2 while `render refcoco`
    (a layout and published rows) printed its layout: both print it, with how to make a run. Every
    benchmark with a layout has published rows by now, so ref_davis17's are taken away here."""
    from rvt_bench.leaderboards import render as render_module
    from rvt_bench.leaderboards.paper import paper_rows
    from rvt_bench.leaderboards.render import main

    monkeypatch.setattr(render_module, "paper_rows", lambda name: [] if name == "ref_davis17" else paper_rows(name))
    assert not render_module.paper_rows("ref_davis17") and paper_rows("refcoco")
    outputs = {}
    for name in ("ref_davis17", "refcoco", "demo"):  # demo: a benchmark that declares no layout
        main([name, "--dir", str(tmp_path)])  # no SystemExit: exit 0
        outputs[name] = capsys.readouterr().out
        assert outputs[name].startswith((f"## {name}\n\n" if name != "demo" else "") + f"No runs yet: no leaderboard {name}.csv")
        assert f"make one with `rvt-bench +dataset={name} +model=MODEL`" in outputs[name]
    assert "| method | Ref-DAVIS17 J&F | Ref-DAVIS17 J | Ref-DAVIS17 F | source |" in outputs["ref_davis17"]
    assert "| method | refCOCO val |" in outputs["refcoco"] and "| method |" not in outputs["demo"]
    main(["ref_davis17", "--dir", str(tmp_path), "--format", "latex"])
    assert "Method & J\\&F & J & F & Source" in capsys.readouterr().out


def test_an_unsandboxed_run_is_marked_in_every_rendered_table(tmp_path):
    upsert(tmp_path, "reasonseg", {**run_row("a1", "open", 0.5), "sandbox": "none"})
    upsert(tmp_path, "reasonseg", {**run_row("b2", "boxed", 0.4), "sandbox": "bwrap"})
    runs = runs_table(render("reasonseg", tmp_path, paper=False))
    assert [("UNSANDBOXED" in r) for r in runs] == [True, False]
    latex = render("reasonseg", tmp_path, fmt="latex")
    assert sum("UNSANDBOXED" in line for line in latex.splitlines()) == 1


def test_a_server_scored_benchmark_renders_its_published_rows_with_or_without_runs(tmp_path):
    # refytvos (ServerProtocol): a run scores nothing here, so its row has no metric; the table is the published rows'
    text = render("refytvos", tmp_path)
    assert text.startswith("## refytvos") and "No runs" in text
    post = next(line for line in text.splitlines() if line.startswith("| VideoLISA-3.8B (Post-optimization) (paper, verified) |"))
    assert post.split(" | ")[1:4] == ["63.7", "61.7", "65.7"]  # VideoLISA Table 1, Refer-Youtube-VOS
    upsert(tmp_path, "refytvos", {"run_name": "srv", "fingerprint": "f1", "dataset": "refytvos", "split": "valid",
                                  "model": "m", "source": "run", "headlines": "[]", "n": 10, "failures": 0})
    with_run = render("refytvos", tmp_path)
    assert "| m | – | – | – | run srv |" in with_run and post in with_run
    assert "VideoLISA-3.8B" in render("refytvos", tmp_path, fmt="latex")


def test_the_summarys_render_command_names_the_runs_leaderboard_dir_and_shows_the_run(tmp_path, capsys, monkeypatch):
    """After a run with leaderboard.dir=<elsewhere>, the summary's `rvt-bench render ... --format latex`
    lacked `--dir`, and the command it printed answered "No runs yet"; it now names the folder, and
    running it prints the run. The default folder is left out (render reads it anyway)."""
    import shlex
    from types import SimpleNamespace

    from rvt_bench.harness.summary import format_summary
    from rvt_bench.leaderboards.render import main

    boards = tmp_path / "my boards"  # a space: the command is shell-quoted
    board = upsert(boards, "reasonseg", run_row("a1", "mine", 0.5))
    body = {"dataset": "reasonseg", "split": "val", "model": "m", "run_name": "mine", "n": 10, "failures": 0,
            "parse_rate": 1.0, "tasks": {"segmentation": 10}, "headline": ["gIoU"], "metrics": {"gIoU": 0.5}}
    text = format_summary(SimpleNamespace(metrics=body, scoring_s=1.0, leaderboard=board))
    command = text.split("(LaTeX, with the published rows: ", 1)[1].split(")\n", 1)[0]
    assert command == f"rvt-bench render reasonseg --format latex --dir {shlex.quote(str(boards))}"
    main(shlex.split(command)[2:])
    out = capsys.readouterr().out
    assert "No runs yet" not in out and "\\begin{tabular}" in out and "\nm & 50.0" in out
    # the report's copy of the summary knows the folder from the config (board_dir)
    assert f"--dir {shlex.quote(str(boards))})" in format_summary(SimpleNamespace(metrics=body, scoring_s=1.0,
                                                                                board_dir=str(boards)))
    monkeypatch.chdir(tmp_path)  # render's default folder, leaderboards/, relative to the working directory
    default = upsert(tmp_path / "leaderboards", "reasonseg", run_row("a1", "mine", 0.5))
    assert "(LaTeX, with the published rows: rvt-bench render reasonseg --format latex)" in format_summary(
        SimpleNamespace(metrics=body, scoring_s=1.0, leaderboard=default))


def test_ref_davis17_says_why_its_columns_hold_no_published_row_and_lists_them_as_protocol_not_stated(tmp_path):
    """`render ref_davis17` (VISA's protocol, the default) showed empty columns and, below, Sa2VA's rows under
    "Published rows outside this layout (an ablation, a breakdown ..., or a unit ...)", none of which was
    the reason: their paper states no protocol. The render now says why the columns are empty, where the
    other protocol's rows are, and names the reason in the heading and per row."""
    text = render("ref_davis17", tmp_path)
    assert "No published row is known to use VISA's protocol" in text
    assert "rvt-bench render ref_davis17_referformer" in text
    assert "No published row fills these columns: all 4 are listed below the table (protocol not stated: 4)." in text
    heading = next(line for line in text.splitlines() if line.startswith("Published rows outside this layout"))
    assert heading == "Published rows outside this layout (protocol not stated: 4):"
    sa2va = [line for line in text.splitlines() if line.startswith("| Sa2VA-")]
    assert len(sa2va) == 4 and all(line.endswith("| verified | protocol not stated |") for line in sa2va)
    # the reasons of other layouts' rows: refcoco's split-less Sa2VA rows, VisionReasoner's gIoU in a cIoU table
    # (9) and SAM 3's Table 42, which names no metric (48)
    refcoco = render("refcoco", tmp_path)
    assert "Published rows outside this layout (split not stated: 12; metric not in this table: 57):" in refcoco
    assert "No published row fills these columns" not in refcoco
    latex = render("ref_davis17", tmp_path, fmt="latex")
    assert "% No published row is known to use VISA's protocol" in latex
    assert "% 4 published rows outside this layout (protocol not stated: 4)" in latex
