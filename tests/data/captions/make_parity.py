"""Run pycocoevalcap 1.2 directly (no rvt-bench code) and print inputs + outputs as JSON."""
import json, subprocess, sys, platform
from importlib.metadata import version
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.rouge.rouge import Rouge
from pycocoevalcap.cider.cider import Cider

predictions = [
    ["v1", "A man is riding a red bicycle down the street."],
    ["v2", "Two dogs play with a ball in the park"],
    ["v3", "a woman cuts vegetables in a kitchen"],
    ["v4", "The puppy lifts its front-left paw, then barks."],
    ["v5", "cars drive on a highway at night"],
    ["v6", "A child is swimming in a pool."],
    ["v7", "people are walking"],
    ["v8", "A cat sleeps on the sofa, next to a blue pillow!"],
]
references = {
    "v1": ["A man rides a red bike along the road.", "Someone is cycling down a city street on a red bicycle.", "a man riding his bicycle"],
    "v2": ["Two dogs are playing with a ball on the grass.", "Dogs chase a ball in a park."],
    "v3": ["A woman is chopping vegetables in the kitchen.", "Someone slices carrots on a cutting board.", "a lady cutting vegetables", "A cook prepares food."],
    "v4": ["The puppy raises its front left paw and then starts barking.", "A small dog lifts a paw while standing on a checkered blanket, then barks."],
    "v5": ["Cars are driving along a highway at night.", "Traffic moves on a freeway in the dark."],
    "v6": ["A kid swims in the swimming pool.", "A young child is swimming underwater in a pool.", "a child swimming"],
    "v7": ["A crowd of people walk through a busy square.", "Pedestrians are walking on a sidewalk."],
    "v8": ["A cat is sleeping on a couch beside a blue cushion.", "A grey cat naps on the sofa.", "the cat sleeps next to a pillow"],
}
res = {k: [{"caption": v}] for k, v in predictions}
gts = {k: [{"caption": c} for c in references[k]] for k, _ in predictions}
tok = PTBTokenizer()
gts_t, res_t = tok.tokenize(gts), tok.tokenize(res)
out = {"corpus": {}, "per_sample": {k: {} for k, _ in predictions}}
ids = list(gts_t.keys())
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()):  # Bleu prints its counts
    b, bs = Bleu(4).compute_score(gts_t, res_t)
for n in range(4):
    out["corpus"][f"Bleu_{n+1}"] = b[n]
    for k, s in zip(ids, bs[n]):
        out["per_sample"][k][f"Bleu_{n+1}"] = s
for name, scorer in (("METEOR", Meteor()), ("ROUGE_L", Rouge()), ("CIDEr", Cider())):
    s, ss = scorer.compute_score(gts_t, res_t)
    out["corpus"][name] = float(s)
    for k, v in zip(ids, ss):
        out["per_sample"][k][name] = float(v)
java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
print(json.dumps({
    "source": "pycocoevalcap run directly by /tmp/h5parity/make_parity.py (PTBTokenizer, then Bleu(4), Meteor, Rouge, Cider .compute_score on the tokenized dicts)",
    "versions": {"pycocoevalcap": version("pycocoevalcap"), "java": java, "python": platform.python_version()},
    "inputs": {"predictions": predictions, "references": references},
    "tokenized": {"predictions": {k: v[0] for k, v in res_t.items()}, "references": gts_t},
    "outputs": out,
}, indent=1))
