"""rvt_bench.leaderboards.tables: a run (or several) in its benchmark's published layout, markdown or
LaTeX (booktabs); the LaTeX is checked by a small parser of its structure, no LaTeX needed."""
from __future__ import annotations

import re

import pytest

from rvt_bench.leaderboards.paper import paper_rows
from rvt_bench.leaderboards.tables import cell_keys, paper_table


def revos_run(model="mine", **extra):
    metrics = {"J&F": 0.5, "J": 0.45, "F": 0.55, "A": 0.9, "R": 0.3, "referring/J&F": 0.6, "referring/J": 0.55,
               "referring/F": 0.65, "reasoning/J&F": 0.4, "reasoning/J": 0.35, "reasoning/F": 0.45}
    return {"dataset": "revos", "split": "valid", "model": model, "run_name": "r1", "headline": ["J&F", "J", "F"],
            "metrics": metrics, "ci": {"J&F": {"low": 0.45, "high": 0.55}, "reasoning/J": {"low": 0.3, "high": 0.4}}, **extra}


def reasonseg_run(split, giou, ciou, short=None, long=None):
    breakdown = {"is_sentence": {}}
    if short is not None:
        breakdown["is_sentence"] = {"false": {"gIoU": short, "cIoU": short, "n": 1}, "true": {"gIoU": long, "cIoU": long, "n": 1}}
    return {"dataset": "reasonseg", "split": split, "model": "lisa", "run_name": f"run-{split}", "headline": ["gIoU", "cIoU"],
            "metrics": {"gIoU": giou, "cIoU": ciou}, "breakdown": breakdown}


def parse_booktabs(tex: str) -> dict:
    """The tabular of `tex`: column spec, rule lines and cell rows; asserts the booktabs structure
    (\\toprule, header, \\midrule, body, \\bottomrule, in this order) and that every row has as many
    cells as the column spec, \\multicolumn spans and \\cmidrule ranges included."""
    body = tex[tex.index("\\begin{tabular}"):tex.index("\\end{tabular}")]
    spec = re.match(r"\\begin\{tabular\}\{([lcr]+)\}", body).group(1)
    lines = [line.strip() for line in body.splitlines()[1:] if line.strip()]
    assert lines[0] == "\\toprule" and lines[-1] == "\\bottomrule"
    rows, rules = [], []
    for line in lines[1:-1]:
        if line.startswith("\\cmidrule"):
            for a, b in re.findall(r"\\cmidrule\(lr\)\{(\d+)-(\d+)\}", line):
                assert 1 <= int(a) <= int(b) <= len(spec)
            continue
        if line == "\\midrule":
            rules.append(len(rows))
            continue
        assert line.endswith("\\\\"), line
        cells = re.split(r"(?<!\\)&", line[:-2])
        width = sum(int(m.group(1)) if (m := re.match(r"\s*\\multicolumn\{(\d+)\}", c)) else 1 for c in cells)
        assert width == len(spec), (line, width, spec)
        rows.append([c.strip() for c in cells])
    assert rules and rules[0] >= 1  # the header ends with \midrule
    return {"spec": spec, "rows": rows, "header_rows": rules[0]}


def test_revos_is_in_visas_layout_with_intervals():
    text = paper_table(revos_run())
    head, _, row = [line for line in text.splitlines() if line.startswith("|")][:3]
    assert head.split(" | ")[1:12] == ["Referring J", "Referring F", "Referring J&F", "Reasoning J", "Reasoning F",
                                       "Reasoning J&F", "Overall J", "Overall F", "Overall J&F", "A", "R"]
    assert row.split(" | ")[1:12] == ["55.0", "65.0", "60.0", "35.0 [30.0, 40.0]", "45.0", "40.0", "45.0", "55.0",
                                      "50.0 [45.0, 55.0]", "90.0", "30.0"]


def test_revos_latex_is_a_booktabs_table_with_published_rows():
    tex = paper_table(revos_run(), "latex", paper_rows("revos"))
    table = parse_booktabs(tex)
    assert table["spec"] == "l" + "c" * 11 + "l" and table["header_rows"] == 2
    mine = next(r for r in table["rows"] if r[0] == "mine")
    assert mine[9] == "50.0\\,{\\scriptsize[45.0, 55.0]}" and mine[10] == "90.0" and mine[12] == "run r1"
    visa = next(r for r in table["rows"] if r[0] == "VISA(IT)-13B$^\\dagger$")
    assert visa[1:10] == ["55.6", "59.1", "57.4", "42.0", "46.7", "44.3", "48.8", "52.9", "50.9"]  # as cited by ReVSeg
    assert "\\caption{" in tex and "$^\\dagger$Published value not checked" in tex


def test_a_variant_tagged_metric_fills_its_column():
    run = revos_run()
    run["metrics"]["R[binarized]"] = run["metrics"].pop("R")
    row = [line for line in paper_table(run).splitlines() if line.startswith("| mine")][0]
    assert row.split(" | ")[11] == "30.0" and "R[binarized]" in cell_keys("revos", run)  # column 10 is A


def test_reasonseg_val_and_test_runs_of_one_model_share_lisas_row():
    runs = [reasonseg_run("val", 0.5, 0.6), reasonseg_run("test", 0.4, 0.45, short=0.3, long=0.5)]
    row = [line for line in paper_table(runs).splitlines() if line.startswith("| lisa")]
    assert len(row) == 1 and row[0].split(" | ")[1:9] == ["50.0", "60.0", "30.0", "30.0", "50.0", "50.0", "40.0", "45.0"]
    parse_booktabs(paper_table(runs, "latex"))


def test_rvtbench_is_per_task_and_level():
    run = {"dataset": "rvtbench", "split": "test", "model": "dtr1", "run_name": "x", "headline": ["segmentation/J&F"],
           "metrics": {"segmentation/J": 0.6, "grounding/m_vIoU": 0.3},
           "breakdown": {"segmentation/level": {"1": {"J": 0.7, "n": 2}, "4": {"J": 0.5, "n": 1}},
                         "grounding/level": {"2": {"m_vIoU": 0.25, "n": 3}}}}
    lines = [line for line in paper_table(run, published=paper_rows("rvtbench")).splitlines() if line.startswith("| ")]
    assert lines[0].split(" | ")[1:7] == ["metric", "Level 1", "Level 2", "Level 3", "Level 4", "All"]
    assert "| dtr1 | segmentation J | 70.0 | – | – | 50.0 | 60.0 | run x |" in lines
    assert "| dtr1 | grounding m_vIoU | – | 25.0 | – | – | 30.0 | run x |" in lines
    # DT-R1's "Video segmentation Level 1 J" row (0.837... as a fraction) lands on its task and level
    assert any(line.startswith("| DT-R1 (paper, unverified) | segmentation J |") for line in lines)
    parse_booktabs(paper_table(run, "latex", paper_rows("rvtbench")))


def test_another_format_or_mixed_benchmarks_are_refused():
    with pytest.raises(ValueError, match="format"):
        paper_table(revos_run(), "html")
    with pytest.raises(ValueError, match="one table per benchmark"):
        paper_table([revos_run(), reasonseg_run("val", 0.1, 0.1)])


@pytest.mark.parametrize("dataset, cider", [("revos", False), ("reasonseg", False), ("jitbench", False),
                                            ("rvtbench", True)])
def test_the_units_line_names_cider_only_where_the_table_has_it(dataset, cider):
    from rvt_bench.leaderboards.tables import _unit_note, declared_layout

    note = _unit_note(declared_layout(dataset))
    assert note.startswith("Values in %") and ("CIDEr" in note) == cider, note


def test_published_rows_of_ablation_tables_are_shown_apart_from_the_main_results():
    """`render mevis` showed VideoLISA's Table 6 (its 3k-iteration ablation setting) among the main
    results; a row whose CSV `setting` is "ablation" is listed under its own heading instead, and
    left out of the LaTeX table."""
    base = {"paper_id": "arXiv:0000.00001", "paper_title": "T", "dataset": "revos", "benchmark": "ReVOS", "split": "",
            "subset": "overall", "metric": "J&F", "value_printed": "50.0", "unit": "percent", "status": "verified",
            "evidence_source": "paper text", "evidence_snippet": "x", "note": ""}
    published = [{**base, "table": "Table 1", "model": "MainModel", "setting": ""},
                 {**base, "table": "Table 5", "model": "VariantModel", "value_printed": "40.0", "setting": "ablation"},
                 {**base, "table": "Table 5", "model": "OddVariant", "subset": "nowhere", "setting": "ablation"}]
    text = paper_table([revos_run()], "markdown", published)
    main, _, rest = text.partition("Published rows of ablation tables")
    assert "| MainModel (paper, verified) |" in main and "VariantModel" not in main
    ablations, _, outside = rest.partition("Published rows outside this layout")
    assert "| VariantModel (paper, verified) |" in ablations and "40.0" in ablations and "MainModel" not in ablations
    assert re.search(r"\| OddVariant \|.*\| verified, ablation \|", outside)  # outside the layout too, marked
    tex = paper_table([revos_run()], "latex", published)
    assert "MainModel" in tex and "VariantModel" not in tex and "% 1 published rows of ablation tables left out" in tex


def test_mevis_shows_videolisas_ablation_rows_apart():
    from rvt_bench.leaderboards.render import render

    text = render("mevis", "/nonexistent-board-dir")
    main, _, ablations = text.partition("Published rows of ablation tables")
    assert ablations and "ablation setting" not in main and "arXiv:2409.19603 Table 6" not in main
    assert "| VideoLISA-3.8B (Post optimization), ablation setting (paper, verified) | 50.9 | 58.1 | 54.5 |" in ablations
    assert {r["setting"] for r in paper_rows("mevis") if r["table"] == "Table 6" and r["paper_id"] == "arXiv:2409.19603"} == {"ablation"}


HOSTILE_BASE = {"paper_id": "arXiv:0000.00001", "paper_title": "T", "dataset": "revos", "benchmark": "ReVOS", "split": "",
                "subset": "overall", "metric": "J&F", "value_printed": "50.0", "unit": "percent", "status": "verified",
                "evidence_source": "paper text", "evidence_snippet": "x", "note": "", "table": "Table 1", "setting": ""}


def test_a_published_cell_with_pipes_newlines_or_control_characters_stays_in_its_markdown_cell():
    """A published row's model "a | b\\n\\n| injected | row |" forged table rows in `render` and report.html,
    and \\x1b / \\u202e reached the terminal raw."""
    published = [{**HOSTILE_BASE, "model": "pipe | in\n\n| injected | row |\x1b[31m\u202e"},
                 {**HOSTILE_BASE, "model": "out | side\nx", "subset": "nowhere", "table": "T|1"}]
    text = paper_table([revos_run()], "markdown", published)
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f\u202e]", text)
    assert not any(line.startswith("| injected") for line in text.splitlines())
    assert r"| pipe \| in \| injected \| row \|\x1b[31m\u202e (paper, verified) |" in text
    assert r"| out \| side x | arXiv:0000.00001 | T\|1 |" in text


def test_a_published_cell_with_blank_lines_or_control_characters_stays_in_its_latex_cell():
    """Blank lines inside a cell ended the tabular's paragraph in LaTeX; control characters went in raw."""
    published = [{**HOSTILE_BASE, "model": "two\n\nparagraphs\x07\\end{tabular}"}]
    tex = paper_table([revos_run()], "latex", published)
    assert "\n\n" not in tex and not re.search("[\x00-\x08\x0b-\x1f\x7f]", tex)
    assert r"two paragraphs\textbackslash{}x07\textbackslash{}end\{tabular\}" in tex


def test_a_method_two_papers_print_alike_is_one_line_naming_both_papers():
    """`render refcoco` listed LAVT, ReLA and LISA-7B twice: LISA's Table 2 (every column) and Seg-Zero's
    Table 10 (testA, testA, test: the same values). Each is one line now, its source naming both papers;
    methods whose values differ between papers stay two lines."""
    text = paper_table([], "markdown", paper_rows("refcoco"), dataset="refcoco")
    main = text.partition("Published rows outside this layout")[0]
    for model, cells in (("LAVT", "72.7 | 75.8 | 68.8 | 62.1 | 68.4 | 55.1 | 61.2 | 62.1"),
                         ("ReLA", "73.8 | 76.5 | 70.2 | 66.0 | 71.0 | 57.7 | 65.0 | 66.0"),
                         ("LISA-7B", "74.1 | 76.5 | 71.1 | 62.4 | 67.4 | 56.5 | 66.4 | 68.5")):
        lines = [line for line in main.splitlines() if line.startswith(f"| {model} (paper, verified) |")]
        assert len(lines) == 1, model
        assert lines[0] == (f"| {model} (paper, verified) | {cells} | arXiv:2308.00692 Table 2; arXiv:2503.06520 Table 10 "
                            "prints 3 of these values, the same (paper text) |")
    assert len([line for line in main.splitlines() if line.startswith("| Seg-Zero-7B (paper")]) == 1
    # the same method printed with a different value by another paper: two lines, each with its own source
    base = {**HOSTILE_BASE, "model": "M"}
    apart = paper_table([revos_run()], "markdown", [{**base, "paper_id": "arXiv:1"}, {**base, "paper_id": "arXiv:2", "value_printed": "51.0"}])
    ms = [line for line in apart.splitlines() if line.startswith("| M (paper")]
    assert len(ms) == 2 and "| 50.0 |" in ms[0] and "| 51.0 |" in ms[1] and ms[1].endswith("| arXiv:2 Table 1 (paper text) |")
    alike = paper_table([revos_run()], "markdown", [{**base, "paper_id": "arXiv:1"}, {**base, "paper_id": "arXiv:2"}])
    assert "| arXiv:1 Table 1; arXiv:2 Table 1 prints these values, the same (paper text) |" in alike
    latex = paper_table([], "latex", paper_rows("refcoco"), dataset="refcoco")
    assert sum(line.startswith("LAVT &") for line in latex.splitlines()) == 1
