"""JiT's digital twin as a per-frame scene graph over a sliding window (arXiv 2503.21056, sec. 3.3),
built from the shared twin (rvt_bench.adapters.twin.schema.Twin) after the planned specialists ran.

Objects (one per twin instance): id, label, score, visible frames, depth mean (with the depth tool's
unit and convention), caption, and ``similar_to`` (ids whose DINOv2 features have cosine >=
``similarity``, when DINOv2 ran). Per frame t, a node per object visible at t with
- spatial attributes: bbox [x1, y1, x2, y2], centroid [x, y], area (pixels, origin top-left);
- temporal attributes over the window [t - w + 1, t] (w = ``window``, the paper's default 6):
  velocity [dx, dy] in px per frame (centroid change from the first frame of the window where the
  object is visible to t, divided by the frames between) and ``in_window`` (frames it is visible);
and directed edges between nodes of frame t:
- "left-of" (a's centroid x < b's), "above" (a's centroid y < b's): one direction per pair;
- "behind" (a farther than b by the instance depth means; needs DepthStats);
- "moving-towards" (over the window, a moved at least ``min_motion`` px with a positive component
  towards b's position at the window start, and their distance shrank by at least min_motion px).
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from rvt_bench.adapters.twin.schema import Twin

GRAPH_VERSION = 1


def build_graph(twin: Twin, window: int = 6, min_motion: float = 2.0, similarity: float = 0.8) -> dict:
    """The scene graph of ``twin`` as a JSON-ready dict: {"version", "window", "size" [H, W],
    "num_frames", "depth_unit", "objects": [...], "frames": [{"t", "nodes", "edges"}]} (see module
    docstring). Raises ValueError on window < 1."""
    if window < 1:
        raise ValueError(f"scene graph window must be >= 1, got {window}")
    features = twin.artifacts.get("dinov2") or {}
    objects = []
    for inst in twin.instances:
        seen = sorted(inst.frames)
        obj: dict[str, Any] = {"id": inst.id, "label": inst.label, "score": _round(inst.score, 3),
                               "frames": [seen[0], seen[-1], len(seen)] if seen else None,
                               "depth": None if inst.depth is None else _round(inst.depth.mean, 3),
                               "caption": inst.caption}
        if features:
            obj["similar_to"] = [other.id for other in twin.instances if other.id != inst.id
                                 and other.id in features and inst.id in features
                                 and float(np.dot(features[inst.id], features[other.id])) >= similarity]
        objects.append(obj)
    farther = _farther(twin)
    frames = []
    for t in range(twin.num_frames):
        nodes = []
        for inst in twin.instances:
            fr = inst.frames.get(t)
            if fr is None:
                continue
            start = next(s for s in range(max(0, t - window + 1), t + 1) if s in inst.frames)
            c0 = inst.frames[start].centroid
            steps = max(1, t - start)
            nodes.append({"id": inst.id, "bbox": [_round(v) for v in fr.bbox], "centroid": [_round(v) for v in fr.centroid],
                          "area": int(fr.area),
                          "velocity": [_round((fr.centroid[0] - c0[0]) / steps, 2), _round((fr.centroid[1] - c0[1]) / steps, 2)],
                          "in_window": sum(1 for s in range(max(0, t - window + 1), t + 1) if s in inst.frames),
                          "_start": start})
        frames.append({"t": t, "nodes": nodes, "edges": _edges(twin, nodes, farther, min_motion)})
        for node in nodes:
            node.pop("_start")
    depth_unit = next((f"{i.depth.unit}, {i.depth.convention}" for i in twin.instances if i.depth is not None), None)
    return {"version": GRAPH_VERSION, "window": window, "size": list(twin.size), "num_frames": twin.num_frames,
            "depth_unit": depth_unit, "objects": objects, "frames": frames}


def to_text(graph: dict, max_chars: int = 6000) -> str:
    """The graph as lines of text for the LLM: the objects, then the last frame of every window of
    ``window`` frames (and the video's last frame) with its nodes and edges. When that exceeds
    ``max_chars`` the stride between shown frames doubles until it fits (the objects are always
    shown, so a graph of many objects can stay longer than max_chars)."""
    head = [f"scene graph: {graph['num_frames']} frames, size [H, W] = {graph['size']}, window {graph['window']}, "
            f"pixels origin top-left; depth: {graph['depth_unit'] or 'not measured'}", "objects:"]
    head += ["  " + json.dumps(o, separators=(",", ":")) for o in graph["objects"]]
    stride = max(1, int(graph["window"]))
    lines: list[str] = []
    while True:
        shown = list(range(stride - 1, graph["num_frames"], stride))
        if not shown or shown[-1] != graph["num_frames"] - 1:
            shown.append(graph["num_frames"] - 1)
        lines = []
        for t in shown:
            fr = graph["frames"][t]
            nodes = "; ".join(f"{n['id']} bbox {n['bbox']} velocity {n['velocity']}" for n in fr["nodes"])
            edges = "; ".join(f"{a} {rel} {b}" for a, rel, b in fr["edges"])
            lines.append(f"frame {t}: nodes: {nodes or 'none'} | edges: {edges or 'none'}")
        text = "\n".join(head + lines)
        if len(text) <= max_chars or stride >= graph["num_frames"]:
            return text
        stride *= 2


def _edges(twin: Twin, nodes: list[dict], farther: Any, min_motion: float) -> list[list]:
    edges: list[list] = []
    for a in nodes:
        for b in nodes:
            if a["id"] == b["id"]:
                continue
            (ax, ay), (bx, by) = a["centroid"], b["centroid"]
            if ax < bx:
                edges.append([a["id"], "left-of", b["id"]])
            if ay < by:
                edges.append([a["id"], "above", b["id"]])
            if farther is not None and farther(a["id"], b["id"]):
                edges.append([a["id"], "behind", b["id"]])
            if _moving_towards(twin, a, b, min_motion):
                edges.append([a["id"], "moving-towards", b["id"]])
    return edges


def _moving_towards(twin: Twin, a: dict, b: dict, min_motion: float) -> bool:
    inst_a, inst_b = twin.instance(a["id"]), twin.instance(b["id"])
    start = a["_start"]
    if start not in inst_b.frames:
        return False
    a0, b0 = inst_a.frames[start].centroid, inst_b.frames[start].centroid
    move = (a["centroid"][0] - a0[0], a["centroid"][1] - a0[1])
    if math.hypot(*move) < min_motion:
        return False
    towards = move[0] * (b0[0] - a0[0]) + move[1] * (b0[1] - a0[1]) > 0
    before = math.dist(a0, b0)
    after = math.dist(a["centroid"], b["centroid"])
    return towards and before - after >= min_motion


def _farther(twin: Twin):
    """(a_id, b_id) -> whether a is farther from the camera than b, by instance depth means and the
    depth tool's convention; None when no instance has depth."""
    depth = {i.id: i.depth for i in twin.instances if i.depth is not None}
    if not depth:
        return None
    nearer_is_larger = "nearer" in next(iter(depth.values())).convention

    def farther(a: int, b: int) -> bool:
        if a not in depth or b not in depth:
            return False
        return depth[a].mean < depth[b].mean if nearer_is_larger else depth[a].mean > depth[b].mean

    return farther


def _round(v: float | None, digits: int = 1) -> float | int | None:
    if v is None:
        return None
    r = round(float(v), digits)
    return int(r) if r.is_integer() else r
