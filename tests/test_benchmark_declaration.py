"""A benchmark in one declaration (rvt_bench.core.benchmark, docs/adding-a-benchmark.md): a
benchmark declared only in a directory outside conf/ (RVT_BENCH_CONF_PATH) is listed, loads, is
scored from a precomputed folder in the layout it declares, and renders its paper layout with its
published row; and no code outside a benchmark's own modules compares with a benchmark's name."""
from __future__ import annotations

import ast
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rvt_bench.core import benchmark
from rvt_bench.leaderboards.paper import COLUMNS, paper_rows
from rvt_bench.leaderboards.tables import paper_table
from tests.test_datasets_reasonseg import H, W, rect, shape, write_sample

REPO = Path(__file__).resolve().parents[1]

TOY_YAML = """\
# ToySeg: a benchmark declared only outside conf/ (tests/test_benchmark_declaration.py).
name: toyseg
root: ???
split: val
loader:
  _target_: rvt_bench.loaders.reasonseg.ReasonSegDataset
  root: ${..root}
  split: ${..split}
protocol:
  _target_: rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol
predictions:
  toy: {path: "masks/{name}.mask.png"}
paper:
  caption: "ToySeg in its paper's layout"
  columns:
    - {head: val, metrics: [gIoU, cIoU], cell: "{metric}", split: val}
    - {head: val, label: "short gIoU", cell: "is_sentence=false/gIoU", split: val}
  subsets: {short query: "is_sentence=false/"}
  published: [toy_paper.csv]
"""


@pytest.fixture()
def toy(tmp_path, monkeypatch):
    """The declaration in tmp/conf_extra, two images (one predicted exactly, one empty) and their
    prediction PNGs where the declaration says."""
    extra = tmp_path / "conf_extra"
    (extra / "dataset").mkdir(parents=True)
    (extra / "dataset" / "toyseg.yaml").write_text(TOY_YAML)
    with open(extra / "dataset" / "toy_paper.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, COLUMNS)
        writer.writeheader()
        writer.writerow({**{c: "" for c in COLUMNS}, "paper_id": "arXiv:0000.00000", "paper_title": "Toy", "table": "Table 1",
                         "dataset": "toyseg", "benchmark": "ToySeg", "split": "val", "subset": "overall", "metric": "gIoU",
                         "model": "ToyNet", "value_printed": "12.3", "unit": "percent", "status": "unverified",
                         "evidence_source": "this test"})
    data = tmp_path / "data"
    write_sample(data / "val", "a_img", [shape("target", rect(2, 2, 8, 8))])
    write_sample(data / "val", "b_img", [shape("target", rect(4, 4, 10, 9))], is_sentence=True)
    pred = tmp_path / "pred" / "masks"
    pred.mkdir(parents=True)
    from rvt_bench.loaders.reasonseg import ReasonSegDataset

    for sample in ReasonSegDataset(data, split="val"):
        gt = np.zeros((H, W), np.uint8)
        if sample.meta["name"] == "a_img":  # exact: IoU 1; b_img: empty, IoU 0
            from rvt_bench.core.masks import decode

            gt = decode(sample.target.masks[0]).astype(np.uint8) * 255
        Image.fromarray(gt).save(pred / f"{sample.meta['name']}.mask.png")
    monkeypatch.setenv(benchmark.CONF_PATH_ENV, str(extra))
    return {"extra": extra, "data": data, "pred": tmp_path / "pred", "runs": tmp_path / "runs"}


def test_a_benchmark_declared_outside_conf_is_listed_and_declares_its_layouts(toy):
    from rvt_bench.harness.catalog import catalog

    assert "+dataset=toyseg" in catalog(width=120)
    assert "toyseg" in benchmark.declared_names()
    layout = benchmark.prediction_layouts("toyseg")["toy"]
    assert layout.keys == ("name",) and not layout.per_frame and layout.read == "any"


def test_it_loads_scores_with_precomputed_and_renders_its_paper_layout_with_its_published_row(toy):
    # the command line as a user runs it; one subprocess (a full run: Hydra, loader, adapter, protocol)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "+dataset=toyseg", f"dataset.root={toy['data']}",
                           "+model=precomputed", f"model.root={toy['pred']}", f"run.root={toy['runs']}"],
                          capture_output=True, text=True, cwd=toy["extra"].parent, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (metrics_path,) = toy["runs"].glob("toyseg/precomputed/*/metrics.json")
    metrics = json.loads(metrics_path.read_text())
    assert metrics["n"] == 2 and metrics["failures"] == 0
    assert metrics["metrics"]["gIoU"] == pytest.approx(0.5, abs=1e-5)  # IoU 1 and IoU 0 (LISA's epsilon)
    table = paper_table(metrics, published=paper_rows("toyseg"))
    assert "ToySeg in its paper's layout" in table
    assert "| val gIoU | val cIoU | val short gIoU |" in table
    assert "ToyNet (paper, unverified)" in table and "| 12.3 |" in table
    assert "| 50.0" in table  # the run's gIoU in its column
    assert "ToySeg in its paper" in proc.stdout  # the summary's table to paste is the declared one


def test_a_malformed_prediction_layout_is_named():
    with pytest.raises(benchmark.DeclarationError, match=r"predictions\.bad: path field \{name\} must be a plain meta key"):
        benchmark.prediction_layout("bad", {"path": "{name!r}.png"})
    with pytest.raises(benchmark.DeclarationError, match="read must be one of"):
        benchmark.prediction_layout("bad", {"path": "{name}.png", "read": "rgb"})


# --- no benchmark name outside its own modules -----------------------------------------------

CODE = ("bench", "adapters", "metrics", "leaderboards")


def _own(path: Path, name: str, root: Path) -> bool:
    """A benchmark's own modules: bench/loaders/<name>[_*].py and metrics/protocols/<name>.py."""
    rel = path.relative_to(root).as_posix()
    stem = path.stem
    return (rel.startswith(("bench/loaders/", "metrics/protocols/"))
            and (stem == name or stem.startswith(f"{name}_")))


def _names_in(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [v for elt in node.elts for v in _names_in(elt)]
    if isinstance(node, ast.Dict):
        return [v for key in node.keys if key is not None for v in _names_in(key)]
    return []


def name_switches(root: Path = REPO) -> list[str]:
    """`path:line name` of every comparison with a benchmark's name (==, !=, in, not in, against a
    literal or a literal collection) and every dict literal keyed by one, outside its own modules."""
    names = set(benchmark.declared_names())
    out = []
    for top in CODE:
        for path in sorted((root / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Compare):
                    found = [v for part in (node.left, *node.comparators) for v in _names_in(part)]
                elif isinstance(node, ast.Dict):
                    found = [v for key in node.keys if key is not None for v in _names_in(key)]
                else:
                    continue
                for name in sorted(set(found) & names):
                    if not _own(path, name, root):
                        out.append(f"{path.relative_to(root)}:{node.lineno} {name}")
    return out


def test_no_code_outside_a_benchmarks_own_modules_compares_with_its_name():
    assert name_switches() == []


def test_the_check_finds_a_name_switch(tmp_path):
    (tmp_path / "adapters").mkdir()
    (tmp_path / "adapters" / "m.py").write_text('def f(d):\n    return 1 if d == "revos" else {"reasonseg": 2}\n')
    assert name_switches(tmp_path) == ["adapters/m.py:2 revos", "adapters/m.py:2 reasonseg"]


def test_adding_it_needs_no_line_in_a_shared_file(toy):
    """What once needed a line per benchmark outside its own files: its `_target_`s in
    bench/harness/names.py (a name for the fingerprint) and its protocol in the contract test's
    sample factories. A benchmark declared only in RVT_BENCH_CONF_PATH, scored by a protocol class
    with no line in names.py, gets both: names by their place, samples from the test module of a
    benchmark its protocol class already scores (tests/test_protocol_contract.py)."""
    from omegaconf import OmegaConf

    from rvt_bench.core.records import ScoreRecord
    from rvt_bench.harness import names
    from tests import test_protocol_contract as contract
    from tests.test_fingerprints import _targets

    target = "rvt_bench.metrics.protocols.refcoco.RefCOCOProtocol"
    assert target not in names.NAMES.values()
    (toy["extra"] / "dataset" / "toyseg2.yaml").write_text(TOY_YAML.replace("name: toyseg", "name: toyseg2").replace(
        "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol", target))
    assert "toyseg2" in benchmark.declared_names()
    decl = benchmark.declaration("toyseg2")
    for t in _targets(decl, set()):  # every target has a name of its own: no module path is hashed
        assert names.registered_name(t) != t and not names.registered_name(t).startswith("rvt_bench."), t
    node = OmegaConf.to_container(contract.protocol_node("toyseg2"))
    rng = np.random.default_rng(0)
    samples = contract.samples_for(node, rng, "toyseg2")
    assert samples
    protocol = contract.protocol_of("toyseg2")
    records = [r for r, _ in protocol.score_many([(s, contract.prediction(rng, s)) for s in samples], progress=False)]
    back = [ScoreRecord.from_json(json.loads(json.dumps(r.to_json()))) for r in records]
    body = protocol.aggregate(back)
    assert body["n"] == len(samples) and contract.canonical(body) == contract.canonical(protocol.aggregate(records[::-1]))


def _toy_rows(toy, *rows: dict) -> None:
    with open(toy["extra"] / "dataset" / "toy_paper.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({**{c: "" for c in COLUMNS}, "paper_id": "arXiv:0000.00000", "paper_title": "Toy", "table": "Table 1",
                             "dataset": "toyseg", "benchmark": "ToySeg", "split": "val", "subset": "overall", "metric": "gIoU",
                             "model": "ToyNet", "value_printed": "12.3", "unit": "percent", "status": "unverified",
                             "evidence_source": "this test", **row})


@pytest.mark.parametrize("row, said", [({"setting": "main\x1b[31m\nfake line"}, "setting must be one of"),
                                       ({"value_printed": "=HYPERLINK(\"http://x\",\"y\")"}, "value_printed must be a number")])
def test_render_of_a_benchmark_whose_published_rows_are_bad_is_one_line_exit_2(toy, tmp_path, capsys, row, said):
    """An unknown setting was a ValueError traceback (rc 1); a formula was shown as a published value."""
    from rvt_bench.leaderboards.render import main as render_main

    _toy_rows(toy, row)
    with pytest.raises(SystemExit) as caught:
        render_main(["toyseg", "--dir", str(tmp_path / "boards")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and err.count("\n") == 1 and err.startswith("error: ") and said in err
    assert "toy_paper.csv: row 1 (line " in err and "\x1b" not in err


def test_render_of_a_benchmark_whose_published_row_has_too_few_fields_is_one_line_exit_2(toy, tmp_path, capsys):
    """A short row was an AttributeError traceback ('NoneType' object has no attribute 'strip')."""
    from rvt_bench.leaderboards.render import main as render_main

    path = toy["extra"] / "dataset" / "toy_paper.csv"
    path.write_text(",".join(COLUMNS) + "\n" + "arXiv:0000.00000,Toy,Table 1,toyseg\n")
    with pytest.raises(SystemExit) as caught:
        render_main(["toyseg", "--dir", str(tmp_path / "boards")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and err.count("\n") == 1 and f"has 4 fields, the header {len(COLUMNS)}" in err


@pytest.mark.parametrize("fmt", ["markdown", "latex"])
def test_render_prints_a_hostile_published_row_escaped_in_its_cell(toy, tmp_path, capsys, fmt):
    """A model "a | b\\n\\n| injected | row |" forged markdown rows; \\x1b and \\u202e reached the terminal raw."""
    import re

    from rvt_bench.leaderboards.render import main as render_main

    _toy_rows(toy, {"model": "a | b\n\n| injected | row |\x1b]8;;http://x\x07\u202e"})
    render_main(["toyseg", "--dir", str(tmp_path / "boards"), "--format", fmt])
    out = capsys.readouterr().out
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f\u202e]", out) and "\n\n| injected" not in out
    assert not any(line.startswith("| injected") for line in out.splitlines())
    assert (r"a \| b \| injected \| row \|\x1b]8;;http://x\x07\u202e" if fmt == "markdown"
            else r"a | b | injected | row |\textbackslash{}x1b]8;;http://x\textbackslash{}x07\textbackslash{}u202e") in out


def test_declared_files_are_checked(tmp_path, monkeypatch):
    folder = tmp_path / "dataset"
    folder.mkdir()
    monkeypatch.setenv(benchmark.CONF_PATH_ENV, str(tmp_path))
    (folder / "filesbench.yaml").write_text("name: filesbench\nfiles:\n  - {path: 'a/*.json', role: json}\n"
                                            "  - {path: '{split}/*.png', role: mask_png}\n")
    assert benchmark.declared_files("filesbench") == [benchmark.DeclaredFile("a/*.json", "json"),
                                                      benchmark.DeclaredFile("{split}/*.png", "mask_png")]
    assert benchmark.declared_files("filesbench")[1].pattern("val") == "val/*.png"
    for bad, match in (("  - {path: 'a.json', role: movie}\n", "role must be one of"),
                       ("  - {path: '/etc/passwd', role: text}\n", "must be relative"),
                       ("  - {role: json}\n", "needs a `path`")):
        (folder / "filesbench.yaml").write_text("name: filesbench\nfiles:\n" + bad)
        benchmark._CACHE.clear()
        with pytest.raises(benchmark.DeclarationError, match=match):
            benchmark.declared_files("filesbench")
