"""Run SAM 3 Agent's own loop on scripted MLLM replies, for tests/data/sam3_agent/loop_cases.json.

The repository's code is read from a copy OUTSIDE this repository and run unchanged:
SAM3_DIR = facebookresearch/sam3 at 99d02f28c8d34610ab35559b72642b01f10fdb1e
(`git -C <mirror> archive 99d02f2 sam3/agent | tar -x -C /tmp/sam3-99d02f2`, the mirror's objects
lack some assets, so archive that folder only). From sam3/agent/agent_core.py the function
definitions (count_images, _prune_messages_for_next_round, save_debug_messages,
cleanup_debug_files, agent_inference) are executed with the modules they import (copy, json, os,
cv2, PIL.Image); its relative imports are replaced: send_generate_request and call_sam_service are
the stubs below, passed as agent_inference's arguments as the repository's notebook passes its own,
and viz.visualize draws a blank picture (the pictures are not compared; their file names are).
From client_sam3.py, call_sam_service runs unchanged with sam3_inference replaced by random
detections and remove_overlapping_masks (helpers/mask_overlap_removal.py) run unchanged: its kept
order is recorded for the postprocess cases.

Each loop case: a query, the main conversation's replies, examine_each_mask's checking replies, and
how many masks SAM 3 finds per text_prompt (masks named "rle-<prompt>-<k>"). Recorded: every request
the loop sent (system prompts as "<system:agent>" / "<system:checking>", images by what they show:
"raw", "masks <prompt>", "mask k", "zoom k", "kept a-b"), and the outcome (the final masks' names, or
the exception's type). Hand-written cases cover each branch; random ones come from a fixed seed.

usage: PYTHONHASHSEED=0 python run_agent_loop.py SAM3_DIR
"""
import ast
import copy
import hashlib
import json
import os
import random
import re
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

OUT = Path(__file__).resolve().parent.parent / "loop_cases.json"


def functions(path, names, ns):
    tree = ast.parse(Path(path).read_text())
    nodes = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    exec(compile(ast.Module(nodes, []), str(path), "exec"), ns)
    return ns


def T(call):
    return f"<think>reasoning</think>\n<tool>{json.dumps(call)}</tool>"


def seg(p):
    return T({"name": "segment_phrase", "parameters": {"text_prompt": p}})


def sel(m):
    return T({"name": "select_masks_and_return", "parameters": {"final_answer_masks": m}})


EXAMINE = T({"name": "examine_each_mask", "parameters": {}})
NO_MASK = T({"name": "report_no_mask", "parameters": {}})
ACCEPT, REJECT = "<think>ok</think>\n<verdict>Accept</verdict>", "<think>no</think>\n<verdict>Reject</verdict>"


def hand_cases():
    return [
        ("select one of three", [seg("dog"), sel([2])], [], {"dog": 3}),
        ("report no mask first", [NO_MASK], [], {}),
        ("no masks then another phrase", [seg("unicorn"), seg("horse"), sel([1, 2])], [], {"horse": 2}),
        ("duplicate phrase refused", [seg("cup"), seg("cup"), seg("mug"), sel([1])], [], {"cup": 2, "mug": 1}),
        ("three phrases, warning lists two", [seg("a"), seg("b"), seg("c"), sel([1])], [], {"c": 1}),
        ("examine keeps two", [seg("person"), EXAMINE, sel([1, 2])], [ACCEPT, REJECT, ACCEPT], {"person": 3}),
        ("examine rejects all", [seg("tree"), EXAMINE, seg("plant"), sel([1])], [REJECT, REJECT], {"tree": 2, "plant": 1}),
        ("examine after no masks", [seg("x"), EXAMINE], [], {}),
        ("examine twice", [seg("car"), EXAMINE, EXAMINE, sel([1])], [ACCEPT, ACCEPT, ACCEPT, REJECT], {"car": 2}),
        ("examine three times", [seg("car"), EXAMINE, EXAMINE, EXAMINE, sel([1])], [ACCEPT] * 6, {"car": 2}),
        ("examine reply mentions segment_phrase",
         [seg("cat"), "I will not call segment_phrase again.\n<tool>{\"name\": \"examine_each_mask\", \"parameters\": {}}</tool>",
          sel([1])], [ACCEPT, ACCEPT], {"cat": 2}),
        ("verdict with both words", [seg("cat"), EXAMINE], ["<verdict>Accept or Reject</verdict>"], {"cat": 1}),
        ("verdict missing", [seg("cat"), EXAMINE], ["I think it is fine."], {"cat": 1}),
        ("verdict lowercase", [seg("cat"), EXAMINE], ["<verdict>accept</verdict>"], {"cat": 1}),
        ("select first", [sel([1])], [], {}),
        ("examine first", [EXAMINE], [], {}),
        ("invalid json", ["<tool>{name: segment_phrase}</tool>"], [], {}),
        ("no tool tag, bare json", ['{"name": "report_no_mask", "parameters": {}}'], [], {}),
        ("no tool tag, prose", ["I cannot see anything."], [], {}),
        ("two tool calls in one reply", [seg("dog") + "\n" + NO_MASK, sel([1])], [], {"dog": 1}),
        ("extra closing braces", ['<tool>{"name": "segment_phrase", "parameters": {"text_prompt": "dog"}}}</tool>', sel([1])], [], {"dog": 1}),
        ("unclosed tool tag", ['<tool>{"name": "report_no_mask", "parameters": {}}'], [], {}),
        ("unknown tool", [seg("dog"), T({"name": "zoom_in", "parameters": {}})], [], {"dog": 1}),
        ("no name", [T({"parameters": {"text_prompt": "dog"}})], [], {}),
        ("a list, not a call", ["<tool>[1, 2]</tool>"], [], {}),
        ("extra parameter", [T({"name": "segment_phrase", "parameters": {"text_prompt": "dog", "k": 1}})], [], {}),
        ("no parameters", [T({"name": "segment_phrase"})], [], {}),
        ("number as phrase", [T({"name": "segment_phrase", "parameters": {"text_prompt": 5}})], [], {}),
        ("list as phrase", [T({"name": "segment_phrase", "parameters": {"text_prompt": ["dog"]}})], [], {}),
        ("select out of range and duplicates", [seg("dog"), sel([3, 1, 1, 0, -1, 7])], [], {"dog": 3}),
        ("select empty", [seg("dog"), sel([])], [], {"dog": 2}),
        ("select booleans", [seg("dog"), sel([True, 2])], [], {"dog": 2}),
        ("select floats", [seg("dog"), sel([1.0])], [], {"dog": 2}),
        ("select a string", [seg("dog"), sel("12")], [], {"dog": 2}),
        ("select a number", [seg("dog"), sel(1)], [], {"dog": 2}),
        ("select nested lists", [seg("dog"), sel([[1]])], [], {"dog": 2}),
        ("select after no masks", [seg("dog"), sel([1])], [], {}),
        ("select after examine", [seg("dog"), EXAMINE, sel([2])], [REJECT, ACCEPT, ACCEPT], {"dog": 3}),
        ("report after masks", [seg("dog"), NO_MASK], [], {"dog": 2}),
        ("replies run out", [seg("dog")], [], {"dog": 1}),
        ("checking replies run out", [seg("dog"), EXAMINE], [ACCEPT], {"dog": 2}),
        ("quote in the query", [seg("dog's toy"), sel([1])], [], {"dog's toy": 1}),
        ("101 rounds then select", [seg(f"p{i}") for i in range(101)] + [sel([1])], [], {"p100": 1}),
        ("102 rounds", [seg(f"p{i}") for i in range(103)], [], {}),
    ]


def random_cases(n, seed=0):
    rng = random.Random(seed)
    phrases = ["dog", "cat", "cup", "person", "car", "tree"]
    out = []
    for k in range(n):
        sam = {p: rng.choice([0, 1, 2, 3, 4]) for p in phrases}
        replies, checks = [], []
        for _ in range(rng.randint(1, 7)):
            r = rng.random()
            if r < 0.45:
                replies.append(seg(rng.choice(phrases)))
            elif r < 0.65:
                replies.append(EXAMINE)
                checks += [rng.choice([ACCEPT, REJECT]) for _ in range(4)]
            elif r < 0.85:
                replies.append(sel(rng.sample(range(0, 5), rng.randint(0, 3))))
            elif r < 0.93:
                replies.append(NO_MASK)
            else:
                replies.append(rng.choice(["<tool>{oops</tool>", "<think>x</think>", T({"name": "segment_phrase"})]))
        out.append((f"random {k}", replies, checks, sam))
    return out


def run_case(ns, name, replies, checks, sam, tmp, system_prompts):
    img_path = os.path.join(tmp, "raw.png")
    Image.new("RGB", (8, 6), (120, 30, 30)).save(img_path)
    out_dir = os.path.join(tmp, name.replace(" ", "_").replace("'", ""))
    replies, checks = list(replies), list(checks)
    requests = []
    segments = {}

    def label(path):
        if path == img_path:
            return "raw"
        for pattern, fmt in ((r"_zoom_in_mask_(\d+)\.png$", "zoom {}"), (r"_selected_mask_(\d+)\.png$", "mask {}"),
                             (r"_selected_masks_([\d-]*)\.png$", "kept {}")):
            m = re.search(pattern, path)
            if m:
                return fmt.format(m.group(1))
        return f"masks {segments[path]}"

    def normal(messages):
        out = copy.deepcopy(messages)
        for m in out:
            if m["role"] == "system":
                m["content"] = {system_prompts["agent"]: "<system:agent>", system_prompts["checking"]: "<system:checking>"}[m["content"]]
            elif isinstance(m["content"], list):
                for c in m["content"]:
                    if c.get("type") == "image":
                        c["image"] = label(c["image"])
        return out

    def send_generate_request(messages):
        requests.append(normal(messages))
        pool = checks if messages[0]["content"] == system_prompts["checking"] else replies
        return pool.pop(0) if pool else None

    def call_sam_service(image_path, text_prompt, output_folder_path):
        if not isinstance(text_prompt, str):  # SAM 3 fails inside call_sam_service's try: no outputs file
            return os.path.join(output_folder_path, "missing.json")
        n = sam.get(text_prompt, 0)
        k = len(segments)
        png = os.path.join(output_folder_path, f"seg{k}.png")
        segments[png] = text_prompt
        path = os.path.join(output_folder_path, f"seg{k}.json")
        json.dump({"original_image_path": image_path, "output_image_path": png, "orig_img_h": 6, "orig_img_w": 8,
                   "pred_boxes": [[0.1, 0.1, 0.2, 0.2]] * n, "pred_scores": [0.9 - 0.1 * j for j in range(n)],
                   "pred_masks": [f"rle-{text_prompt}-{j}" for j in range(n)]}, open(path, "w"))
        return path

    try:
        _, final, _ = ns["agent_inference"](img_path, "the query", send_generate_request=send_generate_request,
                                            call_sam_service=call_sam_service, output_dir=out_dir)
        outcome = {"final": final["pred_masks"]}
    except Exception as exc:  # noqa: BLE001 (every raise of the loop is an outcome)
        outcome = {"error": type(exc).__name__}
    return {"name": name, "query": "the query", "replies": replies_all[name], "checks": checks_all[name], "sam": sam,
            "requests": requests, "outcome": outcome}


replies_all, checks_all = {}, {}


def postprocess_cases(agent_dir, n=30, seed=0):
    """client_sam3.call_sam_service on random detections: the kept masks, in the order it returns them."""
    import torch
    from pycocotools import mask as mask_utils

    ns = {"np": np, "torch": torch, "mask_utils": mask_utils, "Dict": dict, "List": list}
    functions(agent_dir / "helpers" / "mask_overlap_removal.py",
              {"mask_intersection", "mask_iom", "_decode_single_mask", "_decode_masks_to_torch_bool", "remove_overlapping_masks"}, ns)
    rng = np.random.default_rng(seed)
    cases = []
    for k in range(n):
        h, w, count = 12, 16, int(rng.integers(0, 6))
        boxes = []
        for _ in range(count):
            y0, x0 = int(rng.integers(0, h)), int(rng.integers(0, w))
            boxes.append([y0, min(h, y0 + int(rng.integers(0, 7))), x0, min(w, x0 + int(rng.integers(0, 9)))])
        scores = [float(v) for v in rng.choice([0.55, 0.6, 0.7, 0.8, 0.9], count)]
        masks = np.zeros((count, h, w), bool)
        for i, (y0, y1, x0, x1) in enumerate(boxes):
            masks[i, y0:y1, x0:x1] = True
        rles = [mask_utils.encode(np.asfortranarray(m.astype(np.uint8)))["counts"].decode() for m in masks]
        sample = {"orig_img_h": h, "orig_img_w": w, "pred_boxes": [[i, 0, 0, 0] for i in range(count)],
                  "pred_masks": rles, "pred_scores": scores}
        out = ns["remove_overlapping_masks"](sample)
        # call_sam_service steps 2-3, as written there (sort by score, drop counts of <= 4 characters)
        order = sorted(range(len(out["pred_scores"])), key=lambda i: out["pred_scores"][i], reverse=True)
        kept = [int(out["pred_boxes"][i][0]) for i in order if len(out["pred_masks"][i]) > 4]
        cases.append({"boxes": boxes, "scores": scores, "shape": [h, w], "kept": kept})
    return cases


def main(sam3_dir):
    agent_dir = Path(sam3_dir) / "sam3" / "agent"
    system_prompts = {key: (agent_dir / "system_prompts" / name).read_text().strip()
                      for key, name in (("agent", "system_prompt.txt"), ("checking", "system_prompt_iterative_checking.txt"))}
    src = (agent_dir / "client_sam3.py").read_text()
    assert "if len(rle) > 4:" in src and "reverse=True" in src  # the steps postprocess_cases replays
    ns = {"copy": copy, "json": json, "os": os, "cv2": cv2, "Image": Image, "__file__": str(agent_dir / "agent_core.py"),
          "send_generate_request": None, "call_sam_service": None,
          "visualize": lambda outputs, zoom_in_index=None: (Image.new("RGB", (2, 2)) if zoom_in_index is None
                                                            else (Image.new("RGB", (2, 2)), Image.new("RGB", (2, 2))))}
    functions(agent_dir / "agent_core.py", {"save_debug_messages", "cleanup_debug_files", "count_images",
                                             "_prune_messages_for_next_round", "agent_inference"}, ns)
    cases = hand_cases() + random_cases(40)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        import contextlib
        import io

        for name, replies, checks, sam in cases:
            replies_all[name], checks_all[name] = list(replies), list(checks)
            with contextlib.redirect_stdout(io.StringIO()):
                out.append(run_case(ns, name, replies, checks, sam, tmp, system_prompts))
    OUT.write_text(json.dumps({
        "source": "facebookresearch/sam3 99d02f28c8d34610ab35559b72642b01f10fdb1e sam3/agent/agent_core.py agent_inference, "
                  "client_sam3.py call_sam_service steps, helpers/mask_overlap_removal.py (tests/data/sam3_agent/reference/run_agent_loop.py)",
        "system_prompts_sha256": {k: hashlib.sha256(v.encode()).hexdigest() for k, v in system_prompts.items()},
        "cases": out, "postprocess": postprocess_cases(agent_dir)}, indent=1) + "\n")
    print(OUT, len(out), "loop cases")


if __name__ == "__main__":
    main(sys.argv[1])
