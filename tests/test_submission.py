"""Server submissions (bench/harness/submission.py) for MeViS valid and Ref-YouTube-VOS valid on tiny
fixtures in their release layouts; the zip layouts are VISA tools/zip_mp_mevis.py (entries
<video>/<exp_id>/<frame>.png) and tools/zip_mp_refytvos.py (Annotations/<video>/<exp_id>/<frame>.png)."""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rvt_bench.core import masks
from rvt_bench.core.types import Prediction
from rvt_bench.harness import submission
from rvt_bench.loaders.refytvos import RefYTVOSDataset

H, W = 6, 8
VIDEOS = {"v2": ["00000", "00005"], "v1": ["00000", "00005", "00010"]}


def write_frames(folder: Path, videos: dict) -> None:
    for video, frames in videos.items():
        (folder / video).mkdir(parents=True)
        for f in frames:
            Image.fromarray(np.zeros((H, W, 3), dtype=np.uint8)).save(folder / video / f"{f}.jpg")


def meta(videos: dict) -> str:
    return json.dumps({"videos": {v: {"expressions": {"0": {"exp": f"the dog in {v}"}, "1": {"exp": "the cat"}},
                                      "frames": frames} for v, frames in videos.items()}})


@pytest.fixture
def refytvos(tmp_path) -> Path:
    root = tmp_path / "ref-youtube-vos"
    write_frames(root / "valid" / "JPEGImages", {**VIDEOS, "t1": ["00000"]})
    for split, videos in (("valid", {**VIDEOS, "t1": ["00000"]}), ("test", {"t1": ["00000"]})):
        (root / "meta_expressions" / split).mkdir(parents=True)
        (root / "meta_expressions" / split / "meta_expressions.json").write_text(meta(videos))
    return root


@pytest.fixture
def mevis(tmp_path) -> Path:
    root = tmp_path / "mevis"
    write_frames(root / "valid" / "JPEGImages", VIDEOS)
    (root / "valid" / "meta_expressions.json").write_text(meta(VIDEOS))
    return root


def write_pngs(pred: Path, videos: dict, skip: str | None = None) -> None:
    for video, frames in videos.items():
        for exp_id in ("0", "1"):
            if f"{video}/{exp_id}" == skip:
                continue
            (pred / video / exp_id).mkdir(parents=True)
            for k, f in enumerate(frames):
                mask = np.zeros((H, W), dtype=np.uint8)
                mask[k:k + 2, 1:4] = 1  # 0/1 values: exported as 0/255
                Image.fromarray(mask).save(pred / video / exp_id / f"{f}.png")


def test_refytvos_valid_leaves_out_the_test_videos_and_sorts_by_name(refytvos):
    ds = RefYTVOSDataset(refytvos)
    assert [s.id for s in ds] == ["v1/0", "v1/1", "v2/0", "v2/1"]
    assert ds[0].frame_ids == VIDEOS["v1"] and ds[0].target.masks is None
    assert ds[0].meta == {"video": "v1", "exp_id": "0"}


def test_refytvos_zip_has_annotations_prefix_and_0_255_pngs(refytvos, tmp_path):
    pred = tmp_path / "pred"
    write_pngs(pred, VIDEOS)
    out = tmp_path / "sub.zip"
    done = submission.export("refytvos", refytvos, pred, out)
    assert done == {"expressions": 4, "entries": 10, "empty": []}
    with zipfile.ZipFile(out) as z:
        names = z.namelist()
        png = np.array(Image.open(io.BytesIO(z.read("Annotations/v1/1/00005.png"))))
    assert sorted(names) == sorted(f"Annotations/{v}/{e}/{f}.png" for v, fs in VIDEOS.items() for e in "01" for f in fs)
    assert png.dtype == np.uint8 and set(np.unique(png)) == {0, 255} and png[1:3, 1:4].all()
    assert submission.check("refytvos", refytvos, out) == []


def test_mevis_zip_from_a_run_has_videos_at_its_root(mevis, tmp_path):
    from rvt_bench.loaders.mevis import MeViSDataset

    run = tmp_path / "run"
    run.mkdir()
    lines = []
    for s in MeViSDataset(mevis, split="valid"):
        m = np.zeros((H, W), dtype=bool)
        m[2:4, 2:6] = True
        lines.append(json.dumps(Prediction(s.id, task="segmentation", masks=[masks.encode(m)] + [None] * (s.num_frames - 1)).to_json()))
    (run / "predictions.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "mevis.zip"
    assert submission.main(["mevis", str(mevis), str(run), str(out)]) == 0
    with zipfile.ZipFile(out) as z:
        assert "v1/0/00010.png" in z.namelist() and not any(n.startswith("Annotations") for n in z.namelist())
        first = np.array(Image.open(io.BytesIO(z.read("v2/1/00000.png"))))
        last = np.array(Image.open(io.BytesIO(z.read("v2/1/00005.png"))))
    assert (first == 255).sum() == 8 and not last.any()
    assert submission.main(["--check", "mevis", str(mevis), str(out)]) == 0


def test_a_missing_expression_stops_the_export_unless_empty_missing(mevis, tmp_path, capsys):
    pred = tmp_path / "pred"
    write_pngs(pred, VIDEOS, skip="v2/1")
    out = tmp_path / "sub.zip"
    assert submission.main(["mevis", str(mevis), str(pred), str(out)]) == 2
    err = capsys.readouterr().err
    assert "1 of 4 expressions" in err and "v2/1" in err and "--empty-missing" in err and len(err.splitlines()) == 1
    assert not out.exists()
    done = submission.export("mevis", mevis, pred, out, empty_missing=True)
    assert done["empty"] == ["v2/1"]
    with zipfile.ZipFile(out) as z:
        assert not np.array(Image.open(io.BytesIO(z.read("v2/1/00005.png")))).any()


def test_check_names_missing_extra_escaping_wrongly_sized_and_corrupt_entries(mevis, tmp_path):
    pred = tmp_path / "pred"
    write_pngs(pred, VIDEOS)
    out = tmp_path / "sub.zip"
    submission.export("mevis", mevis, pred, out)
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(out) as src, zipfile.ZipFile(bad, "w") as dst:
        for name in src.namelist():
            if name == "v1/0/00005.png":
                continue
            data = src.read(name)
            if name == "v2/0/00000.png":
                data = submission.png_bytes(np.zeros((H + 1, W), dtype=bool))
            if name == "v2/1/00005.png":
                data = data[:40]  # its header says 6 x 8, its pixels are cut off
            dst.writestr(name, data)
        dst.writestr("Annotations/v1/0/00000.png", src.read("v1/0/00000.png"))
        dst.writestr("../evil.png", b"x")
        dst.writestr("v1/1/00000.png.txt", b"not a png")
    problems = submission.check("mevis", mevis, bad)
    assert "v1/0/00005.png: missing" in problems
    assert any(p.startswith("v2/0/00000.png: [7, 8]") for p in problems)
    assert any(p.startswith("Annotations/v1/0/00000.png: not a frame") for p in problems)
    assert any(p.startswith("../evil.png: a path outside") for p in problems)
    assert any(p.startswith("v1/1/00000.png.txt: not a frame") for p in problems)
    assert any(p.startswith("v2/1/00005.png: cannot be decoded") for p in problems)
    assert len(problems) == 6


def test_check_of_a_fifo_given_as_the_archive_is_a_problem_not_a_hang(mevis, tmp_path):
    import os

    fifo = tmp_path / "sub.zip"
    os.mkfifo(fifo)  # opened the plain way, zipfile waits for a writer forever
    problems = submission.check("mevis", mevis, fifo)
    assert problems[-1].startswith(f"{fifo}: not a readable zip") and "FIFO" in problems[-1]


def test_a_benchmark_without_a_server_layout_is_refused_in_one_line(tmp_path, capsys):
    from tests.test_datasets_revos import write_revos

    write_revos(tmp_path / "revos")
    assert submission.main(["revos", str(tmp_path / "revos"), str(tmp_path), str(tmp_path / "x.zip")]) == 2
    assert "no server submission" in capsys.readouterr().err


def test_a_refytvos_run_predicts_scores_nothing_and_its_run_directory_zips(refytvos, tmp_path):
    # the documented flow (docs/benchmarks/refytvos.md): rvt-bench +dataset=refytvos ..., then the zip
    from hydra import compose, initialize_config_dir

    import run_bench  # noqa: F401  (registers the ${repo:} resolver)
    from rvt_bench.harness.runner import run

    pred = tmp_path / "pred"
    write_pngs(pred, VIDEOS)
    conf = Path(__file__).resolve().parents[1] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose("config", overrides=["+dataset=refytvos", f"dataset.root={refytvos}", "+model=precomputed",
                                           f"model.root={pred}", f"run.root={tmp_path / 'runs'}",
                                           f"leaderboard.dir={tmp_path / 'boards'}", "run.report=false"])
    result = run(cfg)
    assert result.metrics["metrics"] == {} and result.metrics["n"] == 0 and result.metrics["excluded_samples"][0]["reason"].startswith("no public GT")
    assert result.leaderboard is None and result.not_published is None  # nothing scored: no row of dashes
    from rvt_bench.harness.summary import format_summary

    text = format_summary(result)
    assert f"next: python -m rvt_bench.harness.submission refytvos DATA_ROOT {result.run_dir} submission.zip" in text
    assert "then upload submission.zip to https://competitions.codalab.org/competitions/29139" in text
    assert "funnel" not in text and "result correct" not in text
    out = tmp_path / "from_run.zip"
    assert submission.export("refytvos", refytvos, result.run_dir, out)["expressions"] == 4
    with zipfile.ZipFile(out) as z:
        assert np.array_equal(np.array(Image.open(io.BytesIO(z.read("Annotations/v1/1/00005.png")))) > 0,
                              np.array(Image.open(pred / "v1" / "1" / "00005.png")) > 0)
    assert submission.check("refytvos", refytvos, out) == []


@pytest.mark.parametrize("exp_id", ["../../evil", "/tmp/evil", "a\\..\\..\\evil", "x\x00y"])
def test_an_expression_id_that_names_a_path_outside_the_archive_refuses_the_export_in_one_line(
        mevis, tmp_path, capsys, exp_id):
    # a meta whose expression id holds "../" wrote a zip entry outside the unzip folder, exit 0
    videos = json.loads((mevis / "valid" / "meta_expressions.json").read_text())
    videos["videos"]["v1"]["expressions"][exp_id] = {"exp": "the evil"}
    (mevis / "valid" / "meta_expressions.json").write_text(json.dumps(videos))
    pred = tmp_path / "pred"
    write_pngs(pred, VIDEOS)
    out = tmp_path / "sub.zip"
    for extra in ([], ["--empty-missing"]):
        assert submission.main(["mevis", str(mevis), str(pred), str(out), *extra]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "cannot be named in the archive" in err and "no zip written" in err
        assert not out.exists() and not list(tmp_path.glob(".sub.zip*"))
    problems = submission.check("mevis", mevis, out)
    assert any("is a path outside the archive's root" in p or "not a plain relative path" in p for p in problems)


@pytest.mark.parametrize("name, why", [("ok/0/00000.png", None), ("../x.png", "outside"), ("/x.png", "outside"),
                                       ("C:x.png", "outside"), ("a/../../x.png", "outside"), ("a//x.png", "empty"),
                                       ("./x.png", "'.'"), ("a\\x.png", "backslash"), ("a\x01.png", "control")])
def test_name_problem(name, why):
    problem = submission.name_problem(name)
    assert (problem is None) if why is None else (why in problem)
