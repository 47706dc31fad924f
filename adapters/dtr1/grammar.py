"""Tag-grammar decoding for DT-R1 (`policy.decoding=grammar`): GBNF grammars, one per segment.

A rollout is generated in segments that end at a closing tag (rvt_bench.adapters.dtr1.rollout), and what
may follow depends on what the harness learnt in between (the twin's instance ids exist only
after the plan ran), so the grammar is built per segment and per sample:

- plan segment:  ``<think>T</think> <dt_plan>DAG</dt_plan>``. DAG = a JSON object over the tools of
  rvt_bench.adapters.twin.registry.TOOLS, in registry order, each node listing exactly the tools it requires,
  a node allowed only when those are planned before it, at least one node: every DAG the grammar
  admits passes rvt_bench.adapters.twin.dag.validate_dag.
- step segment (after ``<dt_rep>`` or ``<results>``): ``[<think>T</think>] <execute>CODE</execute>``
  (only while rounds are left) or ``<task>TASK</task> <answer>ANSWER</answer>`` with TASK in
  rvt_bench.core.types.TASKS and ANSWER in that task's format (rvt_bench.adapters.dtr1.answer): segmentation
  ``{"instances": [ids]}`` with ids of the twin; grounding ``{"boxes": {"<frame>": [[x1, y1, x2,
  y2], ...]}}`` with frames of the twin and four numbers in [0, 1]; vqa/summarization one line of
  text.
- free text (T, CODE, answer text) is bounded by `Spans` in characters and cannot contain ``</``,
  so a span always ends at its own closing tag.

The grammars are GBNF (llama.cpp's grammar format); xgrammar (hf policy) and vLLM's structured
outputs (``structured_outputs={"grammar": ...}`` / ``guided_grammar``) read the same text.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from rvt_bench.adapters.dtr1 import tags as T
from rvt_bench.adapters.twin.registry import TOOLS, ToolSpec
from rvt_bench.core.types import TASKS

DECODINGS = ("free", "grammar")


@dataclass(frozen=True)
class Spans:
    """Bounds of the free-text spans, in characters: think (each <think>), code (each <execute>),
    text (a vqa/summarization answer); max_boxes: boxes per frame in a grounding answer;
    code_rounds: <execute> blocks the grammar admits per rollout (besides the rollout's max_rounds)."""

    think_chars: int = 200
    code_chars: int = 300
    text_chars: int = 160
    max_boxes: int = 2
    code_rounds: int = 10


def _lit(text: str) -> str:
    """A GBNF string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _free(chars: int, newlines: bool = True) -> str:
    """Up to `chars` characters with no '</' (a '<' must not start a closing tag)."""
    plain = r"[^<]" if newlines else r"[^<\n]"
    return f'({plain} | "<" [^/<]){{0,{int(chars)}}}'


def _ws() -> str:
    return r'[ \n]{0,2}'


def _alts(options: Iterable[str]) -> str:
    return " | ".join(options)


def dag_rules(tools: dict[str, ToolSpec] | None = None) -> list[str]:
    """GBNF rules (root ``dag``) of the plans validate_dag accepts, over `tools` (default
    registry.TOOLS) in registry order. Raises ValueError when a tool requires one listed after it."""
    tools = TOOLS if tools is None else tools
    names = list(tools)
    needed = sorted({r for s in tools.values() for r in s.requires}, key=names.index)
    for spec in tools.values():
        for req in spec.requires:
            if names.index(req) > names.index(spec.name):
                raise ValueError(f"tool {spec.name} requires {req}, listed after it in the registry")
    rules: dict[str, str] = {}

    def rule(i: int, have: frozenset[str], started: bool) -> str | None:
        name = f"dag-{i}-{''.join(str(names.index(h)) for h in sorted(have, key=names.index)) or 'x'}-{int(started)}"
        if name in rules:
            return name if rules[name] else None
        rules[name] = ""  # a placeholder: the state graph is acyclic (i grows), no rule refers to itself
        if i == len(names):
            body = ['"}"'] if started else []
        else:
            spec = tools[names[i]]
            body = []
            skip = rule(i + 1, have, started)
            if skip:
                body.append(skip)
            if all(r in have for r in spec.requires):
                nxt = rule(i + 1, have | ({spec.name} & set(needed)), True)
                if nxt:
                    deps = ", ".join(f'"{r}"' for r in spec.requires)
                    node = (", " if started else "") + f'"{spec.name}": [{deps}]'
                    body.append(f"{_lit(node)} {nxt}")
        rules[name] = _alts(body)
        return name if body else None

    first = rule(0, frozenset(), False)
    if first is None:
        raise ValueError("no tool can be planned")
    return [f'dag ::= "{{" {first}'] + [f"{k} ::= {v}" for k, v in rules.items() if v]


def plan_grammar(spans: Spans = Spans(), think_open: bool = False) -> str:
    """GBNF of the first segment: think, then the plan, ending with ``</dt_plan>``.
    think_open: the turn already opened ``<think>`` (a template's prefill), so it is not written."""
    think = ("" if think_open else f"{_lit(T.open_tag(T.THINK))} ") + f"{_free(spans.think_chars)} {_lit(T.close_tag(T.THINK))}"
    return "\n".join([
        f"root ::= {think} ws {_lit(T.open_tag(T.PLAN))} dag {_lit(T.close_tag(T.PLAN))}",
        f"ws ::= {_ws()}",
        *dag_rules(),
    ])


def step_grammar(instance_ids: Sequence[int], num_frames: int, spans: Spans = Spans(),
                 allow_execute: bool = True, tasks: Sequence[str] = TASKS) -> str:
    """GBNF of a segment after the twin or a code round: an optional think, then a code block
    (when `allow_execute`) or the task and its answer. instance_ids: the twin's ids; num_frames:
    the twin's frame count (grounding frame keys 0..num_frames-1)."""
    think = f"({_lit(T.open_tag(T.THINK))} {_free(spans.think_chars)} {_lit(T.close_tag(T.THINK))} ws)?"
    ends = []
    if allow_execute:
        ends.append(f"{_lit(T.open_tag(T.EXECUTE))} {_free(spans.code_chars)} {_lit(T.close_tag(T.EXECUTE))}")
    ends.append("final")
    finals = [f"{_lit(T.open_tag(T.TASK) + t + T.close_tag(T.TASK))} ws {_lit(T.open_tag(T.ANSWER))} ans-{t} "
              f"{_lit(T.close_tag(T.ANSWER))}" for t in tasks]
    ids = [str(int(i)) for i in instance_ids]
    lines = [
        f"root ::= ws {think} ({_alts(ends)})",
        f"final ::= {_alts(finals)}",
        f"ws ::= {_ws()}",
    ]
    for t in tasks:
        if t == "segmentation":
            lines.append(f'ans-segmentation ::= "{{\\"instances\\": [" ids? "]}}"')
            if ids:
                lines.append(f'ids ::= id (", " id){{0,{len(ids) - 1}}}')
                lines.append(f"id ::= {_alts(_lit(i) for i in ids)}")
            else:
                lines.append('ids ::= ""')
        elif t == "grounding":
            frames = _alts(_lit(str(f)) for f in range(max(int(num_frames), 1)))
            lines += [
                f'ans-grounding ::= "{{\\"boxes\\": {{" fbox (", " fbox){{0,{max(int(num_frames), 1) - 1}}} "}}}}"',
                f'fbox ::= "\\"" frame "\\": [" box (", " box){{0,{spans.max_boxes - 1}}} "]"',
                f"frame ::= {frames}",
                'box ::= "[" num ", " num ", " num ", " num "]"',
                'num ::= "0" ("." [0-9]{1,3})? | "1" (".0")?',
            ]
        else:
            lines.append(f"ans-{t} ::= [^<\\n ] {_free(spans.text_chars - 1, newlines=False)}")
    return "\n".join(lines)
