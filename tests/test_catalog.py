"""`python run_bench.py --list`: every evaluation choice, one line each, training groups left out."""
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_list_names_every_evaluation_choice_and_no_training_group():
    out = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "--list"], capture_output=True, text=True,
                         timeout=120, cwd=REPO, check=True).stdout
    for group, selector in (("dataset", "+dataset="), ("model", "+model="), ("policy", "policy="),
                            ("perception", "perception="), ("judge", "judge=")):
        for path in (REPO / "conf" / group).glob("*.yaml"):
            assert f"  {selector}{path.stem} " in out
    assert "dtr1_grpo" not in out and "zero2" not in out and "reward_ablation" not in out
    assert re.search(r"\+dataset=revos +ReVOS \(VISA, ECCV 2024\)", out)
    assert "  logger=wandb " in out and "  logger=tensorboard " in out


def test_descriptions_are_whole_sentences():
    from rvt_bench.harness.catalog import catalog, description

    text = description(REPO / "conf/model/jit.yaml")
    assert text.startswith("JiT, zero-shot") and text.endswith("(spatial / temporal).")
    suite = description(REPO / "conf/suite/reasoning_seg.yaml")  # its usage example is not part of it
    assert suite == "Reasoning segmentation: ReasonSeg val + test (LISA), ReVOS valid (VISA), LLM-Seg40K validation."
    flat = " ".join(catalog(width=100).split())
    for path in (REPO / "conf").glob("*/*.yaml"):
        if path.parent.name in ("dataset", "model", "policy", "perception", "judge", "logger"):
            assert " ".join(description(path).split()) in flat, path  # whole, never cut


def test_help_is_this_tools_own():
    out = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "--help"], capture_output=True, text=True,
                         timeout=120, cwd=REPO, check=True).stdout
    assert out.startswith("rvt-bench: evaluate a model")
    for expected in ("--list", "+dataset={demo,", "logger={none,tensorboard,wandb}", "--cfg job", "docs/running.md"):
        assert expected in out
    assert "_schema" not in out  # Hydra's listing of the structured configs' internal names


def test_listing_imports_no_heavy_dependency():
    code = ("import sys; from rvt_bench.harness.catalog import catalog; catalog(); "
            "print(sorted(m for m in ('torch', 'transformers', 'pandas', 'hydra', 'cv2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


def test_every_description_starts_in_one_column_after_the_longest_name(tmp_path):
    """A name longer than the fixed 28-character column (+dataset=ref_davis17_referformer) pushed its
    description out of the column; a name longer than half the width gets a line of its own."""
    from rvt_bench.harness.catalog import catalog

    for group, names in (("dataset", ["a", "a_rather_long_benchmark_name"]), ("model", ["m"]),
                         ("judge", ["an_extremely_long_judge_name_that_takes_more_than_half_of_the_width"])):
        (tmp_path / group).mkdir()
        for name in names:
            (tmp_path / group / f"{name}.yaml").write_text(f"# The {name[:20]} option, described at length so that "
                                                           "its description wraps onto a second line or more.\n")
    text = catalog(tmp_path, width=80)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80
    column = len("  +dataset=a_rather_long_benchmark_name ")
    entries = [line for line in lines if line.startswith("  ") and "(no description)" not in line]
    for line in entries:
        if line.startswith("  judge="):
            assert line == "  judge=an_extremely_long_judge_name_that_takes_more_than_half_of_the_width"
            continue
        assert line[column - 1] == " " and line[column] != " ", line  # description (or its next line) in the column
    assert "  +dataset=a" + " " * (column - len("  +dataset=a")) + "The a option" in text
    assert "\n" + " " * column + "The an_extremely_long_ju option" in text


def test_a_long_origin_is_never_cut_inside_a_word(tmp_path):
    """A --config-dir or hydra.searchpath origin is a path: the narrower column after a long name
    must not break it (test_plugins reads it back whole)."""
    from rvt_bench.harness.catalog import catalog
    from rvt_bench.harness.plugins import ConfSource

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "mine.yaml").write_text("# Mine.\n")
    origin = "hydra.searchpath file://" + "/very-long-folder-name" * 5 + "/conf"
    text = catalog(tmp_path, width=80, sources=[ConfSource(origin, tmp_path, "")])
    assert f"[from: {origin}]" in " ".join(text.split())
