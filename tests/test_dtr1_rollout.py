"""The rollout loop with a scripted policy and a fake harness (plan validator, twin, sandbox)."""
import threading
import time
from dataclasses import dataclass

import pytest

from rvt_bench.adapters.dtr1.tags import TagError
from rvt_bench.adapters.dtr1.rollout import RolloutEnv, RolloutLimits, run_rollout, run_rollouts
from rvt_bench.adapters.policy.scripted import ScriptedPolicy
from rvt_bench.core.types import ParseError

MESSAGES = [{"role": "system", "content": "SYS"}, {"role": "user", "content": "find the dog"}]
PLAN = '<think>need masks</think> <dt_plan>{"SAM2": []}</dt_plan>'
EXEC = "<think>check</think> <execute>print(1)</execute>"
ANSWER = '<task>segmentation</task> <answer>{"instances": [1]}</answer>'


class FakeTwin:
    def to_llm_json(self, max_chars):
        return '{"instances": [{"id": 1}]}'


@dataclass
class FakeResult:
    ok: bool
    output: str
    duration_s: float = 0.0


class BadPlan(ParseError):
    reason = "unknown_node"


def make_env(log):
    def plan(text):
        log.append(("plan", text))
        if text != '{"SAM2": []}':
            raise BadPlan(f"unknown plan {text!r}")
        return ["SAM2"]

    def build_twin(order):
        log.append(("twin", order))
        return FakeTwin()

    def execute(code, twin):
        log.append(("execute", code))
        if "boom" in code:
            return FakeResult(False, "ZeroDivisionError: division by zero")
        return FakeResult(True, "1")

    return RolloutEnv(plan=plan, build_twin=build_twin, execute=execute)


def test_perfect_rollout_inserts_twin_and_results():
    log = []
    policy = ScriptedPolicy([PLAN, EXEC, ANSWER])
    r = run_rollout(policy, MESSAGES, make_env(log), RolloutLimits())
    assert log == [("plan", '{"SAM2": []}'), ("twin", ["SAM2"]), ("execute", "print(1)")]
    assert r.trace == (
        PLAN + '\n<dt_rep>{"instances": [{"id": 1}]}</dt_rep>\n' + EXEC + "\n<results>1</results>\n" + ANSWER
    )
    assert (r.task, r.answer) == ("segmentation", '{"instances": [1]}')
    assert [e["stage"] for e in r.events] == ["plan", "twin", "execute", "answer"]
    assert set(r.timings) == {"policy", "twin", "sandbox"}


def test_a_stage_that_never_ran_has_no_seconds():
    r = run_rollout(ScriptedPolicy([PLAN, ANSWER]), MESSAGES, make_env([]), RolloutLimits())
    assert set(r.timings) == {"policy", "twin"}  # no code round: no sandbox time, not 0 s


def test_each_generation_continues_from_the_whole_turn_so_far():
    policy = ScriptedPolicy([PLAN, EXEC, ANSWER])
    run_rollout(policy, MESSAGES, make_env([]), RolloutLimits())
    assert policy.prompts[1].endswith("</dt_rep>\n")
    assert policy.prompts[2].endswith("<results>1</results>\n")
    assert all("SYS" in p and "find the dog" in p for p in policy.prompts)


def test_rollout_without_execute_rounds():
    r = run_rollout(ScriptedPolicy([PLAN, ANSWER]), MESSAGES, make_env([]), RolloutLimits())
    assert r.answer == '{"instances": [1]}'


def test_code_error_goes_back_in_results_and_rollout_continues():
    r = run_rollout(ScriptedPolicy([PLAN, "<execute>1/0 # boom</execute>", ANSWER]), MESSAGES, make_env([]),
                    RolloutLimits())
    assert "<results>ZeroDivisionError: division by zero</results>" in r.trace
    assert r.events[2] == {"stage": "execute", "round": 1, "ok": False, "seconds": 0.0}


def test_skipped_plan_is_a_parse_failure():
    with pytest.raises(TagError) as info:
        run_rollout(ScriptedPolicy([ANSWER]), MESSAGES, make_env([]), RolloutLimits())
    assert info.value.reason == "missing_tag"
    assert info.value.trace == ANSWER


def test_invalid_plan_propagates_the_dag_error_without_building_a_twin():
    log = []
    bad = '<dt_plan>{"Magic": []}</dt_plan>'
    with pytest.raises(BadPlan) as info:
        run_rollout(ScriptedPolicy([bad]), MESSAGES, make_env(log), RolloutLimits())
    assert info.value.kind == "parse"
    assert log == [("plan", '{"Magic": []}')]


def test_turn_ended_without_closing_tag_is_a_parse_failure():
    with pytest.raises(TagError) as info:
        run_rollout(ScriptedPolicy([PLAN, "<think>hmm</think> <answer>1"]), MESSAGES, make_env([]), RolloutLimits())
    assert info.value.reason == "missing_tag"
    assert info.value.trace.endswith("<answer>1")


def test_generation_over_the_token_budget_is_a_parse_failure():
    long_plan = "<think>" + "word " * 50 + "</think>" + PLAN
    with pytest.raises(TagError) as info:
        run_rollout(ScriptedPolicy([long_plan]), MESSAGES, make_env([]), RolloutLimits(max_new_tokens=20))
    assert info.value.reason == "token_budget"


def test_total_token_budget_is_shared_by_all_generations():
    # the scripted policy counts whitespace-separated words as tokens
    spent = len(PLAN.split()) + len(EXEC.split())
    with pytest.raises(TagError) as info:
        run_rollout(ScriptedPolicy([PLAN, EXEC, ANSWER]), MESSAGES, make_env([]), RolloutLimits(max_total_tokens=spent))
    assert info.value.reason == "token_budget"


def test_more_rounds_than_max_rounds_is_a_parse_failure():
    log = []
    with pytest.raises(TagError) as info:
        run_rollout(ScriptedPolicy([PLAN, EXEC, EXEC, EXEC, ANSWER]), MESSAGES, make_env(log), RolloutLimits(max_rounds=2))
    assert info.value.reason == "max_rounds"
    assert sum(1 for step in log if step[0] == "execute") == 2


def test_execute_stop_without_opening_tag_is_a_parse_failure():
    with pytest.raises(TagError) as info:
        run_rollout(ScriptedPolicy([PLAN, "print(1)</execute>"]), MESSAGES, make_env([]), RolloutLimits())
    assert info.value.reason == "missing_tag"


class ServedPolicy(ScriptedPolicy):
    """A scripted policy that, like the openai policy, may be called from several threads; it
    counts the requests in flight at once."""

    thread_safe = True

    def __init__(self, turns):
        super().__init__(turns, per_rollout=True)
        self.lock = threading.Lock()
        self.now = self.peak = 0

    def generate(self, prompt, stop, max_new_tokens):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(0.05)
        with self.lock:
            self.now -= 1
            return super().generate(prompt, stop, max_new_tokens)


def test_a_served_policys_rollouts_go_on_while_one_waits_on_its_sandbox():
    slow = threading.Event()

    def env(k):
        def execute(code, twin):
            if k == 0:  # the first rollout's sandbox round waits until every other rollout has finished
                assert slow.wait(10), "the other rollouts waited for this sandbox round"
            return FakeResult(True, str(k))

        return RolloutEnv(plan=lambda text: ["SAM2"], build_twin=lambda order: FakeTwin(), execute=execute)

    policy = ServedPolicy([PLAN, EXEC, ANSWER])
    jobs = [([MESSAGES[0], {"role": "user", "content": f"query {k}"}], env(k)) for k in range(4)]
    done = []
    results = [None] * 4

    def run():
        results[:] = run_rollouts(policy, jobs, RolloutLimits())

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 10
    while len(policy.prompts) < 1 + 3 * 3 and time.monotonic() < deadline:  # rollouts 1-3 answered
        time.sleep(0.01)
    done.append(len(policy.prompts))
    slow.set()
    thread.join(10)
    assert done[0] >= 10  # 3 finished rollouts + the first one's plan and code requests
    assert policy.peak == 4  # the four rollouts' first requests were in flight together
    for k, r in enumerate(results):
        assert r.trace.endswith(ANSWER) and f"<results>{k}</results>" in r.trace


class CostingPolicy(ScriptedPolicy):
    """A scripted policy that reports each call's cost as a prefix-caching backend would: the
    prompt's characters as its tokens, those it shares with what the last call held (its prompt
    and the text it generated) as cached."""

    held = ""

    def generate(self, prompt, stop, max_new_tokens):
        import os
        from dataclasses import replace

        from rvt_bench.adapters.policy.base import PolicyCost

        cached = len(os.path.commonprefix([self.held, prompt]))
        gen = super().generate(prompt, stop, max_new_tokens)
        self.held = prompt + gen.text + (gen.matched_stop or "")
        return replace(gen, cost=PolicyCost(len(prompt), cached, 0.25, 0.5))


def test_each_policy_call_records_its_tokens_and_seconds():
    r = run_rollout(CostingPolicy([PLAN, EXEC, ANSWER]), MESSAGES, make_env([]), RolloutLimits())
    assert [c["after"] for c in r.calls] == ["start", "twin", "results"]
    first, second, third = r.calls
    assert first["cached_tokens"] == 0 and first["prefilled"] == first["prompt_tokens"]
    # a round prefills only what the harness inserted since the last call, not the turn so far
    rep = '\n<dt_rep>{"instances": [{"id": 1}]}</dt_rep>\n'
    assert second["prefilled"] == len(rep) and second["cached_tokens"] == first["prompt_tokens"] + len(PLAN)
    assert [c["generated"] for c in r.calls] == [len(PLAN.split()), len(EXEC.split()), len(ANSWER.split())]
    assert (r.timings["prefill"], r.timings["decode"]) == (0.75, 1.5)


def test_a_backend_that_measures_nothing_records_no_seconds_split():
    r = run_rollout(ScriptedPolicy([PLAN, ANSWER]), MESSAGES, make_env([]), RolloutLimits())
    assert r.calls == [{"after": "start", "generated": len(PLAN.split())}, {"after": "twin", "generated": len(ANSWER.split())}]
    assert "prefill" not in r.timings and "decode" not in r.timings  # not measured is not 0 s


def test_a_failed_rollout_keeps_what_its_calls_cost():
    with pytest.raises(TagError) as info:
        run_rollout(CostingPolicy([PLAN, "no closing tag"]), MESSAGES, make_env([]), RolloutLimits())
    assert [c["after"] for c in info.value.calls] == ["start", "twin"]
    assert info.value.timings["prefill"] == 0.5
