"""Run the authors' reply parsing on a fuzzed set of replies, for tests/data/segzero/parsers.json.

The authors' functions are read by name from copies OUTSIDE this repository and run unchanged
(their modules import transformers, sam2, qwen_vl_utils at the top, so only the function
definitions are executed, with `re`, `json` and `numpy` as their modules import them):
- SEGZERO_DIR: dvlab-research/Seg-Zero at 42a33455283ba041a3099cf154a708116f300cec
  (`git -C <mirror> archive 42a3345 evaluation_scripts | tar -x -C /tmp/segzero-42a3345`):
  evaluation_scripts/evaluation.py ``extract_bbox_points_think`` (Seg-Zero) and
  evaluation_scripts/evaluation_visionreasoner.py ``extract_bbox_points_think`` (VisionReasoner's
  published ReasonSeg number);
- VISIONREASONER_DIR: dvlab-research/VisionReasoner at a455092 (vision_reasoner/models/
  vision_reasoner_model.py ``VisionReasonerModel.extract_bbox_points_think``, called with self=None).
Around each, the per-sample block of its script: the call inside ``try``, anything raised is their
"Reasoning error" (the sample scores 0): recorded as {"failed": true}. Else the returned boxes,
points and thought. The model file's function catches its own errors: never failed.

Replies: hand-written edge cases (the prompts' own examples, JSON variants, string numbers,
booleans, 3-value points, 5-value boxes, missing keys, think tags...) plus random ones from a fixed
seed; each read by all three functions at two frame sizes (x_factor = W / 840, y_factor = H / 840).

usage: python run_segzero_parsers.py SEGZERO_DIR VISIONREASONER_DIR
"""
import ast
import json
import random
import re
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "parsers.json"
SIZES = [(640, 480), (420, 1260)]  # W, H: factors 0.7619.. / 0.5714.., 0.5 / 1.5 (round-half cases)


def function(path, name, cls=None):
    tree = ast.parse(Path(path).read_text())
    body = tree.body
    if cls is not None:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
    node = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)
    ns = {"re": re, "json": json, "np": np}
    exec(compile(ast.Module([node], []), str(path), "exec"), ns)
    return ns[name]


def edge_cases():
    sz = [
        "<think>the mug</think><answer>{\"bbox\": [10,100,200,210], \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{'bbox': [10,100,200,210], 'points_1': [30,110], 'points_2': [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [\"10\",\"100\",\"200\",\"210\"], \"points_1\": [\"30\",\"110\"], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [10.7,100.2,200.9,210.5], \"points_1\": [30.5,110.5], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [true,false,200,210], \"points_1\": [true,110], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [10,100,200,210], \"points_1\": [30,110,1], \"points_2\": [35,180,0]}</answer>",
        "<think>x</think><answer>{\"bbox\": [10,100,200,210,5], \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [10,100,200], \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": \"1234\", \"points_1\": \"56\", \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [\"12.5\",100,200,210], \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [\" 12 \",\"1_0\",200,210], \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [null,100,200,210], \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [10,100,200,210], \"points_1\": [30,110]}</answer>",
        "<think>x</think><answer>{\"box\": [10,100,200,210], \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"BBox_2d\": [10,100,200,210], \"Points_a\": [30,110], \"my_points\": [35,180], \"points_3\": [1,1]}</answer>",
        "<answer>{\"bbox\": [10,100,200,210], \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
        "<think>a < b</think><answer>{\"bbox\": [10,100,200,210], \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
        "<think>{not json}</think><answer>{\"bbox\": [10,100,200,210], \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [10,100,200,210], \"points_1\": [30,110], \"points_2\": [35,180], \"extra\": {\"a\": 1}}</answer>",
        "<think>x</think><answer>{\"bbox\": [1e308,100,200,210], \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [Infinity,100,200,210], \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [NaN,100,200,210], \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [1000000000000000000000000000000,100,200,210], \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [-10,-100,200,210], \"points_1\": [-30,110], \"points_2\": [35,-180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [3,5,7,9], \"points_1\": [1,3], \"points_2\": [5,7]}</answer>",
        "<think>x</think><answer>{\"bbox\": [10,100,200,210], \"points_1\": [30,110], \"points_2\": [35,180],}</answer>",
        "no json at all <think>x</think>",
        "",
        "<think>x</think>{\"bbox\": [10,100,200,210], \"points_1\": [30,110], \"points_2\": [35,180]} and {\"bbox\": [1,2,3,4]}",
        "<think>x</think><answer>{\"bbox\": {\"a\":1,\"b\":2,\"c\":3,\"d\":4}, \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [10,100,200,210], \"points_1\": 30, \"points_2\": [35,180]}</answer>",
        "<think>x</think><answer>{\"bbox\": [[10],100,200,210], \"points_1\": [30,110], \"points_2\": [35,180]}</answer>",
    ]
    vr = [
        "<think>two</think><answer>[{\"bbox_2d\": [10,100,200,210], \"point_2d\": [30,110]}, {\"bbox_2d\": [225,296,706,786], \"point_2d\": [302,410]}]</answer>",
        "<think>x</think><answer>[]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [\"10\",100,200,210], \"point_2d\": [30,110]}]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [10,100,200,210], \"point_2d\": [\"30\",110]}]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [true,false,200,210], \"point_2d\": [true,110]}]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [10,100,200,210], \"point_2d\": [30,110,0.9]}]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [10,100,200,210,0.95], \"point_2d\": [30,110]}]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [10,100,200], \"point_2d\": [30,110]}]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [10,100,200,210], \"point_2d\": [30]}]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [10,100,200,210]}]</answer>",
        "<think>x</think><answer>[{\"point_2d\": [30,110]}]</answer>",
        "<think>x</think><answer>{\"bbox_2d\": [10,100,200,210], \"point_2d\": [30,110]}</answer>",
        "<think>x</think><answer>{}</answer>",
        "<think>x</think><answer>\"\"</answer>",
        "<think>x</think><answer>null</answer>",
        "<think>x</think><answer>3</answer>",
        "<think>x</think><answer>[{'bbox_2d': [10,100,200,210], 'point_2d': [30,110]}]</answer>",
        "<think>x</think><answer>```json\n[{\"bbox_2d\": [10,100,200,210], \"point_2d\": [30,110]}]\n```</answer>",
        "<think>x</think><answer>\n  [{\"bbox_2d\": [10,100,200,210], \"point_2d\": [30,110]}]  \n</answer>",
        "[{\"bbox_2d\": [10,100,200,210], \"point_2d\": [30,110]}]",
        "<answer>[{\"bbox_2d\": [10,100,200,210], \"point_2d\": [30,110]}]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [10.5,100.5,200.49,210.51], \"point_2d\": [30.5,110.5]}]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [1e308,100,200,210], \"point_2d\": [30,110]}]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [null,100,200,210], \"point_2d\": [30,110]}]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": \"1234\", \"point_2d\": [30,110]}]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [10,100,200,210], \"point_2d\": [30,110]}, \"junk\"]</answer>",
        "<think>x</think><answer>[[10,100,200,210]]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [10,100,200,210], \"point_2d\": [30,110]}]</answer><answer>[]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [-5,-5,900,900], \"point_2d\": [-1,1000]}]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [10,100,200,210], \"point_2d\": [30,110], \"label\": \"mug\"}]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [10,100,200,210], \"point_2d\": [30,110]},]</answer>",
        "<think>x</think><answer>[{\"bbox_2d\": [10,100,200,210], \"point_2d\": {\"x\": 30, \"y\": 110}}]</answer>",
    ]
    return sz + vr


POOL = [0, 1, 17, 839, -5, 100000, 12.5, 99.99, 0.5, 1.5, 2.5, -0.0, 1e308, "12", " 7 ", "12.5", "1_000", "abc", "",
        True, False, None, [1, 2], {"v": 1}, 10 ** 30, "9" * 40]


def coords(rng, n):
    k = n if rng.random() < 0.8 else rng.choice([n - 1, n + 1, n + 2])
    return [rng.choice(POOL) if rng.random() < 0.08 else rng.randint(0, 900) for _ in range(k)]


def dump(rng, obj):
    text = json.dumps(obj)
    r = rng.random()
    if r < 0.03:
        return text.replace('"', "'")  # a Python dict literal, as the Seg-Zero prompt's example
    if r < 0.05:
        return text[:-1] + ",}" if text.endswith("}") else text[:-1] + ",]"
    if r < 0.07:
        return text[: rng.randint(0, len(text))]  # truncated (max_new_tokens)
    return text


def think(rng):
    return rng.choice(["<think>looking</think>"] * 5 + ["", "<think>a<b</think>", "<think>\n multi\n line </think>",
                                                        "<think></think>", "<think>unclosed"])


def random_seg_zero(rng):
    obj = {}
    keys = [rng.choice(["bbox"] * 4 + ["bbox_2d", "BBox", "box"]), rng.choice(["points_1"] * 4 + ["Points_1", "point_1"]),
            rng.choice(["points_2"] * 4 + ["points_b", "p2"])]
    if rng.random() < 0.2:
        keys.append(rng.choice(["points_3", "bbox_extra", "label"]))
    if rng.random() < 0.2:
        rng.shuffle(keys)
    for key in keys:
        obj[key] = coords(rng, 4 if "bo" in key.lower() else 2) if rng.random() < 0.95 else rng.choice(POOL)
    body = dump(rng, obj)
    wrap = rng.choice(["<answer>{}</answer>", "<answer> {} </answer>", "{}", "Answer: {}"])
    return think(rng) + wrap.format(body)


def random_visionreasoner(rng):
    items = []
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        item = {}
        if rng.random() < 0.93:
            item["bbox_2d"] = coords(rng, 4)
        if rng.random() < 0.93:
            item["point_2d"] = coords(rng, 2)
        if rng.random() < 0.1:
            item["label"] = "thing"
        items.append(item)
    obj = items if rng.random() < 0.9 else (items[0] if items else {})
    body = dump(rng, obj)
    wrap = rng.choice(["<answer>{}</answer>", "<answer>\n{}\n</answer>", "<answer>{}", "{}"])
    return think(rng) + wrap.format(body)


def main(segzero_dir, visionreasoner_dir):
    scripts = Path(segzero_dir) / "evaluation_scripts"
    seg_zero = function(scripts / "evaluation.py", "extract_bbox_points_think")
    vr_script = function(scripts / "evaluation_visionreasoner.py", "extract_bbox_points_think")
    vr_model = function(Path(visionreasoner_dir) / "vision_reasoner/models/vision_reasoner_model.py",
                        "extract_bbox_points_think", cls="VisionReasonerModel")
    rng = random.Random(42)
    replies = edge_cases() + [random_seg_zero(rng) for _ in range(200)] + [random_visionreasoner(rng) for _ in range(200)]
    cases = []
    for reply in replies:
        for w, h in SIZES:
            fx, fy = w / 840, h / 840
            row = {"reply": reply, "width": w, "height": h}
            for name, call in (("seg_zero", lambda: seg_zero(reply, fx, fy)), ("visionreasoner", lambda: vr_script(reply, fx, fy)),
                               ("visionreasoner_model", lambda: vr_model(None, reply, fx, fy)[:3])):
                try:  # the script's per-sample block: anything raised is the "Reasoning error" penalty
                    boxes, points, thought = call()
                    row[name] = {"failed": False, "boxes": boxes, "points": points, "think": thought}
                except Exception as exc:  # noqa: BLE001  (their bare except)
                    row[name] = {"failed": True, "error": type(exc).__name__}
            cases.append(row)
    OUT.write_text(json.dumps({
        "source": {"seg_zero": "dvlab-research/Seg-Zero@42a33455283ba041a3099cf154a708116f300cec evaluation_scripts/evaluation.py extract_bbox_points_think",
                   "visionreasoner": "dvlab-research/Seg-Zero@42a33455283ba041a3099cf154a708116f300cec evaluation_scripts/evaluation_visionreasoner.py extract_bbox_points_think",
                   "visionreasoner_model": "dvlab-research/VisionReasoner@a455092 vision_reasoner/models/vision_reasoner_model.py VisionReasonerModel.extract_bbox_points_think"},
        "cases": cases}, sort_keys=True).replace(', {"height"', ',\n{"height"') + "\n")
    for name in ("seg_zero", "visionreasoner", "visionreasoner_model"):
        print(name, sum(not c[name]["failed"] for c in cases), "read,", sum(c[name]["failed"] for c in cases), "failed")
    print(len(replies), "replies,", len(cases), "cases")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
