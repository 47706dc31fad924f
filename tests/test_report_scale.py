"""report.html at scale: at most N samples with pictures, every sample in samples.csv; a killed
writer's leftover folder removed by the next (a tiny size only; perf/bench_report_scale.py measures)."""
import csv

from rvt_bench.core.store import atomic_folder
from rvt_bench.harness.report import choose_pictured


def test_pictured_samples_are_failures_the_worst_and_an_even_spread():
    values = [k / 100 for k in range(100)]
    failed = [k in (50, 51, 52) for k in range(100)]
    chosen = choose_pictured(values, failed, 12)
    assert len(chosen) == 12
    assert {50, 51, 52} <= chosen and {0, 1, 2, 3} <= chosen  # failures, then the worst
    assert max(chosen) > 80  # the spread reaches the end
    assert choose_pictured(values, failed, 0) == set(range(100)) == choose_pictured(values, failed, 500)


def test_a_leftover_folder_of_a_killed_writer_is_removed_by_the_next(tmp_path):
    dead = tmp_path / ".report_images.abc123.new"
    dead.mkdir()
    (dead / "x.png").write_bytes(b"x")
    (tmp_path / ".report_images.zz.old").mkdir()
    with atomic_folder(tmp_path / "report_images") as fresh:
        (fresh / "a.png").write_bytes(b"a")
    left = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    assert left == ["report_images"]


def test_a_small_report_pictures_n_samples_and_lists_them_all(tmp_path):
    from perf.bench_report_scale import make_run

    from rvt_bench.harness.report import build_report

    run_dir, samples, preds = make_run(tmp_path, 40)
    page = build_report(run_dir, samples=samples, preds=preds, max_samples=10).read_text()
    assert page.count('<section class="sample') == 10 and "10 of 40 samples shown" in page
    listing = list(csv.DictReader((run_dir / "report_images" / "samples.csv").open()))
    assert len(listing) == 40 and sum(1 for r in listing if r["picture"]) == 10
    assert len(list((run_dir / "report_images").glob("*.png"))) == 10
