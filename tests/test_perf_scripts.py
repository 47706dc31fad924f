"""Every perf/ script runs: each at a tiny size, checked to print its figures, so a measurement the
docs quote cannot rot unseen (perf/bench_score_scale.py crashed for weeks on typed score records).
A script that needs what a test cannot have is listed in NOT_RUN with the reason; the test fails
when a perf/ script is neither run nor listed.

Sizes are the smallest that still exercise every part of a script; on the 2-core CI machine the
slowest are gpu_real_models.py --tiny (five tiny random models, ~15 s) and bench_twin.py (~10 s), the
only way to run their code paths (it is what the scripts measure)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# script: (arguments of its tiny run, a line its figures are printed on, as a regex)
RUNS = {
    "bench_baselines.py": (["--samples", "1", "--rows", "jit-scripted,vlm-loopback"], r"total\s+mean\s+[\d.]+ s"),
    "bench_llama_runtimes.py": (["--rounds", "1", "--prompt-tokens", "16", "--steps", "2"], r"wheel\s+\d+\s+[\d.]+ / [\d.]+"),
    "bench_policy.py": (["--tokens", "2", "--models", "smollm2", "--runtimes", "llama_cpp", "--threads", "1"],
                        r"smollm2\s+llama_cpp\s+[\d.]+\s+2\s+[\d.]+"),
    "bench_read_limits.py": (["--points", "100", "--reference-max", "100", "--annos", "20", "--frames", "2",
                              "--repeats", "1"], r"self-intersecting, 100 points\s+[\d.]+s"),
    "bench_sandbox.py": (["--n", "2"], r"warm round trip, print\(1\)\s+: p50\s+[\d.]+ ms"),
    "bench_report_scale.py": (["--n", "5", "--samples", "2", "--work", "{tmp}"], r"report built in [\d.]+ s; peak RSS"),
    "bench_score_scale_mevis.py": (["--work", "{tmp}", "--videos", "1", "--frames", "2", "--expressions", "2",
                                    "--height", "32", "--width", "48", "--workers", "1"], r"ours: J&F=[\d.]+, J=[\d.]+"),
    "bench_score_new.py": (["all", "--tiny", "--work", "{tmp}", "--workers", "1"],
                           r"(?s)grefcoco ours: [\d.]+ s wall.*saco_gold ours: [\d.]+ s wall.*ref_sav ours: [\d.]+ s wall"
                           r".*gseval ours: [\d.]+ s wall.*long_rvos ours: [\d.]+ s wall"),
    "decode_reply.py": (["--max-output-chars", "50", "--repeat", "1"], r"largest legal reply\s+\d+ B\s+best\s+[\d.]+ ms"),
    "bench_score_scale.py": (["--work", "{tmp}", "--expressions", "4", "--frames", "2", "--height", "32",
                              "--width", "48", "--workers", "1"], r"ours: J&F=[\d.]+, J=[\d.]+"),
    "bench_server.py": (["--samples", "2", "--batch-sizes", "1", "--adapters", "vlm"], r"vlm\s+1\s+2\s+[\d.]+\s+[\d.]+"),
    "bench_text_bootstrap.py": (["--n", "5", "--refs", "2", "--B", "10", "--loop", "1"], r"text_resample [\d.]+ s"),
    "bench_twin.py": (["--frames", "2", "--size", "32x48", "--device", "cpu"], r"cold\s+[\d.]+\s+[\d.]+"),
    "measure_hub_refcoco.py": (["--tiny", "--work", "{tmp}"],
                               r"testB\s+perfect-on-the-hub prediction on LISA's GT: gIoU [\d.]+ cIoU [\d.]+"),
    # the tiny copies drop one record and change one (gseval), or drop one pair and keep non-scored and crowd pairs (saco)
    "measure_hub_gseval.py": (["--tiny", "--work", "{tmp}"],
                              r"missing on the hub 1, only on the hub 0, both 13\n.*label 1, caption 0, box 0, segmentation 0"),
    "measure_hub_grefcoco.py": (["--tiny", "--work", "{tmp}"],
                                r"instances\.json: release sha256 \w+, hub \w+ -> identical\n.*\n?.*val +release 14 sentences "
                                r"\(4 no-target, 0 data errors\); hub 14 .*query differs 1, GT differs 0"),
    "measure_hub_saco_gold.py": (["--tiny", "--work", "{tmp}"],
                                 r"release 16 pairs, 14 scored by the evaluator, 3 negative; copy 15 rows.*\n.*matched to a pair "
                                 r"15: of them not scored by the evaluator 2, with a crowd annotation 1; rows matching no pair 0; "
                                 r"scored pairs without a row 1"),
    "gpu_real_models.py": (["--tiny", "--frames", "2", "--size", "32x48"], r"SAM2 \(transformers\)\s+ok\s+[\d.]+"),
    "gpu_dtr1_cost.py": (["--dry-run", "--samples", "2"],
                         r"command: \S+ \S+run_bench.py \+dataset=demo dataset.split=demo \+model=dtr1 policy=vllm "
                         r"policy.model=deepseek-ai/DeepSeek-R1-Distill-Qwen-7B perception=foundation run.batch_size=32 "),
    "grpo_learning_curve.py": (["--tiny", "--out", "{tmp}"],
                               r"first 1 steps mean reward [-+][\d.]+, last 1 [-+][\d.]+ \(2 steps, \d+ s\); \S+curve\.csv"),
}
NOT_RUN = {
    "bench_jf.py": "compares with davis2017-evaluation's metrics.py, which needs a fetched checkout (--davis-metrics)",
    "cold_install.py": "fresh clones installed with an empty pip cache: downloads packages, minutes per case",
    "demo_cost.py": "the full demo twice, its prefix cache off (about 7 minutes on 2 busy cores) and on: "
                    "its figures are in docs/developer/performance.md; the split it prints is the trace's, tested "
                    "in tests/test_dtr1_rollout.py and tests/test_policy_gguf.py",
    "demo_side_by_side.py": "the full demo of two checkouts, interleaved: minutes, and a second checkout",
    "instant_server.py": "the stand-in server bench_server.py starts: run by bench_server.py's case above",
    "published_checks.py": "the table gpu_real_models.py --published reads, not a script: tests/test_published_checks.py",
}


def test_every_perf_script_is_run_or_listed_with_its_reason():
    scripts = {p.name for p in (REPO / "perf").glob("*.py") if not p.name.startswith("_")}
    assert scripts == set(RUNS) | set(NOT_RUN), scripts ^ (set(RUNS) | set(NOT_RUN))
    assert not set(RUNS) & set(NOT_RUN)


@pytest.mark.parametrize("script", sorted(RUNS))
def test_a_perf_script_prints_its_figures_at_a_tiny_size(script, tmp_path):
    args, figures = RUNS[script]
    proc = subprocess.run([sys.executable, str(REPO / "perf" / script), *(a.replace("{tmp}", str(tmp_path)) for a in args)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert re.search(figures, proc.stdout), proc.stdout[-3000:]


def test_the_gpu_cost_plan_composes_with_todays_configs():
    """perf/gpu_dtr1_cost.py's command (the paper's 1.54 s/query setting) names settings that exist."""
    from hydra import compose, initialize_config_dir

    from rvt_bench.core.paths import CONF_DIR

    proc = subprocess.run([sys.executable, str(REPO / "perf" / "gpu_dtr1_cost.py"), "--dry-run", "--adapter", "/lora"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("command: "))
    overrides = line.split("run_bench.py ", 1)[1].split()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    assert cfg.policy.model == "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B" and cfg.policy.adapter == "/lora"
    assert cfg.model.perception._target_.endswith("FoundationPerception") and cfg.run.batch_size == 32


def test_the_gpu_cost_split_of_a_finished_run(tmp_path):
    """--run-dir: wall per query from manifest.json, stage means and prefilled tokens from predictions.jsonl."""
    import json

    sys.path.insert(0, str(REPO / "perf"))
    from gpu_dtr1_cost import split

    calls = [{"after": "start", "generated": 5, "prompt_tokens": 100, "cached_tokens": 96, "prefilled": 4}]
    rows = [{"sample_id": "a", "timings": {"twin": 1.0, "policy": 2.0}, "trace": {"calls": calls}},
            {"sample_id": "b", "timings": {"twin": 3.0, "policy": 1.0}, "trace": "failed, no calls"}]
    (tmp_path / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "manifest.json").write_text(json.dumps({"prediction": {"seconds": 5.0, "samples": 2}}))
    fig = split(tmp_path)
    assert fig["n"] == 2 and fig["wall_per_query_s"] == 2.5
    assert fig["mean_s"] == {"policy": 1.5, "twin": 2.0} and fig["prefilled_per_call"] == 4 and fig["cached_share"] == 0.96
