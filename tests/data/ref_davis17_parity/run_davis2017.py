"""Score the ReferFormer-layout fixture (make_fixture_referformer.py) with davis2017-evaluation
itself, as ReferFormer's scripts/dist_test_davis.sh does: `evaluation_method.py --task
unsupervised` once per annotator folder anno_0..anno_3, then the four J, F, J&F averaged.

    python run_davis2017.py DAVIS2017_CHECKOUT WORK > expected_referformer.json

DAVIS2017_CHECKOUT: a checkout of github.com/davisvideochallenge/davis2017-evaluation (outside this
repository; nothing of it is committed here). WORK: an empty scratch directory. Prints JSON:
  printed[anno_k]: the global table evaluation_method.py printed (its CSV, 3 decimals);
  unrounded[anno_k]: DAVISEvaluation(...).evaluate in-process: "J-Mean", "F-Mean", "J&F-Mean"
    exactly as evaluation_method.py computes them, and "objects": ["<seq>_<i>", J-M, F-M] in its order;
  mean_of_annotators: {"J", "F", "J&F"}: the four annotators' J-Mean, F-Mean, J&F-Mean averaged.
"""
from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np


def main(checkout: str, work: str) -> dict:
    here = Path(__file__).resolve().parent
    spec = importlib.util.spec_from_file_location("make_fixture_referformer", here / "make_fixture_referformer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    root, pred = module.write_fixture(Path(work))
    sys.path.insert(0, str(Path(checkout).resolve()))
    from davis2017.evaluation import DAVISEvaluation  # the reference's own package

    commit = subprocess.run(["git", "-C", checkout, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    out: dict = {"_source": f"davisvideochallenge/davis2017-evaluation@{commit or 'unknown'}: evaluation_method.py --task "
                            "unsupervised --davis_path WORK/ref_davis/DAVIS --results_path WORK/pred/valid/anno_<k> "
                            "(tests/data/ref_davis17_parity/run_davis2017.py)",
                 "printed": {}, "unrounded": {}, "stdout": {}}
    for k in range(4):
        results = pred / "valid" / f"anno_{k}"
        res = DAVISEvaluation(davis_root=str(root / "DAVIS"), task="unsupervised", gt_set="val").evaluate(str(results))
        J, F = res["J"], res["F"]
        out["unrounded"][f"anno_{k}"] = {
            "J&F-Mean": float((np.mean(J["M"]) + np.mean(F["M"])) / 2.0), "J-Mean": float(np.mean(J["M"])),
            "F-Mean": float(np.mean(F["M"])),
            "objects": [[name, float(J["M_per_object"][name]), float(F["M_per_object"][name])] for name in J["M_per_object"]]}
        # the unchanged script, as dist_test_davis.sh runs it (it writes its CSVs into the results folder)
        done = subprocess.run([sys.executable, "evaluation_method.py", "--task", "unsupervised", "--davis_path",
                               str(root / "DAVIS"), "--results_path", str(results)],
                              cwd=checkout, capture_output=True, text=True, check=True)
        out["stdout"][f"anno_{k}"] = [line for line in done.stdout.split("Total time")[0].strip().splitlines()
                                      if "saved in" not in line]  # the CSV paths name the scratch directory
        with open(results / "global_results-val.csv") as fh:
            row = next(csv.DictReader(fh))
        out["printed"][f"anno_{k}"] = {key: float(row[key]) for key in ("J&F-Mean", "J-Mean", "F-Mean")}
    u = out["unrounded"].values()
    out["mean_of_annotators"] = {"J": float(np.mean([a["J-Mean"] for a in u])),
                                 "F": float(np.mean([a["F-Mean"] for a in u])),
                                 "J&F": float(np.mean([a["J&F-Mean"] for a in u]))}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2]), indent=1))
