"""Print expected_visa.json: VISA tools/eval_revos.py run unchanged on the make_fixture.py fixture
(or, with a third argument "raw", expected_visa_raw.json on the make_fixture_raw.py fixture).

Run outside the repository (VISA's code is not part of it):
    git clone https://github.com/cilinyan/VISA /tmp/visa && git -C /tmp/visa checkout ec158fde9cdf87f702399c73618aa0f1127062e9
    /tmp/venvtest/bin/python tests/data/visa_parity/run_visa.py /tmp/visa /tmp/visa_parity_run > tests/data/visa_parity/expected_visa.json
    /tmp/venvtest/bin/python tests/data/visa_parity/run_visa.py /tmp/visa /tmp/visa_raw_run raw > tests/data/visa_parity/expected_visa_raw.json
eval_revos.py imports `termcolor` only to colour error messages; when it is not installed, put a
stub `termcolor.py` defining `colored = lambda s, *a, **k: s` on PYTHONPATH.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
raw = len(sys.argv) > 3 and sys.argv[3] == "raw"
if raw:
    from make_fixture_raw import write_fixture  # noqa: E402
else:
    from make_fixture import write_fixture  # noqa: E402

visa, work = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
shutil.rmtree(work, ignore_errors=True)
root, pred = write_fixture(work)
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
              f"tests/data/visa_parity/{'make_fixture_raw' if raw else 'make_fixture'}.py output (run_visa.py)",
    "units": "percent, as VISA prints; per expression rounded to 2 decimals by VISA",
    "results": json.loads((work / "revos_valid.json").read_text()),
    "expressions": expressions,
}, indent=1))
