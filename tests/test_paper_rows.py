"""leaderboards/paper: every published row names paper, table, model, split, metric and the value as
printed, with its unit; `verified` only with the paper's own text as evidence and a table number
(leaderboards/paper/README.md "Columns")."""
import csv
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pytest

from rvt_bench.core import benchmark
from rvt_bench.leaderboards.paper import COLUMNS, PAPER_DIR, STATUSES, UNITS, paper_rows, read

SHARED = Path("/work/shared/data/dtr1_paper_results.csv")
FILES = sorted(PAPER_DIR.glob("*.csv"))
DATASETS = {*benchmark.declared_names(), ""}  # a row names a declared benchmark, or none


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_row_is_complete_and_its_value_is_the_printed_number(path):
    rows = read(path)  # raises on another header
    assert rows and len({r["paper_id"] for r in rows}) == 1 and path.stem.endswith(rows[0]["paper_id"].split(":")[1].lower())
    for r in rows:
        assert r["status"] in STATUSES and r["unit"] in UNITS and r["dataset"] in DATASETS, r
        assert all(r[k].strip() for k in ("paper_title", "table", "benchmark", "subset", "metric", "model", "evidence_source")), r
        try:
            Decimal(r["value_printed"])
        except InvalidOperation:
            pytest.fail(f"{path.name}: value {r['value_printed']!r} of {r['model']} is not a number as printed")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_verified_rows_name_their_table_and_rest_on_the_papers_own_text(path):
    for r in read(path):
        if r["status"] == "verified":
            assert re.match(r"^Table \d+", r["table"]), r
            assert "paper" in r["evidence_source"].lower() and "digest" not in r["evidence_source"].lower(), r
            assert r["evidence_snippet"].strip(), r


def test_a_row_is_never_listed_twice():
    keys = [(r["paper_id"], r["table"], r["dataset"], r["split"], r["subset"], r["metric"], r["model"]) for r in paper_rows()]
    assert len(keys) == len(set(keys))


def test_lisas_table_1_is_verified_for_lisa_7b_and_13b():
    rows = [r for r in paper_rows("reasonseg") if r["paper_id"] == "arXiv:2308.00692" and r["table"] == "Table 1"]
    lisa_13b_ft = {(r["split"], r["subset"], r["metric"]): r["value_printed"] for r in rows if r["model"] == "LISA-13B (ft)"}
    # LISA v3 Table 1, as printed: val 56.2 / 62.9, test overall 51.7 / 51.1
    assert lisa_13b_ft[("val", "overall", "gIoU")] == "56.2" and lisa_13b_ft[("test", "overall", "cIoU")] == "51.1"
    assert {r["status"] for r in rows} == {"verified"} and {r["model"] for r in rows} >= {"LISA-7B", "LISA-13B"}


def test_dtr1_rows_carry_the_shared_copys_values():
    shipped = read(PAPER_DIR / "dtr1_arxiv2511.12365.csv")
    if not SHARED.exists():
        pytest.skip("shared/data is not on this machine")
    with open(SHARED, newline="", encoding="utf-8") as fh:
        shared = list(csv.DictReader(fh))
    assert [(r["benchmark"], r["subset"], r["metric"], r["model"], r["value"]) for r in shared] == \
        [(r["benchmark"], r["subset"], r["metric"], r["model"], r["value_printed"]) for r in shipped]


def test_refcoco_and_mevis_rows_name_our_splits_or_say_none_is_stated():
    # leaderboards/paper/README.md "split": refcoco rows name our split (refcoco/val ... refcocog/test) or say
    # the table names none; mevis rows are valid_u only where the table says so, else valid or unstated
    from rvt_bench.leaderboards.tables import declared_layout

    splits = {c.split for c in declared_layout("refcoco").columns}
    for r in paper_rows("refcoco"):
        assert r["split"] in splits or r["split"].endswith("(split not stated)"), r
    assert {r["split"] for r in paper_rows("mevis")} <= {"valid_u", "valid", ""}
    lisa = {(r["split"], r["model"]): r["value_printed"] for r in paper_rows("refcoco") if r["paper_id"] == "arXiv:2308.00692"}
    # LISA v3 Table 2, as printed: LISA-7B refCOCO val 74.1, refCOCOg test(U) 68.5
    assert lisa[("refcoco/val", "LISA-7B")] == "74.1" and lisa[("refcocog/test", "LISA-7B")] == "68.5"


def test_rows_of_ablation_tables_say_so_in_their_setting_column(tmp_path):
    from rvt_bench.leaderboards.paper import SETTINGS

    for r in paper_rows():
        assert r["setting"] in SETTINGS, r
        if "ablation" in (r["table"] + " " + r["subset"]).lower():
            assert r["setting"] == "ablation", r  # an ablation table's row is never a main result
    # a file written before the column existed reads as main results; an unknown setting is refused
    old = tmp_path / "old.csv"
    before = COLUMNS[:COLUMNS.index("setting")]
    old.write_text(",".join(before) + "\n" + ",".join("1.5" if c == "value_printed" else "x" for c in before) + "\n")
    assert read(old)[0]["setting"] == "" and read(old)[0]["variant"] == ""
    bad = tmp_path / "bad.csv"
    bad.write_text(",".join(COLUMNS) + "\n" + ",".join(["x"] * len(COLUMNS)) + "\n")
    with pytest.raises(ValueError, match="setting must be one of"):
        read(bad)


def test_refytvos_rows_are_videolisas_table_1_and_sa2vas_tables_6_and_8_with_no_split():
    # neither paper names the Ref-YouTube-VOS split (VideoLISA: 'evaluated on the official challenge server')
    rows = paper_rows("refytvos")
    assert rows and {r["split"] for r in rows} == {""} and {r["status"] for r in rows} == {"verified"}
    value = {(r["paper_id"], r["table"], r["model"], r["metric"]): r["value_printed"] for r in rows}
    # VideoLISA Table 1, as printed: VideoLISA-3.8B (Post-optimization) Refer-Youtube-VOS 63.7 61.7 65.7
    post = "VideoLISA-3.8B (Post-optimization)"
    assert [value[("arXiv:2409.19603", "Table 1", post, m)] for m in ("J&F", "J", "F")] == ["63.7", "61.7", "65.7"]
    assert len({r["model"] for r in rows if r["paper_id"] == "arXiv:2409.19603"}) == 19
    # Sa2VA Table 6: Sa2VA-8B Ref-YTVOS 70.7; Table 8: InternVL2.5-26B 75.1
    assert value[("arXiv:2501.04001", "Table 6", "Sa2VA-8B", "J&F")] == "70.7"
    assert value[("arXiv:2501.04001", "Table 8", "Sa2VA (base MLLM InternVL2.5-26B)", "J&F")] == "75.1"


def _csv(path, **row):
    import csv

    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, COLUMNS)
        writer.writeheader()
        writer.writerow({**{c: "x" for c in COLUMNS}, "value_printed": "50.0", "setting": "", "variant": "", **row})
    return path


@pytest.mark.parametrize("value", ["=HYPERLINK(\"http://x\",\"y\")", "55.0\n\n\\end{tabular}", "nan", "inf", "-", "", " 5", "1_0", "56|0"])
def test_a_value_printed_that_is_not_a_number_is_refused_naming_file_and_row(tmp_path, value):
    """value_printed was never checked: a formula or "55.0\\n\\n\\end{tabular}" was shown as a published value."""
    from rvt_bench.core.types import DatasetFormatError

    path = _csv(tmp_path / "p.csv", value_printed=value, model="M\x1b[31m")
    with pytest.raises(DatasetFormatError, match="value_printed must be a number") as caught:
        read(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: row 1 (line ") and "\n" not in message and "\x1b" not in message


@pytest.mark.parametrize("value", ["50.0", "0.837", "12", "-3.5", "1e-3", "+2."])
def test_a_number_as_printed_is_read(tmp_path, value):
    assert read(_csv(tmp_path / "p.csv", value_printed=value))[0]["value_printed"] == value


def test_every_shipped_value_is_a_number():
    from rvt_bench.leaderboards.paper import VALUE

    rows = paper_rows()
    assert rows and all(VALUE.fullmatch(r["value_printed"]) for r in rows)


def test_a_row_with_too_few_or_too_many_fields_is_refused_naming_file_and_row(tmp_path):
    """A short row raised AttributeError ('NoneType' object has no attribute 'strip') in the table code."""
    from rvt_bench.core.types import DatasetFormatError

    short = tmp_path / "short.csv"
    short.write_text(",".join(COLUMNS) + "\n" + ",".join(["1"] * 5) + "\n")
    with pytest.raises(DatasetFormatError, match=f"row 1 \\(line 2\\): has 5 fields, the header {len(COLUMNS)}"):
        read(short)
    long = tmp_path / "long.csv"
    long.write_text(",".join(COLUMNS) + "\n" + ",".join(["1"] * (len(COLUMNS) + 2)) + "\n")
    with pytest.raises(DatasetFormatError, match=f"has {len(COLUMNS) + 2} fields"):
        read(long)


def test_an_unknown_setting_is_a_data_error_on_one_line(tmp_path):
    from rvt_bench.core.types import DatasetFormatError

    with pytest.raises(DatasetFormatError) as caught:
        read(_csv(tmp_path / "p.csv", setting="main\x1b[31m\nfake line"))
    assert "setting must be one of" in str(caught.value) and "\n" not in str(caught.value) and "\x1b" not in str(caught.value)


def test_ref_sav_rows_are_sa2vas_tables_10_and_17_in_the_long_short_overall_cells():
    # Sa2VA v3 Table 10 ('Ref-SAV validation sets'), as printed: Sa2VA-8b (Ours) long J&F 58.7, short J 39.5, overall J&F 50.0
    from rvt_bench.leaderboards.tables import declared_layout, published_cell

    rows = paper_rows("ref_sav")
    lay = declared_layout("ref_sav")
    assert rows and {r["status"] for r in rows} == {"verified"} and {r["table"] for r in rows} == {"Table 10", "Table 17"}
    assert all(published_cell(r, lay) is not None for r in rows)  # every row has its column (subsets long / short)
    value = {(r["model"], r["subset"], r["metric"]): r["value_printed"] for r in rows}
    assert value[("Sa2VA-8b (Ours)", "long", "J&F")] == "58.7" and value[("Sa2VA-8b (Ours)", "short", "J")] == "39.5"
    assert value[("Sa2VA-8b (Ours)", "overall", "J&F")] == "50.0" and value[("UniRef++ (fine-tuning)", "overall", "J&F")] == "14.6"


def test_grefcoco_rows_sit_in_their_split_columns_or_under_the_table_when_no_split_is_stated():
    # no row is verified: the GRES / GREx text was not read; ReLA per split as SSDE's Table 7 reprints it
    from rvt_bench.leaderboards.tables import declared_layout, outside_reason, published_cell

    lay = declared_layout("grefcoco")
    rows = paper_rows("grefcoco")
    assert rows and {r["status"] for r in rows} == {"unverified"}
    for r in rows:
        assert r["split"] in {"val", "testA", "testB", ""}, r
        if r["split"]:
            assert published_cell(r, lay) is not None, r
        else:
            assert outside_reason(r, lay) == "split not stated", r
    value = {(r["split"], r["metric"]): r["value_printed"] for r in rows if r["model"] == "ReLA (Swin-Base)" and r["split"]}
    assert value[("val", "cIoU")] == "62.42" and value[("testB", "gIoU")] == "61.02"  # SSDE Table 7, as printed


def test_long_rvos_rows_are_the_test_split_overall_and_fill_the_layouts_test_columns():
    # digest-only rows: the paper's main table reports the test split (overall J&F / tIoU / vIoU); none is verified
    from rvt_bench.leaderboards.tables import declared_layout, published_cell

    lay = declared_layout("long_rvos")
    rows = paper_rows("long_rvos")
    assert rows and {r["split"] for r in rows} == {"test"} and {r["status"] for r in rows} == {"unverified"}
    assert all(published_cell(r, lay) is not None for r in rows)
    value = {(r["model"], r["metric"]): r["value_printed"] for r in rows}
    assert value[("ReferMo", "J&F")] == "52.9" and value[("ReferMo", "vIoU")] == "45.2"  # as the digest transcribes them


def test_sam3_rows_are_tables_30_40_and_42_as_printed_and_saco_golds_subsets_hold_them():
    """SAM 3 (arXiv 2511.16719), read in the paper's text: Table 30 (SA-Co/Gold per domain), Table 40
    (SAM 3 Agent on ReasonSeg), Table 42 (SAM 3 Agent on RefCOCO-Seg, no metric named)."""
    from rvt_bench.leaderboards.tables import declared_layout, outside_reason, published_cell

    gold = paper_rows("saco_gold")
    assert len(gold) == 9 * 8 * 3 and {r["status"] for r in gold} == {"verified"} and {r["table"] for r in gold} == {"Table 30"}
    value = {(r["model"], r["split"], r["metric"]): (r["value_printed"], r["unit"]) for r in gold}
    # Table 30 as printed: SAM 3 Average 54.1 0.82 66.1; Crowded 61.1 0.9 67.7; Human Wiki-Common 71.6 0.89 80.1
    assert [value[("SAM 3", "average", m)][0] for m in ("cgF1", "IL_MCC", "positive_micro_F1")] == ["54.1", "0.82", "66.1"]
    assert value[("SAM 3", "crowded", "IL_MCC")] == ("0.9", "fraction") and value[("SAM 3", "crowded", "cgF1")] == ("61.1", "percent")
    assert value[("Human", "wiki_common", "positive_micro_F1")][0] == "80.1"
    lay = declared_layout("saco_gold")
    subsets = {c.split for c in lay.columns}
    assert {r["split"] for r in gold} == subsets | {"average"}
    for r in gold:  # a subset's value goes in its subset's column; the average is listed under the table
        if r["split"] == "average":
            assert published_cell(r, lay) is None and outside_reason(r, lay) == "split not in this table"
        else:
            assert published_cell(r, lay) == (r["metric"], None)

    agent = {(r["model"], r["split"], r["subset"], r["metric"]): r["value_printed"]
             for r in paper_rows("reasonseg") if r["paper_id"] == "arXiv:2511.16719"}
    assert len(agent) == 6 * 8
    # Table 40: SAM 3 Agent with Gemini 2.5 Pro, val gIoU 77.0 / cIoU 66.0, test 74.0, test long query cIoU 73.2
    gemini = "SAM 3 Agent (Gemini 2.5 Pro)"
    assert (agent[(gemini, "val", "overall", "gIoU")], agent[(gemini, "val", "overall", "cIoU")]) == ("77.0", "66.0")
    assert agent[(gemini, "test", "overall", "gIoU")] == "74.0" and agent[(gemini, "test", "long query", "cIoU")] == "73.2"

    ref = [r for r in paper_rows("refcoco") if r["paper_id"] == "arXiv:2511.16719"]
    assert len(ref) == 6 * 8 and {r["metric"] for r in ref} == {"not stated"}
    lay = declared_layout("refcoco")
    assert all(published_cell(r, lay) is None and outside_reason(r, lay) == "metric not in this table" for r in ref)
    assert next(r["value_printed"] for r in ref if r["model"] == gemini and r["split"] == "refcocog/test") == "74.0"
