"""The LLM judge wired into the demo's protocol and the runner, against the loopback
OpenAI-compatible server of tests/test_judge.py: verdicts land in the records, unscored ones have
score None, excluded from the means and counted, and publishing refuses a run whose judge
failure rate exceeds judge.max_failure_rate."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from rvt_bench.adapters.base import Adapter
from rvt_bench.loaders.demo import DemoDataset
from rvt_bench.harness.config import group_node
from rvt_bench.harness.runner import format_summary, run
from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import Prediction, Sample
from rvt_bench.metrics.judge import Judge
from tests.fakes import make_cfg
from tests.test_judge import GOOD, ScriptedServer

REPO = Path(__file__).resolve().parents[1]
WRONG = '{"score": 0, "reason": "not what the references say"}'
# Predictions for the demo's text samples: right, wrong, garbage verdict, empty (no text).
ANSWERS = {"rvt/vqa/launch_pad": "a rocket", "rvt/vqa/lawn_depth": "the mission patch",
           "rvt/vqa/coin_entry": "two coins", "rvt/summary/kitchen_table": ""}


def _reply(body: dict, n: int) -> tuple[int, str]:
    content = body["messages"][-1]["content"]
    if "Candidate answer: two coins" in content:
        return 200, "I think it is fine."  # no JSON verdict: unscored
    return 200, GOOD if "Candidate answer: a rocket" in content else WRONG


@pytest.fixture
def server():
    s = ScriptedServer()
    s.reply = _reply
    yield s
    s.close()


def _demo_protocol():
    OmegaConf.register_new_resolver("repo", lambda rel="": str(REPO / rel), replace=True)
    return instantiate(OmegaConf.load(REPO / "conf" / "dataset" / "demo.yaml").protocol)


def _judge(server, tmp_path) -> Judge:
    return Judge(model="judge-test", base_url=server.base_url, api_key="EMPTY", timeout_s=5, max_retries=0,
                 cache_dir=tmp_path / "judge_cache")


def _text_samples() -> list[Sample]:
    return [s for s in DemoDataset(REPO / "demo") if s.id in ANSWERS]


def test_demo_protocol_records_and_aggregates_judge_verdicts(server, tmp_path):
    protocol = _demo_protocol()
    protocol.attach_judge(_judge(server, tmp_path))
    pairs = [(s, Prediction(s.id, task=s.task, text=ANSWERS[s.id])) for s in _text_samples()]
    records = {r.sample_id: r for r, _ in protocol.score_many(pairs, progress=False)}
    assert len(records) == 4
    assert records["rvt/vqa/launch_pad"].judge.score == 1.0
    assert records["rvt/vqa/lawn_depth"].judge.score == 0.0
    unscored = records["rvt/vqa/coin_entry"].judge
    assert unscored.score is None and unscored.error == "parse: no JSON verdict"
    assert records["rvt/summary/kitchen_table"].judge.score == 0.0  # empty answer: wrong
    assert len(server.requests) == 3  # ... and no request was made for it
    assert "Question: What flies upward in this video?" in json.dumps(server.requests)

    metrics = protocol.aggregate(list(records.values()))["metrics"]
    assert metrics["rvt/vqa/judge"] == 0.5  # (1 + 0) / 2: the unscored verdict is left out
    assert metrics["rvt/vqa/judge_n"] == 3 and metrics["rvt/vqa/judge_n_failed"] == 1
    assert metrics["rvt/vqa/judge_failure_rate"] == pytest.approx(1 / 3)
    assert metrics["rvt/summarization/judge"] == 0.0 and metrics["rvt/summarization/judge_n_failed"] == 0


def test_judge_verdicts_are_cached_across_scorings(server, tmp_path):
    pairs = [(s, Prediction(s.id, task=s.task, text=ANSWERS[s.id])) for s in _text_samples()]
    for _ in range(2):
        protocol = _demo_protocol()
        protocol.attach_judge(_judge(server, tmp_path))
        protocol.score_many(pairs, progress=False)
    assert len(server.requests) == 3  # the second scoring read every reply from the cache


class TextOnlyDemo(DemoDataset):
    """The demo's vqa / summarization samples of ANSWERS only."""

    def __init__(self, root, split="demo"):
        super().__init__(root, split)
        self._samples = [s for s in self._samples if s.id in ANSWERS]


class AnswerAdapter(Adapter):
    name = "answers"

    def __init__(self, name="answers"):
        self.name = name

    def predict(self, sample: Sample) -> Prediction:
        return Prediction(sample.id, task=sample.task, text=ANSWERS[sample.id])

    def fingerprint(self):
        return {"answers": True}


def _cfg(tmp_path, judge: dict | None):
    cfg = make_cfg(tmp_path)
    cfg.dataset = {"name": "demo_text", "_target_": "tests.test_demo_judge.TextOnlyDemo", "root": str(REPO / "demo"),
                   "split": "demo", "protocol": OmegaConf.to_container(
                       OmegaConf.load(REPO / "conf" / "dataset" / "demo.yaml").protocol)}
    cfg.model = {"name": "answers", "_target_": "tests.test_demo_judge.AnswerAdapter"}
    if judge is not None:
        cfg.judge = judge
    return cfg


def test_without_judge_metrics_json_and_summary_say_not_configured(tmp_path):
    cfg = _cfg(tmp_path, judge=OmegaConf.to_container(group_node("judge", "none")))
    result = run(cfg)
    body = json.loads((result.run_dir / "metrics.json").read_text())
    assert body["judge"] == {"status": "judge: not configured"}
    assert body["tasks"] == {"summarization": 1, "vqa": 3}
    assert body["metrics"]["rvt/vqa/judge"] is None  # no value: null, the reason beside it
    assert body["unavailable"]["rvt/vqa/judge"] == "judge: not configured"
    summary = format_summary(result)
    assert "judge: not configured" in summary and "tasks: summarization=1, vqa=3" in summary
    assert result.leaderboard is not None


def _openai_judge(server, max_failure_rate: float) -> dict:
    cfg = OmegaConf.to_container(group_node("judge", "openai"))
    cfg.update(model="judge-test", base_url=server.base_url, api_key="EMPTY", max_retries=0,
               max_failure_rate=max_failure_rate)
    return cfg


def test_judge_failure_rate_above_the_limit_refuses_publishing(server, tmp_path):
    result = run(_cfg(tmp_path, judge=_openai_judge(server, max_failure_rate=0.02)))
    body = json.loads((result.run_dir / "metrics.json").read_text())
    judge = body["judge"]
    assert judge["n"] == 4 and judge["n_failed"] == 1 and judge["failure_rate"] == 0.25
    assert judge["max_failure_rate"] == 0.02 and judge["publishable"] is False
    assert result.leaderboard is None and "exceeds max_failure_rate 0.02" in result.not_published
    assert not (tmp_path / "boards" / "demo_text.csv").exists()
    # the judge cache lives under the run root by default
    assert any((tmp_path / "runs" / ".judge_cache").rglob("*.json"))


def test_judge_failure_rate_within_the_limit_publishes(server, tmp_path):
    result = run(_cfg(tmp_path, judge=_openai_judge(server, max_failure_rate=0.3)))
    assert result.not_published is None and result.leaderboard is not None
    assert math.isclose(result.metrics["metrics"]["rvt/vqa/judge"], 0.5)


def test_judged_run_files_are_byte_identical_to_before_one_verdict_type(server, tmp_path):
    """scores.jsonl and the judge parts of metrics.json as main wrote them with its own live Verdict
    type (tests/data/judged_run_5e41a15.json); one verdict type (rvt_bench.core.records.JudgeVerdict) must not
    change a byte of them. Its scores.jsonl is of schema_version 1: read and written again by this
    version (values under "values", version 2) it is byte for byte what the run writes now."""
    expected = json.loads((REPO / "tests" / "data" / "judged_run_5e41a15.json").read_text())
    result = run(_cfg(tmp_path, judge=_openai_judge(server, max_failure_rate=0.3)))
    # converted to today's schema, less each record's "funnel": main wrote DT-R1's stages for every
    # model; since issue 28 a record holds its own model's funnel, and this test model declares none
    converted = sorted(json.dumps({k: v for k, v in ScoreRecord.from_json(json.loads(line)).to_json().items() if k != "funnel"},
                                  sort_keys=True, separators=(",", ":")) for line in expected["scores"])
    # less each record's "source" too (the video or image the bootstrap resamples by, since issue 33)
    lines = (result.run_dir / "scores.jsonl").read_text().splitlines()
    assert all(json.loads(line)["source"] for line in lines)
    assert sorted(json.dumps({k: v for k, v in json.loads(line).items() if k != "source"}, sort_keys=True,
                             separators=(",", ":")) for line in lines) == converted
    body = json.loads((result.run_dir / "metrics.json").read_text())
    assert body["judge"] == {**expected["judge"], "status": expected["judge"]["status"].format(base_url=server.base_url)}
    assert {k: v for k, v in body["metrics"].items() if "judge" in k} == expected["metrics"]
