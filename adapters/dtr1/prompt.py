"""The DT-R1 system prompt and per-sample user message.

The system prompt states the rollout tag format (rvt_bench.adapters.dtr1.tags), the tools a plan may
use (rvt_bench.adapters.twin.registry.describe_tools) and one short worked rollout, condensed from the DT-R1
paper's example (arXiv 2511.12365: the puppy lifting a paw on a checkered blanket before it
barks). The user message carries the query, modality and frame count: as in the paper, the policy
works out from the query which task it is asked (segmentation, grounding, vqa, summarization) and
declares it in <task>. `task_hint=True` (model.task_hint, a named variant) adds the sample's task to
the user message, as every run before the setting existed did.

The twin's description follows what the configured perception's twin holds (issue 43 item 4): with
metric depth (perception/depth=metric_indoor | metric_outdoor | depth_pro, declared by the perception
before any sample: Perception.depth_convention) it says the depth is in metres, larger = farther;
with instance embeddings (model.embeddings=true: the DINOv2 tool listed) it describes each
instance's "similar" in <dt_rep> and its "embedding" vector in code. Under the default (relative
depth, no embeddings) the prompt is word for word what it was.
"""
from __future__ import annotations

import hashlib

from rvt_bench.core.types import Sample

PROMPT_VERSION = 1

_TAG_FORMAT = """You answer questions about an image or a video by planning vision tools, reading a digital twin of the scene and running Python on it.
Write exactly this, in one reply:
1. <think>your reasoning about the query</think>
2. <dt_plan>a JSON DAG {"Tool": ["dependency", ...], ...} of the tools you need</dt_plan>
   Then stop: the system runs the tools and inserts <dt_rep>the twin as JSON</dt_rep>.
{twin}
3. Optionally, up to {max_rounds} times: <think>...</think> <execute>Python code</execute>
   Then stop: the system runs the code and inserts <results>its printed output</results>.
   The code sees `twin` (the full twin as a dict), `masks` (dict id -> (T, H, W) bool array), `np`, `cv2`, `math`, `json`. Print what you need.
4. <task>segmentation|grounding|vqa|summarization</task> <answer>...</answer>
   segmentation: {"instances": [ids of the twin instances that answer the query]}
   grounding: {"boxes": {"<frame index>": [[x1, y1, x2, y2], ...]}} normalized to [0, 1]
   vqa or summarization: the answer as text.

Tools (a tool must list what it requires as its dependencies):
{tools}"""

# What <dt_rep> holds, per twin style (rvt_bench.adapters.twin.schema.Twin.to_llm_json).
_TWIN_FULL = """   The twin has "video" (summary, size [H, W], fps, num_frames), "frames" (index, timestamp, caption)
   and "instances" (id, label, score, "track" {frame index: [x1, y1, x2, y2, cx, cy, area]} in pixels,
   depth mean/std (unit and convention stated in the twin), trajectory, caption). null = the tool was not planned."""
_TWIN_COMPACT = """   The twin has "video" (size [H, W], num_frames) and "instances" (id, label, "box" {frame index: [x1, y1, x2, y2]}
   normalized to [0, 1] at the frames where it changes, depth mean, "move" [dx, dy] normalized, caption).
   A field is absent when its tool was not planned. Code sees the full twin ("track" in pixels, below)."""
# The worked example's twin in each style (the same three instances).
_REP_FULL = """{"video":{"size":[480,854],"num_frames":3},"instances":[{"id":1,"label":"puppy front-left paw","track":{"0":[300,380,340,420,320,400,1500],"1":[300,340,340,380,320,360,1480],"2":[300,339,340,379,320,359,1490]},"depth":{"mean":1.2,"std":0.1}},{"id":2,"label":"puppy front-right paw","track":{"0":[360,380,400,420,380,400,1510],"1":[360,377,400,417,380,397,1500],"2":[360,376,400,416,380,396,1505]},"depth":{"mean":1.2,"std":0.1}},{"id":3,"label":"blanket","track":{"0":[0,300,854,480,427,390,150000]},"depth":{"mean":1.4,"std":0.3}}]}"""
_REP_COMPACT = """{"video":{"size":[480,854],"num_frames":3},"instances":[{"id":1,"label":"puppy front-left paw","box":{"0":[0.35,0.79,0.4,0.88],"1":[0.35,0.71,0.4,0.79],"2":[0.35,0.71,0.4,0.79]},"depth":1.2},{"id":2,"label":"puppy front-right paw","box":{"0":[0.42,0.79,0.47,0.88],"1":[0.42,0.79,0.47,0.87],"2":[0.42,0.78,0.47,0.87]},"depth":1.2},{"id":3,"label":"blanket","box":{"0":[0,0.62,1,1]},"depth":1.4}]}"""

# The worked example's plan and code: a policy that writes either back (rvt_bench.adapters.dtr1.funnel
# copied_example) copies the prompt instead of planning for its own query.
EXAMPLE_PLAN = '''{"SAM2": [], "DepthAnything2": [], "DepthStats": ["SAM2", "DepthAnything2"], "SemanticAnalysis": ["SAM2"]}'''
EXAMPLE_CODE = '''for inst in twin["instances"][:2]:
    cy = [v[5] for v in inst["track"].values()]
    print(inst["id"], max(cy) - min(cy))'''
_EXAMPLE = """Example.
Query: segment the part of the puppy that it lifts into the air while standing on the checkered blanket, before standing still and barking.
<think>Temporal order: standing, then lifting a limb, then barking. I need the puppy's parts tracked over frames, their depth and their labels, then the part whose height changes most before the barking.</think>
<dt_plan>{plan}</dt_plan>
<dt_rep>{rep}</dt_rep>
<think>Measure how far each paw rises (centroid y, index 5 of a track entry, decreases) across frames.</think>
<execute>{code}</execute>
<results>1 41
2 4</results>
<think>Instance 1, the front-left paw, rises most before the barking.</think>
<task>segmentation</task> <answer>{"instances": [1]}</answer>"""


def system_prompt(tools: str, max_rounds: int, twin_style: str = "full", depth: tuple[str, str] | None = None,
                  embeddings: bool = False) -> str:
    """The system message: tag format, tool list `tools` (one line per tool) and the worked example,
    with the twin described and shown in `twin_style` ("full": the DT-R1 paper's twin, "compact":
    rvt_bench.adapters.twin.schema.Twin.to_llm_compact). `depth`: the (unit, convention) the twins
    will state (Perception.depth_convention); metric depth is named in the twin's description, None
    or relative depth leave it as it was. `embeddings`: the twin's "similar" and "embedding" fields
    are described (the caller lists the DINOv2 tool in `tools`). Raises ValueError for another style."""
    if twin_style not in _TWINS:
        raise ValueError(f"unknown twin style {twin_style!r}; expected one of {sorted(_TWINS)}")
    twin, rep = _TWINS[twin_style]
    twin = _with_depth(twin, twin_style, depth)
    if embeddings:
        twin = twin.replace(*_SIMILAR[twin_style])
    text = _TAG_FORMAT.replace("{twin}", twin).replace("{tools}", tools).replace("{max_rounds}", str(max_rounds))
    if embeddings:
        text = text.replace(*_EMBEDDING_CODE)
    example = _EXAMPLE.replace("{plan}", EXAMPLE_PLAN).replace("{code}", EXAMPLE_CODE).replace("{rep}", rep)
    return text + "\n\n" + example


_TWINS = {"full": (_TWIN_FULL, _REP_FULL), "compact": (_TWIN_COMPACT, _REP_COMPACT)}
# What each style's description says of depth, and what it says instead when the depth is metric.
_DEPTH = {"full": ("depth mean/std (unit and convention stated in the twin)", "depth mean/std ({unit}, {convention})"),
          "compact": ("depth mean,", "depth mean ({unit}, {convention}),")}
_UNIT_WORDS = {"m": "metres"}
# The instance fields the DINOv2 tool adds (rvt_bench.adapters.twin.schema: `similar` in <dt_rep>,
# `embedding` in the code payload), inserted after each style's last instance field.
_SIMILAR = {"full": ("trajectory, caption).", 'trajectory, caption, "similar" {other id: cosine similarity of the '
                     "two instances' DINOv2 embeddings, 1 = alike})."),
            "compact": ("caption).", 'caption, "similar" {other id: cosine similarity of the two instances\' '
                        "DINOv2 embeddings, 1 = alike}).")}
_EMBEDDING_CODE = ("`json`. Print what you need.", "`json`; twin[\"instances\"][k][\"embedding\"] is the k-th "
                   "instance's DINOv2 embedding (a unit vector, when DINOv2 ran). Print what you need.")


def _with_depth(twin: str, twin_style: str, depth: tuple[str, str] | None) -> str:
    """The twin description with metric depth's unit and direction named; unchanged for None or
    relative depth (the twin states its depth_unit either way)."""
    if depth is None or depth[0] == "relative":
        return twin
    unit, convention = depth
    old, new = _DEPTH[twin_style]
    return twin.replace(old, new.format(unit=_UNIT_WORDS.get(unit, unit), convention=convention))


def depth_of(perception: object) -> tuple[str, str] | None:
    """`perception`'s declared depth (unit, convention) (Perception.depth_convention), None when it
    declares none."""
    declared = getattr(perception, "depth_convention", None)
    return None if declared is None else declared()


def user_message(sample: Sample, task_hint: bool = False) -> str:
    """The user message for `sample`: its modality, frame count and query; with `task_hint` also
    the sample's task ("Task: <task>.", the line every run before the paper's protocol had)."""
    what = "an image" if sample.modality == "image" else f"a video of {sample.num_frames} frames"
    task = f"Task: {sample.task}.\n" if task_hint else ""
    return f"Input: {what}.\n{task}Query: {sample.query}"


def messages(sample: Sample, tools: str, max_rounds: int, twin_style: str = "full", task_hint: bool = False,
             depth: tuple[str, str] | None = None, embeddings: bool = False) -> list[dict]:
    """The chat messages of a rollout: [system, user]; the rollout is the assistant's turn. The
    system message is the same for every sample (and for either `task_hint`), so a backend with a
    prompt cache (llama.cpp) evaluates it once per run. `depth`, `embeddings`: system_prompt's."""
    return [
        {"role": "system", "content": system_prompt(tools, max_rounds, twin_style, depth, embeddings)},
        {"role": "user", "content": user_message(sample, task_hint)},
    ]


def prompt_digest(tools: str, max_rounds: int, twin_style: str = "full", depth: tuple[str, str] | None = None,
                  embeddings: bool = False) -> str:
    """Short sha256 of the system prompt, for the adapter fingerprint (a prompt change is a new run)."""
    return hashlib.sha256(system_prompt(tools, max_rounds, twin_style, depth, embeddings).encode()).hexdigest()[:12]
