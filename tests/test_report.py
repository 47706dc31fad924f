"""report.html of a demo run, rendered by headless Chromium (Debian's `chromium`; .ci/run installs it):
it renders, every image loads, the URL-hash filters and the sort work."""
import re
import shutil
import subprocess

import pytest

from rvt_bench.harness.report import _trace_parts, build_report
from tests.demo_runs import demo_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    return build_report(demo_run(tmp, 3, 0, "r").run_dir)


def dom(path, fragment=""):
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does)")
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                          "--dump-dom", f"file://{path}{fragment}"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def visible_sections(html):
    return [m for m in re.findall(r'<section class="sample[^"]*"[^>]*>', html) if "display: none" not in m]


def test_report_renders_with_every_image_loaded(report):
    html = dom(report)
    assert "<h1>demo (demo) / precomputed" in html
    assert 'data-images-ok="31/31"' in html  # naturalWidth > 0 for all 31 overlays
    assert len(visible_sections(html)) == 31


def test_task_filter_from_the_url_hash(report):
    html = dom(report, "#task=grounding")
    shown = visible_sections(html)
    assert len(shown) == 3 and all('data-task="grounding"' in s for s in shown)
    assert '<span id="shown">3</span>' in html


def test_failure_filter_shows_the_failed_sample_only(report):
    shown = visible_sections(dom(report, "#failure=parse"))
    assert len(shown) == 1 and 'data-failure="parse"' in shown[0]


def test_sort_by_score_puts_the_worst_first(report):
    shown = visible_sections(dom(report, "#task=segmentation&sort=asc"))
    scores = [float(re.search(r'data-score="([^"]*)"', s).group(1)) for s in shown]
    assert scores == sorted(scores) and len(scores) == 23


def test_the_twin_is_a_collapsed_part_of_the_trace():
    parts = _trace_parts({"rollout": "<think>a</think><dt_plan>{}</dt_plan><dt_rep>{\"video\": 1}</dt_rep><answer>x</answer>",
                          "n_tokens": 7})
    assert [p["twin"] for p in parts] == [False, True, False, False]
    assert parts[1]["text"] == '<dt_rep>{"video": 1}</dt_rep>' and '"n_tokens": 7' in parts[-1]["text"]
