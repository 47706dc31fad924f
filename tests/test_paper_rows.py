"""leaderboards/paper: the shipped published rows, their per-row verification record (README:
"Verification against the paper") and what the renderer reads."""
import csv
from pathlib import Path

from rvt_bench.leaderboards.render import PAPER_DIR, paper_rows

SHIPPED = PAPER_DIR / "dtr1_arxiv2511.12365.csv"
VERIFICATION = PAPER_DIR / "verification" / "dtr1_arxiv2511.12365.csv"
KEY = ("benchmark", "subset", "metric", "model")
STATUSES = {"verified", "differs", "unverified"}


def read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_every_shipped_row_has_exactly_one_verification_record_with_its_value():
    shipped, checks = read(SHIPPED), read(VERIFICATION)
    assert [tuple(r[k] for k in KEY) for r in checks] == [tuple(r[k] for k in KEY) for r in shipped]
    assert [r["value"] for r in checks] == [r["value"] for r in shipped]  # the strings, as printed


def test_verification_statuses_are_known_and_verified_rows_name_their_table():
    for r in read(VERIFICATION):
        assert r["status"] in STATUSES, r
        assert r["checked"], r
        if r["status"] == "verified":
            assert r["paper_table"].strip(), f"{r}: a verified row names the paper's table"
        # a row the paper prints differently must be corrected, not shipped next to a "differs" note
        assert r["status"] != "differs", f"{r}: correct the shipped value to the paper's"


def test_the_renderer_reads_only_the_paper_rows_not_their_verification_records():
    shipped = [r for r in read(SHIPPED) if r["benchmark"] == "ReasonSeg"]
    rendered = paper_rows("reasonseg")
    assert all(r in rendered for r in shipped) and not any("status" in r for r in rendered)
