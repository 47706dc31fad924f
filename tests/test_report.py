"""report.html of a demo run, rendered by headless Chromium (Debian's `chromium`; .ci/run installs it):
charts on the first screen, samples within one screen height, every image loads, the URL-hash
filters and the sort work, no raw Python values; a screenshot is written for review."""
import html as htmllib
import re
import shutil
import subprocess

import pytest

from rvt_bench.harness.report import _trace_parts, build_report
from tests.demo_runs import demo_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREEN = (1366, 900)  # a laptop's browser window, px


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    return build_report(demo_run(tmp, 3, 0, "r").run_dir)


def chromium(*args):
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does)")
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          f"--window-size={SCREEN[0]},{SCREEN[1]}", "--virtual-time-budget=5000", *args],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def dom(path, fragment=""):
    return chromium("--dump-dom", f"file://{path}{fragment}")


def visible_sections(html):
    return [m for m in re.findall(r'<section class="sample[^"]*"[^>]*>', html) if "display: none" not in m]


def visible_text(html):
    """The page's text a reader sees without opening anything: no scripts, no collapsed <details>."""
    html = re.sub(r"<script.*?</script>|<style.*?</style>|<details.*?</details>", " ", html, flags=re.S)
    return htmllib.unescape(re.sub(r"<[^>]+>", " ", html))


def test_report_renders_with_every_image_loaded(report):
    html = dom(report)
    assert "<h1>demo (demo) / precomputed" in html
    assert 'data-images-ok="31/31"' in html  # naturalWidth > 0 for all 31 overlays
    assert len(visible_sections(html)) == 31


def test_charts_come_first_whole_and_the_samples_one_link_away(report, tmp_path):
    html = dom(report)
    for chart in ("chart-funnel", "chart-breakdown", "chart-scores"):
        block = re.search(rf'<section class="card chart" id="{chart}">(.*?)</section>', html, re.S)  # noqa: B023
        assert block is not None, chart
        svg = block.group(1)
        assert "<svg" in svg and len(re.findall(r"<path ", svg)) > 5, chart  # drawn, not an empty frame
    # the figures are drawn whole (no fixed-height scroll box clips the breakdowns, on screen or in
    # print), so the samples may start below the first screen: a link on it leads there
    assert 'class="scroll"' not in html and "max-height" not in html
    link = int(re.search(r'data-link-top="(\d+)"', html).group(1))
    assert 0 < link < SCREEN[1] and int(re.search(r'data-samples-top="(\d+)"', html).group(1)) > 0
    shot = tmp_path / "report.png"
    chromium(f"--screenshot={shot}", f"file://{report}")
    assert shot.stat().st_size > 20_000  # for review: the first screen as a reader sees it


def test_no_raw_python_values_and_every_number_with_its_unit(report):
    text = visible_text(dom(report))
    assert not re.search(r"\bNone\b|\bnan\b|\bTrue\b|\bFalse\b|\[\s*'|\{\s*'", text)
    assert not re.search(r"\d\.\d{5,}", text)  # no 0.9854999999999999 beside percents
    assert "empty pred." in text and re.search(r"score:\s+\d+\.\d %", text)


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


def test_a_value_outside_its_interval_still_draws_its_interval():
    # ReasonSeg's gIoU divides by N + 1e-5 and its bootstrap does not: a group of one can sit outside
    # its interval; the chart draws the interval as it is (report.html was not built at all before)
    from rvt_bench.harness.report.breakdowns import Bar
    from rvt_bench.harness.report.charts import breakdown_chart

    svg = breakdown_chart([Bar("image · level 1", "image/gIoU", 0.99999, 0.2, 0.9, 0.0, 1),
                           Bar("image · level 2", "image/gIoU", 0.5, 0.4, 0.6, None, 3)])
    assert svg is not None and svg.lstrip().startswith("<svg") and "95% CI" in svg


def test_every_sample_shows_its_answer_in_its_tasks_terms(report):
    html = dom(report)
    vqa = re.search(r'<section class="sample[^"]*"[^>]*data-task="vqa".*?</section>', html, re.S).group(0)
    answer = re.search(r'<td class="answer">(.*?)</td>', vqa, re.S).group(1).strip()
    reference = re.search(r'<td class="reference">(.*?)</td>', vqa, re.S).group(1).strip()
    assert answer and answer != "(no answer)" and reference  # the model's text beside the reference
    segs = re.findall(r'<section class="sample[^"]*"[^>]*data-task="segmentation".*?</section>', html, re.S)
    image = [s for s in segs if 'data-drawn="ground truth outline"' in s and 'data-drawn="prediction mask"' in s]
    assert image  # a ReasonSeg sample: its GT outlined under the prediction (drawn: see the pixel test)
    assert re.search(r'class="meta provenance">run started .* git \S+ .* data root \S+ .* predictions \S+', html)


def test_breakdowns_name_their_levels_as_the_benchmark_does(report):
    html = dom(report)
    block = re.search(r'id="chart-breakdown">(.*?)</section>', html, re.S).group(1)
    assert "referring" in block and "reasoning" in block and "type 0" not in block


def test_the_gt_is_outlined_in_its_own_colour_under_the_prediction(tmp_path):
    import cv2
    import numpy as np

    from rvt_bench.core import masks
    from rvt_bench.core.types import Prediction, Sample, Target
    from rvt_bench.harness.visualize import GT_OUTLINE_RGB, render_sample

    frame = tmp_path / "f.png"
    cv2.imwrite(str(frame), np.full((120, 160, 3), 128, np.uint8))
    gt = np.zeros((120, 160), bool)
    gt[30:90, 40:120] = True
    sample = Sample("img", "d", "val", "image", [str(frame)], ["f"], "q", "segmentation", Target(masks=[masks.encode(gt)]))
    covering = np.ones((120, 160), bool)  # the prediction covers the GT whole
    picture = render_sample(sample, Prediction("img", masks=[masks.encode(covering)]), None, 1)
    assert (picture == np.array(GT_OUTLINE_RGB, np.uint8)).all(axis=2).sum() > 100
    # a perfect prediction: its outline lies on the GT's, which must still show around it
    picture = render_sample(sample, Prediction("img", masks=[masks.encode(gt)]), None, 1)
    assert (picture == np.array(GT_OUTLINE_RGB, np.uint8)).all(axis=2).sum() > 100


def test_the_whole_page_prints(report, tmp_path):
    pdf = tmp_path / "report.pdf"
    chromium(f"--print-to-pdf={pdf}", "--no-pdf-header-footer", f"file://{report}")
    assert pdf.read_bytes()[:4] == b"%PDF" and pdf.stat().st_size > 50_000


def test_control_characters_and_tags_from_the_model_show_as_text(tmp_path):
    """A model's answer or code output holding \\x1b[31m, \\x00 or \\r reached report.html raw (a NUL
    in the page, a terminal colour code in a copy-paste); trace text holding </execute> or <answer>
    must stay text, never markup."""
    import json

    run_dir = demo_run(tmp_path, 3, 0, "hostile").run_dir
    hostile = "\x1b[31mred\x1b[0m \x00nul\r\nnext\tcol \u202eevil"
    rollout = ("<think>t</think><execute>print('</execute><answer>{\"x\": 1}</answer>')</execute>"
               f"<results>{hostile}</results><answer>done</answer>")
    path = run_dir / "predictions.jsonl"
    lines = []
    for line in path.read_text().splitlines():
        p = json.loads(line)
        if p.get("text") is not None:
            p["text"] = hostile
        p["trace"] = {"rollout": rollout}
        lines.append(json.dumps(p))
    path.write_text("\n".join(lines) + "\n")
    page = build_report(run_dir).read_text(encoding="utf-8")
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f\u202e]", page)  # \n and \t only
    assert r"\x1b[31mred\x1b[0m \x00nul\r" in page and r"\u202eevil" in page  # visible as escapes
    assert '<td class="answer">' + r"\x1b[31mred" in page  # the answer cell, escaped too
    assert "&lt;/execute&gt;&lt;answer&gt;" in page and "&lt;results&gt;" in page
    assert "<answer>" not in page and "</execute>" not in page and "<results>" not in page


def test_paper_tables_on_the_page_show_control_characters_as_escapes():
    """The paper tables are Markup (<pre>), which the page's finalize skips: a published-rows CSV holding
    \\x1b, \\x00, \\x07 or \\u202e put them on report.html raw."""
    from rvt_bench.harness.report import _table_blocks

    hostile = "| M\x1b]8;;http://x\x07link\x00 \u202eevil <b> | 50.0 |\n|---|---|"
    blocks = _table_blocks({"markdown": hostile, "latex": hostile})
    for block in blocks:
        html = str(block["html"])
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f\u202e]", html)
        assert r"\x1b]8;;http://x\x07link\x00 \u202eevil &lt;b&gt;" in html and "\n|---|---|" in html


def test_a_breakdown_label_with_a_lone_surrogate_or_mathtext_is_drawn_escaped():
    """A subset name with a lone surrogate made matplotlib raise (FT2Font), one with "$\\frac{$" failed
    in mathtext; \\x1b reached the SVG raw."""
    from rvt_bench.harness.report.breakdowns import Bar
    from rvt_bench.harness.report.charts import breakdown_chart

    svg = breakdown_chart([Bar("bad\udcffname \x1b[31m $\\frac{$", "image/gIoU", 0.5, 0.4, 0.6, None, 3)])
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]", svg)
    assert r"bad\udcffname \x1b[31m $\frac{$, gIoU (n=3)" in svg
