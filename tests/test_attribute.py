"""DT-R1's report and failure attribution (rvt_bench.adapters.dtr1.funnel, .attribute, asked by
`rvt-bench attribute`) on seeded runs whose causes are known: a scripted DT-R1 policy replays fixed
rollouts under "free" and "grammar" decoding, with the oracle twin and with a perception whose twin
is wrong for one sample, through the real runner, rollout, twin and scoring."""
import dataclasses
import json

import numpy as np
import pytest
from omegaconf import OmegaConf

from rvt_bench.adapters.dtr1.adapter import DTR1Adapter
from rvt_bench.adapters.policy.scripted import ScriptedPolicy
from rvt_bench.adapters.twin.oracle import OraclePerception
from rvt_bench.core import masks as mask_io
from rvt_bench.adapters.dtr1.attribute import attribute
from rvt_bench.adapters.dtr1.prompt import EXAMPLE_CODE
from rvt_bench.harness.attribute import main as attribute_command
from rvt_bench.harness.runner import run
from rvt_bench.core.types import InstanceAnnotation, Sample, Target

H, W = 8, 8
PLAN = '<think>t</think> <dt_plan>{"SAM2": []}</dt_plan>'
BAD_PLAN = '<think>t</think> <dt_plan>{"SAM3": []}</dt_plan>'
NO_PLAN = "I think the answer is the dog."
# the system prompt's worked example's code, written back as the rollout's own (a copied example)
COPIED_CODE = "<think>t</think> <execute>" + EXAMPLE_CODE + "</execute>"


def answer(i):
    return f'<task>segmentation</task> <answer>{{"instances": [{i}]}}</answer>'


def band(x0, x1):
    m = np.zeros((H, W), bool)
    m[:, x0:x1] = True
    return mask_io.encode(m)


# Every sample: annotation "a" (the target, left band) -> twin id 1, "b" (right band) -> id 2.
# Scripts per decoding: what the model writes for each sample, in dataset order.
SCRIPTS = {
    "free": {"ok": [PLAN, answer(1)], "fmt": [NO_PLAN], "plan": [BAD_PLAN], "perc": [PLAN, answer(1)],
             "reason": [PLAN, answer(2)], "copy": [PLAN, COPIED_CODE, answer(2)]},
    "grammar": {"ok": [PLAN, answer(1)], "fmt": [PLAN, answer(1)], "plan": [PLAN, answer(2)], "perc": [PLAN, answer(1)],
                "reason": [PLAN, answer(2)], "copy": [PLAN, COPIED_CODE, answer(2)]},
}
IDS = list(SCRIPTS["free"])


class ToyDataset:
    name = "toy"

    def __init__(self, split="val"):
        self.items = [Sample(id=sid, dataset="toy", split=split, modality="image", frames=[f"/nonexistent/{sid}.jpg"],
                             frame_ids=["0"], query="the left band", task="segmentation", target=Target(masks=[band(0, 3)]),
                             annotations=[InstanceAnnotation("a", "band", [band(0, 3)]), InstanceAnnotation("b", "band", [band(5, 8)])])
                      for sid in IDS]

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)


class WrongPerception(OraclePerception):
    """The oracle twin, except that sample "perc" gets the two masks swapped (a perception error)."""

    name = "wrong"

    def sam2(self, sample, twin):
        if sample.id == "perc":
            a, b = sample.annotations
            sample = dataclasses.replace(sample, annotations=[dataclasses.replace(a, masks=b.masks),
                                                              dataclasses.replace(b, masks=a.masks)])
        return super().sam2(sample, twin)


class ReplayPolicy(ScriptedPolicy):
    """ScriptedPolicy that takes (and keeps) the grammar of each request."""

    def __init__(self, turns, decoding):
        super().__init__(turns)
        self.decoding = decoding
        self.grammars = []

    def generate(self, prompt, stop, max_new_tokens, grammar=None):
        self.grammars.append(grammar)
        return super().generate(prompt, stop, max_new_tokens)


class ReplayDTR1(DTR1Adapter):
    """DT-R1 over the ReplayPolicy of `policy["decoding"]`'s scripts (config.yaml names this class)."""

    def __init__(self, policy, perception, name="dtr1", task_hint=False):
        turns = [t for sid in IDS for t in SCRIPTS[policy["decoding"]][sid]]
        super().__init__(policy=ReplayPolicy(turns, policy["decoding"]), perception=perception, name=name,
                         sandbox={"timeout_s": 20.0}, task_hint=task_hint)



def toy_run(tmp_path, decoding, perception, **model):
    target = "rvt_bench.adapters.twin.oracle.OraclePerception" if perception == "oracle" else "tests.test_attribute.WrongPerception"
    cfg = OmegaConf.create({
        "dataset": {"name": "toy", "_target_": "tests.test_attribute.ToyDataset", "split": "val",
                    "protocol": {"_target_": "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol"}},
        "model": {"name": "dtr1", "_target_": "tests.test_attribute.ReplayDTR1", "policy": {"decoding": decoding},
                  "perception": {"_target_": target}, **model},
        "run": {"root": str(tmp_path / "runs"), "name": f"{decoding}-{perception}{''.join(model)}", "shard": 0, "num_shards": 1,
                "merge": False, "limit": None, "fail_fast": False, "batch_size": 1, "verify_frames": False},
        "leaderboard": {"dir": str(tmp_path / "boards"), "publish": False},
    })
    return run(cfg)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attr")
    return {(d, p): toy_run(tmp, d, p) for d in ("free", "grammar") for p in ("foundation", "oracle")}


def test_funnel_records_each_samples_first_failing_stage(runs):
    records = {r["sample_id"]: r["funnel"]["first_failed"]
               for r in map(json.loads, (runs["free", "foundation"].run_dir / "scores.jsonl").read_text().splitlines())}
    assert records == {"ok": None, "fmt": "plan_emitted", "plan": "dag_valid", "perc": "result_correct",
                       "reason": "result_correct", "copy": "result_correct"}


def test_metrics_hold_the_funnel_counts_and_decoding(runs):
    report = runs["free", "foundation"].metrics["adapter_report"]
    assert report["decoding"] == "free" and report["model"] == "dtr1" and report["n"] == 6
    assert {s["key"]: s["reached"] for s in report["stages"]} == {
        "plan_emitted": 5, "dag_valid": 4, "twin_built": 4, "code_rounds_ran": 4, "answer_parsed": 4,
        "task_correct": 4, "result_correct": 1}
    measures = {m["key"]: m["value"] for m in report["measures"]}
    assert measures["valid_dag_rate"] == pytest.approx(4 / 5)
    assert measures["copied_example_rate"] == pytest.approx(1 / 5)  # of the rollouts that emitted a plan
    assert report["details"]["tool_usage"] == {"SAM2": 4}
    assert report["details"]["copied_example"] == {"plan": 0, "code": 1, "correct": 0}


def test_the_summary_shows_dtr1s_own_funnel(runs):
    import re

    from rvt_bench.harness.summary import format_summary

    summary = format_summary(runs["free", "foundation"])
    assert re.search(r"^  funnel \(free decoding\): plan emitted 5 > DAG valid 4 > ", summary, re.M), summary
    assert re.search(r"^  measures: valid DAG 80\.0 %, ", summary, re.M), summary
    assert "copied the prompt's example 20.0 %" in summary, summary


def test_grammar_decoding_sends_a_grammar_with_every_request(runs):
    # The runner's adapter is gone after the run; a fresh rollout under grammar decoding shows it.
    adapter = ReplayDTR1({"decoding": "grammar"}, OraclePerception())
    adapter.predict(ToyDataset().items[0])
    assert adapter.policy.grammars and all(g and "root ::=" in g for g in adapter.policy.grammars)


def test_attribute_labels_each_seeded_cause(runs):
    result = attribute([r.run_dir for r in runs.values()])
    labels = {sid: s["label"] for sid, s in result["samples"].items()}
    assert labels == {"fmt": "format", "plan": "plan", "perc": "perception", "reason": "reasoning", "copy": "copied_example"}
    assert result["samples"]["fmt"]["confirmed"] is True
    assert result["samples"]["copy"]["copied"] == ["code"] and result["samples"]["copy"]["confirmed"] is False
    assert result["counts"] == {"copied_example": 1, "format": 1, "plan": 1, "perception": 1, "reasoning": 1}


def test_the_attribute_command_asks_the_runs_adapter(runs, tmp_path, capsys):
    out = tmp_path / "labels.json"
    assert attribute_command([str(r.run_dir) for r in runs.values()] + ["--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "perception" in printed and "e.g. copied_example: copy  [" in printed and "copied the example's code" in printed
    assert json.loads(out.read_text())["counts"] == {"copied_example": 1, "format": 1, "plan": 1, "perception": 1,
                                                     "reasoning": 1}


def test_the_attribute_command_refuses_a_model_without_an_attribution(runs, tmp_path, capsys):
    from tests.demo_runs import demo_run

    other = demo_run(tmp_path, 3, 0, "pre").run_dir
    assert attribute_command([str(other)]) == 2
    assert "has no failure attribution" in capsys.readouterr().err
    assert attribute_command([str(other), str(runs["free", "oracle"].run_dir)]) == 2
    assert "different models" in capsys.readouterr().err


def test_attribute_without_an_oracle_run_cannot_blame_perception(runs):
    result = attribute([runs["free", "foundation"].run_dir, runs["grammar", "foundation"].run_dir])
    assert result["samples"]["perc"]["label"] == "reasoning"


def test_the_task_hint_variant_is_marked_not_comparable_in_every_metric(tmp_path):
    told = toy_run(tmp_path, "free", "oracle", task_hint=True).metrics
    marked = told["not_comparable"]
    assert set(told["metrics"]) <= set(marked) and all("model.task_hint=true" in why for why in marked.values())
    assert "not_comparable" not in toy_run(tmp_path, "free", "oracle").metrics  # the paper's protocol
