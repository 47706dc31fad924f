"""Print expected_visa_binarized.json: VISA tools/eval_revos.py run unchanged on the
make_fixture_raw.py fixture whose prediction PNGs were first rewritten as 0/1 index PNGs (1 wherever
the gray value VISA reads, cv2.IMREAD_GRAYSCALE, is nonzero). That is what the ReVOS protocol's
`variant=binarized` means: VISA's own functions on 0/1 predictions, with the GT VISA builds (the
uint8 sum of an expression's anno masks: 2 where two of them overlap).

Broken predictions stay broken (a missing, wrong-size or unreadable frame is left as it is), so
VISA scores the same expressions 0 as on the raw fixture.

Run outside the repository (VISA's code is not part of it):
    git clone https://github.com/cilinyan/VISA /tmp/visa && git -C /tmp/visa checkout ec158fde9cdf87f702399c73618aa0f1127062e9
    .venv/bin/python tests/data/visa_parity/run_visa_binarized.py /tmp/visa /tmp/visa_bin_run > tests/data/visa_parity/expected_visa_binarized.json
(`termcolor` stubbed as in run_visa.py when it is not installed.)
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixture_raw import write_fixture  # noqa: E402

visa, work = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
shutil.rmtree(work, ignore_errors=True)
root, pred = write_fixture(work)
rewritten = 0
for png in sorted(pred.rglob("*.png")):
    gray = cv2.imread(str(png), cv2.IMREAD_GRAYSCALE)
    if gray is None:  # the unreadable frame stays unreadable
        continue
    cv2.imwrite(str(png), (gray != 0).astype(np.uint8))
    rewritten += 1
print(f"{rewritten} prediction PNGs rewritten as 0/1", file=sys.stderr)
subprocess.run([sys.executable, str(visa / "tools" / "eval_revos.py"), str(pred),
                "--visa_exp_path", str(root / "meta_expressions_valid_.json"),
                "--visa_mask_path", str(root / "mask_dict.json"),
                "--visa_foreground_mask_path", str(root / "mask_dict_foreground.json")],
               check=True, cwd=visa / "tools", stdout=sys.stderr, env={**os.environ})
csv = pd.read_csv(work / "revos_valid.csv", dtype={"exp_id": str, "video_name": str})
expressions = sorted(
    ({"video": r.video_name, "exp_id": r.exp_id, "type_id": int(r.type_id),
      **{k: float(getattr(r, k)) for k in ("J", "F", "JF", "A", "R")}} for r in csv.itertuples()),
    key=lambda e: (e["video"], e["exp_id"]))
print(json.dumps({
    "source": "VISA tools/eval_revos.py @ ec158fde9cdf87f702399c73618aa0f1127062e9, run unchanged on "
              "tests/data/visa_parity/make_fixture_raw.py output with every prediction PNG rewritten as 0/1 "
              "(run_visa_binarized.py)",
    "units": "percent, as VISA prints; per expression rounded to 2 decimals by VISA",
    "results": json.loads((work / "revos_valid.json").read_text()),
    "expressions": expressions,
}, indent=1))
