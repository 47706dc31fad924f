"""SAM 3 Agent's loop (facebookresearch/sam3 sam3/agent/agent_core.py agent_inference at 99d02f2),
ported statement by statement, with the MLLM, SAM 3 and the renderer passed in.

Each round the MLLM's reply is cut after its first </tool>; the JSON between the last <tool> and
that </tool> (with "}}}" replaced by "}}") is the tool call. Tools:
  segment_phrase {"text_prompt"}   SAM 3 on the raw image with that noun phrase; its masks, rendered
                                   and numbered, are the next turn (a phrase used before is refused)
  examine_each_mask {}             each current mask judged by a separate MLLM request under the
                                   iterative-checking system prompt: <verdict>Accept|Reject</verdict>;
                                   the accepted masks become the current ones
  select_masks_and_return {"final_answer_masks": [1-based]}  ends the loop with those masks
  report_no_mask {}                ends the loop with no mask
The first call must be segment_phrase or report_no_mask. After every other call the history is
pruned to the system turn, the first user turn (with the used-phrases warning once a phrase was
refused or replaced) and everything from the latest assistant turn that called segment_phrase on;
more than `max_generations` rounds stop the sample. Where the repository raises (an assert, bad
JSON, an unknown tool, a verdict neither Accept nor Reject, a full history), the sample fails with
AgentError naming the rule; the loop never repairs a reply the repository would not.

The trace (AgentResult.calls / AgentError.calls) holds every tool call with its result.
"""
from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from rvt_bench.adapters.sam3_agent import prompts as P
from rvt_bench.core.files import depth_over
from rvt_bench.core.printable import bounded
from rvt_bench.core.types import AdapterError, ParseError

TOOLS = ("segment_phrase", "examine_each_mask", "select_masks_and_return", "report_no_mask")
MAX_GENERATIONS = 100  # agent_inference(max_generations=100)
TRACE_DEPTH = 2
"""A tool call's name or parameter is kept in the trace as the model wrote it when it nests lists and
objects at most this deep (a list of mask numbers is 1), else as a note: the reply's JSON may nest
hundreds of levels, past what the run's files are written with (Python's recursion limit) and read
back with (dataset.limits.max_json_depth, 64). The reply itself, a string, is always in the trace."""
TRACE_REPLY_CHARS = 32_768
"""Characters of one reply (or one string or list parameter's JSON) the trace keeps: an honest reply
of the repository's 4096 tokens is about 16k; the rest is counted ("... (N more characters)")."""
TRACE_CHARS = 2_000_000
"""Characters of all replies of one sample the trace keeps (100 rounds of 16k-character replies fit
with their examine_each_mask verdicts): a server answering 1 MB a round for max_generations rounds
wrote 200 MB per sample (reply + rollout), past the 64 MB a predictions line may hold
(dataset.limits.max_line_mb). Only the trace is cut: the loop reads every reply whole."""


@dataclass
class Detections:
    """segment_phrase's current masks, in the order the MLLM numbers them (1-based): masks (N, H, W)
    bool, boxes [[x0, y0, x1, y1]] frame pixels, scores, and `ids` (each mask's index in the SAM 3
    call that made it, so examine_each_mask's subsets stay traceable)."""

    masks: np.ndarray
    boxes: list
    scores: list
    ids: list = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.ids:
            self.ids = list(range(len(self.scores)))

    def __len__(self) -> int:
        return len(self.scores)

    def subset(self, keep: list[int]) -> "Detections":
        """The masks at 0-based positions `keep`, in that order."""
        masks = self.masks[keep] if len(keep) else self.masks[:0]
        return Detections(masks, [self.boxes[i] for i in keep], [self.scores[i] for i in keep],
                          [self.ids[i] for i in keep] or [])


class AgentError(ParseError):
    """The loop stopped where the repository's raises. stage: "reply" (no reply from the MLLM:
    `reason` none | backend | empty),
    "tool_call" (a reply the loop refuses: `reason` json | malformed | first_call | parameters |
    examine_without_masks | verdict | unknown_tool), "turns" (max_generations | history | images).
    calls / messages: the trace so far. kind: "parse" (the model's output broke a rule), but
    "adapter" where no reply came (reply none | backend: the server failed, an HTTP error or a
    timeout), so that a run whose server fails every request stops as a setup failure
    (run.stop_after_same_failures) and never publishes its zeros as the model's score."""

    def __init__(self, stage: str, reason: str, message: str):
        super().__init__(f"sam3_agent {stage} ({reason}): {message}")
        self.stage, self.reason = stage, reason
        self.calls: list[dict] = []
        if stage == "reply" and reason in ("none", "backend"):
            self.kind = "adapter"


@dataclass
class AgentResult:
    """How the loop ended: tool "select_masks_and_return" (final = the selected Detections, maybe
    empty) or "report_no_mask" (final empty); text_prompt = the latest segment_phrase prompt;
    calls = every tool call with its result; generations = MLLM requests of the main conversation."""

    tool: str
    final: Detections | None
    text_prompt: str
    calls: list[dict]
    generations: int
    timings: dict


@dataclass
class Tools:
    """What the loop calls. generate(messages) -> reply text or None (the repository's
    send_generate_request); segment(text_prompt) -> Detections (call_sam_service, its masks already
    filtered and sorted); render_all(detections) -> ImageRef of the numbered masks (visualize(outputs));
    render_one(detections, i) -> (ImageRef of mask i alone, ImageRef of it zoomed in)."""

    generate: Callable[[list[dict]], str | None]
    segment: Callable[[str], Detections]
    render_all: Callable[[Detections, str], P.ImageRef]
    render_one: Callable[[Detections, int], tuple[P.ImageRef, P.ImageRef]]


def count_images(messages: list[dict]) -> int:
    """Image parts in the history (agent_core.count_images)."""
    return sum(1 for m in messages if isinstance(m.get("content"), list)
               for c in m["content"] if isinstance(c, dict) and c.get("type") == "image")


def prune(messages: list[dict], used: list, latest: str, raw: P.ImageRef, query: str) -> list[dict]:
    """agent_core._prune_messages_for_next_round: the first two turns (the second with the
    used-phrases warning when another phrase was used before) + the latest assistant turn that
    called segment_phrase and all after it. `used`: the phrases used, in the order of first use."""
    if not len(messages) < 10:
        raise AgentError("turns", "history", f"{len(messages)} messages in the history (the repository allows fewer than 10)")
    part1 = copy.deepcopy(messages[:2])
    start = None
    for idx in range(len(messages) - 1, 1, -1):
        msg = messages[idx]
        if msg.get("role") != "assistant" or "content" not in msg:
            continue
        if any(isinstance(c, dict) and c.get("type") == "text" and "<tool>" in c.get("text", "")
               and "segment_phrase" in c.get("text", "") for c in msg["content"]):
            start = idx
            break
    part2 = messages[start:] if start is not None else []
    previously = [p for p in used if p != latest] if latest else list(used)
    if part2 and previously:
        part1[1] = P.warned_user(raw, query, previously)
    return list(part1) + list(part2)


def tool_call(reply: str) -> tuple[str, Any]:
    """(the reply cut after its first </tool>, the parsed call) as agent_inference reads a reply:
    the text between the last <tool> and the first </tool> of the cut reply, stripped, "}}}" -> "}}",
    json.loads. Raises AgentError("tool_call", "json") when that is not JSON, or JSON past Python's
    parser (nested deeper than its recursion limit, an integer of more than 4300 digits), where the
    repository's json.loads raises RecursionError or ValueError."""
    cut = reply.split("</tool>", 1)[0] + "</tool>"
    raw = cut.split("<tool>")[-1].split("</tool>")[0].strip().replace(r"}}}", r"}}")
    try:
        return cut, json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        why = "invalid JSON" if isinstance(exc, json.JSONDecodeError) else f"JSON past Python's parser ({type(exc).__name__})"
        raise AgentError("tool_call", "json", f"{why} in tool call: {raw[:200]!r}") from exc


def verdict(reply: str) -> bool:
    """examine_each_mask's reading of a checking reply: True for Accept, False for Reject (the text
    between the last <verdict> and the next </verdict>); AgentError("tool_call", "verdict") when it
    holds both words or neither."""
    v = reply.split("<verdict>")[-1].split("</verdict>")[0].strip()
    if "Accept" in v and "Reject" not in v:
        return True
    if "Reject" in v and "Accept" not in v:
        return False
    raise AgentError("tool_call", "verdict", f"expected <verdict>Accept</verdict> or <verdict>Reject</verdict>, got {v[:120]!r}")


def _shown(value: Any, limit: int = 200) -> str:
    """`value` (from the model's JSON) as a message quotes it: its repr cut at `limit` characters;
    a list or object nested deeper than TRACE_DEPTH is described, not written (repr recurses)."""
    if isinstance(value, (list, dict)) and depth_over(value, TRACE_DEPTH):
        return f"(a JSON {'array' if isinstance(value, list) else 'object'} nested more than {TRACE_DEPTH} levels deep)"
    return bounded(repr(value), limit)


def _recorded(value: Any) -> Any:
    """`value` (a tool call's name or parameter) as the trace keeps it (TRACE_DEPTH, TRACE_REPLY_CHARS)."""
    if isinstance(value, str):
        return bounded(value, TRACE_REPLY_CHARS)
    if isinstance(value, (list, dict)) and (depth_over(value, TRACE_DEPTH) or len(json.dumps(value)) > TRACE_REPLY_CHARS):
        return _shown(value)
    return value


class _Budget:
    """What is left of the sample's TRACE_CHARS for the replies the trace keeps."""

    def __init__(self) -> None:
        self.left = TRACE_CHARS

    def kept(self, reply: str) -> str:
        """`reply` as the trace keeps it: at most TRACE_REPLY_CHARS and what is left of the budget."""
        keep = max(0, min(TRACE_REPLY_CHARS, self.left))
        self.left -= min(len(reply), keep)
        if len(reply) <= keep:
            return reply
        why = "" if keep == TRACE_REPLY_CHARS else f" (the sample's trace keeps {TRACE_CHARS:,} characters of replies)"
        return f"{reply[:keep]}... ({len(reply) - keep:,} more characters{why})"


def _name(call: Any) -> Any:
    try:
        return call["name"]
    except (KeyError, TypeError, IndexError) as exc:
        raise AgentError("tool_call", "malformed", f"a tool call needs a \"name\": {_shown(call)}") from exc


def _params(call: Any, keys: list[str]) -> dict:
    try:
        params = call["parameters"]
        ok = list(params.keys()) == keys
    except (KeyError, TypeError, AttributeError) as exc:
        raise AgentError("tool_call", "parameters", f"{call.get('name')}: \"parameters\" must be an object with "
                                                    f"{keys}") from exc
    if not ok:
        raise AgentError("tool_call", "parameters", f"{call['name']}: parameters {_shown(list(params.keys()))}, expected {keys}")
    return params


def _generate(tools: Tools, messages: list[dict], timings: dict) -> str:
    t0 = time.perf_counter()
    try:
        reply = tools.generate(messages)
    finally:
        timings["mllm"] = timings.get("mllm", 0.0) + time.perf_counter() - t0
    if reply is None:
        raise AgentError("reply", "none", "the MLLM returned no reply")
    return reply


def run(raw: P.ImageRef, query: str, system: dict[str, str], tools: Tools,
        max_generations: int = MAX_GENERATIONS) -> AgentResult:
    """agent_inference(img_path, initial_text_prompt) on the raw image `raw`. system: prompts.load's
    {"agent", "checking"}. Returns AgentResult; raises AgentError where the repository raises,
    AdapterError from the tools as they raise it, either with .calls (the trace so far) and
    .loop_timings (seconds so far: "mllm", "sam3")."""
    calls: list[dict] = []
    timings: dict[str, float] = {}
    try:
        return _run(raw, query, system, tools, max_generations, calls, timings)
    except AdapterError as exc:
        exc.calls = calls  # type: ignore[attr-defined]
        exc.loop_timings = timings  # type: ignore[attr-defined]
        raise


def _run(raw, query, system, tools, max_generations, calls, timings) -> AgentResult:
    current: Detections | None = None  # PATH_TO_LATEST_OUTPUT_JSON's contents; None = ""
    latest = ""
    used: list = []  # USED_TEXT_PROMPTS (a set there; order kept here for the messages, see prune)
    generation_count = 0
    budget = _Budget()
    messages = [{"role": "system", "content": system["agent"]}, P.initial_user(raw, query)]
    reply = _generate(tools, messages, timings)
    while True:
        record: dict[str, Any] = {"round": generation_count + 1, "reply": budget.kept(reply), "tool": None}
        calls.append(record)  # before parsing: a reply the loop refuses is in the trace too
        text, call = tool_call(reply)
        name = _name(call)
        record["tool"] = _recorded(name)
        if current is None and name not in ("segment_phrase", "report_no_mask"):
            raise AgentError("tool_call", "first_call", f"the first tool call must be segment_phrase or report_no_mask, got {_shown(name)}")

        if name == "segment_phrase":
            prompt = _params(call, ["text_prompt"])["text_prompt"]
            record["parameters"] = {"text_prompt": _recorded(prompt)}
            try:
                seen = prompt in used
            except TypeError as exc:  # an unhashable prompt (a list): the repository's set raises
                raise AgentError("tool_call", "parameters", f"text_prompt {_shown(prompt)} is not a phrase") from exc
            if seen:
                messages.append(P.assistant(text))
                messages.append(P.user(P.text(P.duplicate_prompt(prompt, used))))
                record["result"] = {"refused": "used before"}
            else:
                if not isinstance(prompt, str):  # call_sam_service cannot run SAM 3 on it: no outputs file
                    raise AgentError("tool_call", "parameters", f"text_prompt {_shown(prompt)} is not a string")
                used.append(prompt)
                latest = prompt
                t0 = time.perf_counter()
                current = tools.segment(prompt)
                timings["sam3"] = timings.get("sam3", 0.0) + time.perf_counter() - t0
                messages.append(P.assistant(text))
                record["result"] = {"masks": len(current), "scores": [round(float(s), 4) for s in current.scores]}
                if len(current) == 0:
                    messages.append(P.user(P.text(P.no_masks(prompt, query))))
                else:
                    rendered = tools.render_all(current, f"masks {prompt}")
                    messages.append(P.user(P.text(P.masks_found(len(current), query)), P.image(rendered)))

        elif name == "examine_each_mask":
            if latest == "":
                raise AgentError("tool_call", "first_call", "examine_each_mask before any segment_phrase")
            last = messages[-1]["content"]
            if not (isinstance(last, list) and len(last) > 1 and last[1].get("type") == "image"):
                raise AgentError("tool_call", "examine_without_masks", "examine_each_mask needs the latest turn to show masks")
            messages.pop()
            messages.append(P.user(P.text(P.SIMPLIFIED)))
            keep: list[int] = []
            verdicts = []
            for i in range(len(current)):
                mask_ref, zoom_ref = tools.render_one(current, i)
                check = P.checking_messages(system["checking"], raw, query, mask_ref, zoom_ref)
                answer = _generate(tools, check, timings)
                accepted = verdict(answer)
                verdicts.append({"mask": i + 1, "reply": budget.kept(answer), "accept": accepted})
                if accepted:
                    keep.append(i)
            current = current.subset(keep)
            record["result"] = {"verdicts": verdicts, "kept": [i + 1 for i in keep]}
            messages.append(P.assistant(text))
            if not keep:
                messages.append(P.user(P.text(P.all_rejected(query))))
            else:
                rendered = tools.render_all(current, "kept " + "-".join(str(i + 1) for i in keep))
                messages.append(P.user(P.text(P.some_kept(len(keep), query)), P.image(rendered)))

        elif name == "select_masks_and_return":
            chosen = _params(call, ["final_answer_masks"])["final_answer_masks"]
            record["parameters"] = {"final_answer_masks": _recorded(chosen)}
            available = set(range(1, len(current) + 1))
            try:  # the repository's own expressions: Python decides what a non-integer selects (True is 1)
                picked = sorted({i for i in chosen if i in available})
                positions = [i - 1 for i in picked]
                [current.scores[j] for j in positions]  # noqa: B018 (indexing a list as there: 1.0 raises)
            except TypeError as exc:
                raise AgentError("tool_call", "parameters", f"final_answer_masks {_shown(chosen)} is not a list of mask numbers") from exc
            final = current.subset([int(i) for i in positions])
            record["result"] = {"selected": [int(i) for i in picked]}
            return AgentResult(name, final, latest, calls, generation_count + 1, timings)

        elif name == "report_no_mask":
            record["result"] = {"selected": []}
            return AgentResult(name, None, latest, calls, generation_count + 1, timings)

        else:
            raise AgentError("tool_call", "unknown_tool", f"unknown tool {_shown(name)} (tools: {', '.join(TOOLS)})")

        for message in messages:
            if message["role"] == "assistant" and "content" in message:
                for content in message["content"]:
                    if isinstance(content, dict) and content.get("type") == "text" and "text" in content:
                        content["text"] = content["text"].split("</tool>", 1)[0] + "</tool>\n\n"
        messages = prune(messages, used, latest, raw, query)
        if count_images(messages) > 2:
            raise AgentError("turns", "images", f"{count_images(messages)} images in the history (the repository allows 2)")
        generation_count += 1
        if generation_count > max_generations:
            raise AgentError("turns", "max_generations", f"more than model.max_generations={max_generations} rounds")
        reply = _generate(tools, messages, timings)
