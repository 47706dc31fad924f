"""The DT-R1 rollout loop (docs/architecture.md "The DT-R1 rollout"), independent of the policy backend.

One assistant turn, generated in pieces: the policy generates until a closing tag, the harness
acts and appends its insertion, and the policy continues from the whole turn so far:
  plan:    ... <dt_plan>DAG</dt_plan>  -> validate, build the twin -> <dt_rep>twin JSON</dt_rep>
  rounds:  ... <execute>code</execute> -> sandbox                   -> <results>output</results>
  answer:  ... <task>..</task> <answer>..</answer>                  -> done
An error in the model's code is not a failure: its last line goes back in <results> and the rollout
continues (as in the paper). A missing or invalid plan, a missing closing tag within the token
budget, or more than `max_rounds` code blocks is a TagError / DAGError (kind "parse"); the
partial trace, events, timings and segments are attached to the exception as `.trace`, `.events`,
`.timings`, `.segments`. `run_rollouts` steps the rollouts of several samples together so a policy
that batches (hf, vLLM) gets one request per unfinished sample at each step; with a served policy
(openai: policy.thread_safe) each rollout runs in its own thread instead, so the server always has
a request from every rollout that is not busy with its twin or sandbox.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Protocol

from rvt_bench.adapters.dtr1 import grammar as G
from rvt_bench.adapters.dtr1 import tags as T
from rvt_bench.adapters.dtr1.tokens import turn_ids
from rvt_bench.adapters.policy.base import Generation, Policy, Request
from rvt_bench.adapters.twin.schema import DEFAULT_MAX_CHARS
from rvt_bench.core.threads import map_threads
from rvt_bench.core.types import AdapterError


class ExecResult(Protocol):
    """What the rollout needs from rvt_bench.adapters.sandbox.runner.SandboxResult."""

    ok: bool
    output: str
    duration_s: float


@dataclass
class RolloutEnv:
    """The harness side of a rollout, for one sample.

    plan:       DAG text (contents of <dt_plan>) -> topological order; raises a ParseError (DAGError).
    build_twin: topological order -> twin (an object with to_llm_json(max_chars)).
    execute:    (code, twin) -> result with ok, output (stdout, or the error's last line), duration_s.
    close:      None, or called once when the rollout ends (releases the sample's sandbox).
    """

    plan: Callable[[str], list[str]]
    build_twin: Callable[[list[str]], Any]
    execute: Callable[[str, Any], ExecResult]
    close: Callable[[], None] | None = None


@dataclass
class RolloutLimits:
    """max_rounds: most <execute> blocks (the paper's m <= 10). max_new_tokens: tokens per
    generation call. max_total_tokens: tokens the policy may generate in the whole rollout.
    twin_max_chars: character budget of the twin JSON inside <dt_rep>. spans: free-text bounds of
    the tag grammar (used when the policy's decoding is "grammar"). twin_style: how <dt_rep> shows
    the twin, "full" (the DT-R1 paper's) or "compact" (few tokens, for small policies;
    rvt_bench.adapters.twin.schema.Twin.to_llm_json). task_hint: the user message names the
    sample's task (a variant; False = the DT-R1 paper's protocol: the policy finds the task in the
    query and declares it in <task>, and its answer is read as the task it declared).

    These defaults are the only ones: DTR1Adapter's arguments and the `model` (conf/model/dtr1.yaml)
    and `rollout` (conf/train/dtr1_grpo.yaml) config schemas of bench/harness/config.py read them from here."""

    max_rounds: int = 10
    max_new_tokens: int = 1024
    max_total_tokens: int = 4096
    twin_max_chars: int = DEFAULT_MAX_CHARS
    spans: G.Spans = field(default_factory=G.Spans)
    twin_style: str = "full"
    task_hint: bool = False


@dataclass
class Rollout:
    """A finished rollout.

    trace:   the whole assistant turn, harness insertions included (starts with policy.prefill).
    events:  one dict per step: {"stage": "plan"|"twin"|"execute"|"answer", ...}.
    timings: seconds per stage: {"policy", "twin", "sandbox"} (in a batch, "policy" is the wall time
             of the batched calls this rollout took part in); "twin" and "sandbox" only once that
             stage ran (a stage that never ran was not measured: it is not 0 s); "prefill" and
             "decode", the policy seconds split (summed PolicyCost.prefill_s / decode_s of its
             calls, each the call's own seconds where it ran), only when the backend measured them.
    twin:    the twin built from the plan.
    task:    contents of <task> (unparsed) or None when absent.
    answer:  contents of <answer> (unparsed).
    n_tokens: tokens the policy generated.
    segments: the trace in pieces, "".join(seg["text"]) == trace; each a dict {"kind", "text",
             "token_ids", "ended", "logprobs", "end_token"} with kind "prefill" (the template's
             pre-filled text), "policy" (generated text with its closing tag; token_ids, ended,
             logprobs, end_token = the Generation's token_ids, stop_reason, logprobs, end_token) or "env" (an inserted <dt_rep> / <results> block with its
             surrounding newlines). Training masks the "env" pieces out of the loss.
    calls:   one dict per policy call, in order: {"after": what the call continues from, "start"
             (the prompt), "twin" (<dt_rep>) or "results" (a code round's <results>), "generated":
             tokens} and the fields of its PolicyCost.record() the backend measured (prompt_tokens,
             cached_tokens, prefilled, prefill_s, decode_s).
    """

    trace: str
    events: list[dict]
    timings: dict[str, float]
    twin: Any
    task: str | None
    answer: str
    n_tokens: int
    segments: list[dict] = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)


@dataclass
class _State:
    trace: str = ""
    events: list[dict] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=lambda: {"policy": 0.0})
    n_tokens: int = 0
    segments: list[dict] = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)
    after: str = "start"  # what the next policy call continues from (Rollout.calls)

    def cost(self, gen: Generation) -> None:
        """Record `gen`'s call in `calls`, and its prefill / decode seconds in `timings`."""
        record = {"after": self.after, "generated": gen.n_tokens, **(gen.cost.record() if gen.cost else {})}
        self.calls.append(record)
        for key, stage in (("prefill_s", "prefill"), ("decode_s", "decode")):
            if key in record:
                self.timings[stage] = self.timings.get(stage, 0.0) + record[key]

    def add(self, kind: str, text: str, token_ids: tuple[int, ...] | None = None, ended: str | None = None,
            logprobs: tuple[float | None, ...] | None = None, end_token: tuple[int, float | None] | None = None) -> None:
        self.trace += text
        self.segments.append({"kind": kind, "text": text, "token_ids": token_ids, "ended": ended, "logprobs": logprobs,
                              "end_token": end_token})


# A rollout is a generator: it yields the next policy request and receives its Generation, so one
# driver can step many rollouts together and batch their requests (run_rollouts).
_Steps = Generator[Request, Generation, Rollout]


def run_rollout(policy: Policy, messages: list[dict], env: RolloutEnv, limits: RolloutLimits) -> Rollout:
    """Run one rollout of `policy` on the chat `messages` ([system, user]) against `env`.

    Raises TagError / DAGError (rvt_bench.core.types.ParseError, kind "parse") on tag-format violations,
    and whatever env raises (AdapterError from perception, SandboxError when the sandbox cannot
    start); each with the partial rollout attached as `.trace`, `.events`, `.timings`, `.segments`.
    """
    result = run_rollouts(policy, [(messages, env)], limits)[0]
    if isinstance(result, AdapterError):
        raise result
    return result


def run_rollouts(policy: Policy, jobs: list[tuple[list[dict], RolloutEnv]], limits: RolloutLimits) -> list[Rollout | AdapterError]:
    """Run one rollout per (messages, env) job, stepping them together: at each step every
    unfinished rollout has one request in flight and all go to `policy.generate_batch` at once.

    Returns, per job in order, the Rollout or the AdapterError that ended it (with the partial
    rollout attached as for run_rollout). A rollout's result does not depend on the others in the
    batch as long as the policy's generate_batch is batch-independent (greedy hf and all default
    backends are). Errors that are not AdapterError propagate.
    """
    results: list[Rollout | AdapterError | None] = [None] * len(jobs)
    live: dict[int, tuple[_Steps, _State]] = {}
    pending: dict[int, Request] = {}
    twin_lock = threading.Lock()  # one twin at a time: perception holds its models once

    def advance(i: int, send: Generation | AdapterError | None) -> None:
        steps, st = live[i]
        try:
            # The first send(None) starts the generator; a policy error is raised inside it.
            pending[i] = steps.throw(send) if isinstance(send, AdapterError) else steps.send(send)
        except StopIteration as stop:
            results[i] = stop.value
            del live[i]
        except AdapterError as exc:
            exc.trace, exc.events, exc.timings, exc.segments = st.trace, st.events, dict(st.timings), st.segments
            exc.calls = st.calls
            results[i] = exc
            del live[i]
        if i not in live:
            _close(jobs[i][1])

    try:
        for i, (messages, env) in enumerate(jobs):
            st = _State()
            if policy.prefill:
                st.add("prefill", policy.prefill)
            live[i] = (_run(policy, messages, env, limits, st, twin_lock), st)
        if policy.thread_safe and len(jobs) > 1:
            _run_each(policy, pending, live, advance)
        else:
            for i in list(live):
                advance(i, None)
            _step_all(policy, pending, live, advance)
    finally:
        for i in list(live):
            _close(jobs[i][1])
    return results  # type: ignore[return-value]


def _close(env: RolloutEnv) -> None:
    if env.close is not None:
        env.close()


def _step_all(policy: Policy, pending: dict, live: dict, advance: Callable) -> None:
    while pending:
        order = sorted(pending)
        t0 = time.perf_counter()
        try:
            gens: list[Generation | AdapterError] = list(policy.generate_batch([pending[i] for i in order]))
        except AdapterError:
            # One bad request (e.g. a prompt longer than the context) must fail only its own
            # sample: redo the batch one request at a time to find out whose it was.
            gens = [_one(policy, pending[i]) for i in order]
        elapsed = time.perf_counter() - t0
        if len(gens) != len(order):
            raise AdapterError(f"policy {policy.name}: generate_batch returned {len(gens)} results for {len(order)} requests")
        pending.clear()
        for i in order:
            # the batch's wall time shared by its requests, so per-sample policy seconds add up to
            # the run's (as rvt_bench.harness.predict shares a batch's total)
            live[i][1].timings["policy"] += elapsed / len(order)
        for i, gen in zip(order, gens):
            advance(i, gen)


def _run_each(policy: Policy, pending: dict, live: dict, advance: Callable) -> None:
    """Every rollout in its own thread, for a policy whose requests are independent calls to a
    server (policy.thread_safe): a rollout's next request goes out as soon as its own last step
    (twin, sandbox round) is done, not when the whole batch's are, so the server keeps as many
    requests in flight as there are unfinished rollouts (the policy's max_concurrency caps them)
    and a sandbox round overlaps the other rollouts' requests. A rollout's "policy" seconds are
    then its own requests' wall time."""
    stop = threading.Event()  # set when one rollout's thread raised or the run is interrupted

    def drive(i: int) -> None:
        advance(i, None)  # the first prompt's rendering may itself ask the server (its chat template)
        while i in pending and not stop.is_set():
            request = pending.pop(i)
            t0 = time.perf_counter()
            gen = _one(policy, request)
            live[i][1].timings["policy"] += time.perf_counter() - t0
            advance(i, gen)

    try:
        # daemon threads (rvt_bench.core.threads): a stop signal does not wait for the requests in flight
        map_threads(drive, sorted(live), len(live), "rollout")
    finally:
        # on Ctrl-C or an error the other rollouts stop after their current step (no wait for them)
        stop.set()


def _one(policy: Policy, request: Request) -> Generation | AdapterError:
    try:
        # generate_batch, not generate: the request keeps its prompt_ids (token-prompt policies).
        return policy.generate_batch([request])[0]
    except AdapterError as exc:
        return exc


def _run(policy: Policy, messages: list[dict], env: RolloutEnv, limits: RolloutLimits, st: _State,
         twin_lock: threading.Lock) -> _Steps:
    # Tag-grammar decoding: each segment is constrained by what is known when it starts.
    constrained = policy.decoding == "grammar"
    think_open = T.has_open(st.trace, T.THINK) and not T.has_close(st.trace, T.THINK)
    grammar = G.plan_grammar(limits.spans, think_open) if constrained else None
    segment, stop = yield from _generate(policy, messages, limits, st, [T.STOP_PLAN, T.STOP_EXECUTE, T.STOP_ANSWER], grammar)
    if stop != T.STOP_PLAN:
        raise T.TagError("missing_tag", f"the rollout reached {stop} before a <dt_plan>...</dt_plan> plan")
    plan_text = T.extract_open_block(segment, T.PLAN)
    order = env.plan(plan_text)
    st.events.append({"stage": "plan", "order": order})

    with twin_lock:  # its seconds are the build's, not the wait for another rollout's twin
        t0 = time.perf_counter()
        twin = env.build_twin(order)
    # The style is passed only when it is not the default, so twins of other builders (test doubles)
    # that know only the full style keep working.
    style = {} if limits.twin_style == "full" else {"style": limits.twin_style}
    rep = twin.to_llm_json(max_chars=limits.twin_max_chars, **style)
    st.timings["twin"] = st.timings.get("twin", 0.0) + time.perf_counter() - t0
    event = {"stage": "twin", "chars": len(rep), "seconds": st.timings["twin"]}
    artifacts = getattr(twin, "artifacts", None) or {}
    for key in ("cache", "skipped"):  # perception cache hits/misses and skipped tools, for debugging
        if key in artifacts:
            event[key] = artifacts[key]
    st.events.append(event)
    st.add("env", "\n" + T.wrap(T.REP, rep) + "\n")
    st.after = "twin"

    rounds = 0
    while True:
        grammar = G.step_grammar(twin.instance_ids(), twin.num_frames, limits.spans,
                                 rounds < min(limits.max_rounds, limits.spans.code_rounds)) if constrained else None
        segment, stop = yield from _generate(policy, messages, limits, st, [T.STOP_EXECUTE, T.STOP_ANSWER], grammar)
        if stop == T.STOP_ANSWER:
            break
        rounds += 1
        if rounds > limits.max_rounds:
            raise T.TagError("max_rounds", f"more than max_rounds={limits.max_rounds} <execute> blocks")
        code = T.extract_open_block(segment, T.EXECUTE)
        t0 = time.perf_counter()
        result = env.execute(code, twin)
        st.timings["sandbox"] = st.timings.get("sandbox", 0.0) + time.perf_counter() - t0
        event = {"stage": "execute", "round": rounds, "ok": bool(result.ok), "seconds": result.duration_s}
        for key in ("reason", "isolation"):  # why the code stopped; the isolation it ran under
            if getattr(result, key, None) is not None:
                event[key] = getattr(result, key)
        st.events.append(event)
        # print() ends with a newline; the closing tag follows the last line directly.
        st.add("env", "\n" + T.wrap(T.RESULTS, result.output.rstrip()) + "\n")
        st.after = "results"

    final = segment + stop
    # recorded as soon as the model closed its answer block, whether or not the block parses: the
    # funnel reads "got through its code rounds" from this event, not from text code could print
    answered = {"stage": "answer"}
    st.events.append(answered)
    answered["task"] = task = T.extract_optional(final, T.TASK)
    answer = T.extract_one(final, T.ANSWER)
    return Rollout(st.trace, st.events, st.timings, twin, task, answer, st.n_tokens, st.segments, st.calls)


def _generate(policy: Policy, messages: list[dict], limits: RolloutLimits, st: _State,
              stop: list[str], grammar: str | None = None) -> Generator[Request, Generation, tuple[str, str]]:
    """Continue the turn until one of `stop`; returns (the text before the stop string, the stop
    string). Both are appended to the trace before any check, so a failure keeps what was written."""
    remaining = limits.max_total_tokens - st.n_tokens
    if remaining < 1:
        raise T.TagError("token_budget", f"max_total_tokens={limits.max_total_tokens} spent before {' or '.join(stop)}")
    prompt = policy.render(messages, st.trace)
    prompt_ids = None
    if policy.token_prompts:
        # Continue from the ids sampled so far, not a re-tokenisation of their text: these are the
        # ids training scores (rvt_bench.adapters.dtr1.training), so sampler and learner see one sequence.
        prompt_ids = tuple(turn_ids(policy.encode, policy.render(messages, policy.prefill), st.segments).all_ids)
    gen = yield Request(prompt, list(stop), min(limits.max_new_tokens, remaining), prompt_ids, grammar)
    st.n_tokens += gen.n_tokens
    st.cost(gen)
    st.add("policy", gen.text + (gen.matched_stop or ""), gen.token_ids, gen.stop_reason, gen.logprobs, gen.end_token)
    if gen.stop_reason == "length":
        raise T.TagError("token_budget", f"no {' or '.join(stop)} within the token budget ({gen.n_tokens} tokens generated)")
    if gen.stop_reason == "eos" or gen.matched_stop not in stop:
        raise T.TagError("missing_tag", f"the model ended its turn without {' or '.join(stop)}")
    return gen.text, gen.matched_stop
