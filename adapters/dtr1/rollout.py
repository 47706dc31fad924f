"""The DT-R1 rollout loop (design.md section 5), independent of the policy backend.

One assistant turn, generated in pieces: the policy generates until a closing tag, the harness
acts and appends its insertion, and the policy continues from the whole turn so far:
  plan:    ... <dt_plan>DAG</dt_plan>  -> validate, build the twin -> <dt_rep>twin JSON</dt_rep>
  rounds:  ... <execute>code</execute> -> sandbox                   -> <results>output</results>
  answer:  ... <task>..</task> <answer>..</answer>                  -> done
An error in the model's code is not a failure: its last line goes back in <results> and the rollout
continues (as in the paper). A missing or invalid plan, a missing closing tag within the token
budget, or more than `max_rounds` code blocks is a ProtocolError / DAGError (kind "parse"); the
partial trace, events and timings are attached to the exception as `.trace`, `.events`, `.timings`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from adapters.dtr1 import protocol as P
from adapters.policy.base import Policy
from bench.types import AdapterError


class ExecResult(Protocol):
    """What the rollout needs from adapters.sandbox.runner.SandboxResult."""

    ok: bool
    output: str
    duration_s: float


@dataclass
class RolloutEnv:
    """The harness side of a rollout, for one sample.

    plan:       DAG text (contents of <dt_plan>) -> topological order; raises a ParseError (DAGError).
    build_twin: topological order -> twin (an object with to_llm_json(max_chars)).
    execute:    (code, twin) -> result with ok, output (stdout, or the error's last line), duration_s.
    """

    plan: Callable[[str], list[str]]
    build_twin: Callable[[list[str]], Any]
    execute: Callable[[str, Any], ExecResult]


@dataclass
class RolloutLimits:
    """max_rounds: most <execute> blocks (the paper's m <= 10). max_new_tokens: tokens per
    generation call. max_total_tokens: tokens the policy may generate in the whole rollout.
    twin_max_chars: character budget of the twin JSON inside <dt_rep>."""

    max_rounds: int = 10
    max_new_tokens: int = 1024
    max_total_tokens: int = 4096
    twin_max_chars: int = 8000


@dataclass
class Rollout:
    """A finished rollout.

    trace:   the whole assistant turn, harness insertions included.
    events:  one dict per step: {"stage": "plan"|"twin"|"execute"|"answer", ...}.
    timings: seconds per stage: {"policy", "twin", "sandbox"}.
    twin:    the twin built from the plan.
    task:    contents of <task> (unparsed) or None when absent.
    answer:  contents of <answer> (unparsed).
    n_tokens: tokens the policy generated.
    """

    trace: str
    events: list[dict]
    timings: dict[str, float]
    twin: Any
    task: str | None
    answer: str
    n_tokens: int


@dataclass
class _State:
    trace: str = ""
    events: list[dict] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=lambda: {"policy": 0.0, "twin": 0.0, "sandbox": 0.0})
    n_tokens: int = 0


def run_rollout(policy: Policy, messages: list[dict], env: RolloutEnv, limits: RolloutLimits) -> Rollout:
    """Run one rollout of `policy` on the chat `messages` ([system, user]) against `env`.

    Raises ProtocolError / DAGError (bench.types.ParseError, kind "parse") on protocol violations,
    and whatever env raises (AdapterError from perception, SandboxError when the sandbox cannot
    start); each with the partial rollout attached as `.trace`, `.events`, `.timings`.
    """
    st = _State()
    try:
        return _run(policy, messages, env, limits, st)
    except AdapterError as exc:
        exc.trace, exc.events, exc.timings = st.trace, st.events, dict(st.timings)
        raise


def _run(policy: Policy, messages: list[dict], env: RolloutEnv, limits: RolloutLimits, st: _State) -> Rollout:
    segment, stop = _generate(policy, messages, limits, st, [P.STOP_PLAN, P.STOP_EXECUTE, P.STOP_ANSWER])
    if stop != P.STOP_PLAN:
        raise P.ProtocolError("missing_tag", f"the rollout reached {stop} before a <dt_plan>...</dt_plan> plan")
    plan_text = P.extract_open_block(segment, P.PLAN)
    order = env.plan(plan_text)
    st.events.append({"stage": "plan", "order": order})

    t0 = time.perf_counter()
    twin = env.build_twin(order)
    rep = twin.to_llm_json(max_chars=limits.twin_max_chars)
    st.timings["twin"] += time.perf_counter() - t0
    st.events.append({"stage": "twin", "chars": len(rep), "seconds": st.timings["twin"]})
    st.trace += "\n" + P.wrap(P.REP, rep) + "\n"

    rounds = 0
    while True:
        segment, stop = _generate(policy, messages, limits, st, [P.STOP_EXECUTE, P.STOP_ANSWER])
        if stop == P.STOP_ANSWER:
            break
        rounds += 1
        if rounds > limits.max_rounds:
            raise P.ProtocolError("max_rounds", f"more than max_rounds={limits.max_rounds} <execute> blocks")
        code = P.extract_open_block(segment, P.EXECUTE)
        t0 = time.perf_counter()
        result = env.execute(code, twin)
        st.timings["sandbox"] += time.perf_counter() - t0
        st.events.append({"stage": "execute", "round": rounds, "ok": bool(result.ok), "seconds": result.duration_s})
        # print() ends with a newline; the closing tag follows the last line directly.
        st.trace += "\n" + P.wrap(P.RESULTS, result.output.rstrip()) + "\n"

    final = segment + stop
    task = P.extract_optional(final, P.TASK)
    answer = P.extract_one(final, P.ANSWER)
    st.events.append({"stage": "answer", "task": task})
    return Rollout(st.trace, st.events, st.timings, twin, task, answer, st.n_tokens)


def _generate(policy: Policy, messages: list[dict], limits: RolloutLimits, st: _State, stop: list[str]) -> tuple[str, str]:
    """Continue the turn until one of `stop`; returns (the text before the stop string, the stop
    string). Both are appended to the trace before any check, so a failure keeps what was written."""
    remaining = limits.max_total_tokens - st.n_tokens
    if remaining < 1:
        raise P.ProtocolError("token_budget", f"max_total_tokens={limits.max_total_tokens} spent before {' or '.join(stop)}")
    prompt = policy.render(messages, st.trace)
    t0 = time.perf_counter()
    gen = policy.generate(prompt, stop, min(limits.max_new_tokens, remaining))
    st.timings["policy"] += time.perf_counter() - t0
    st.n_tokens += gen.n_tokens
    st.trace += gen.text + (gen.matched_stop or "")
    if gen.stop_reason == "length":
        raise P.ProtocolError("token_budget", f"no {' or '.join(stop)} within the token budget ({gen.n_tokens} tokens generated)")
    if gen.stop_reason == "eos" or gen.matched_stop not in stop:
        raise P.ProtocolError("missing_tag", f"the model ended its turn without {' or '.join(stop)}")
    return gen.text, gen.matched_stop
