"""Run VideoLISA's ReasonVOS evaluator on the fixture and keep what it printed (expected.json).

    python tests/data/reasonvos_parity/run_reference.py <VideoLISA checkout> <work dir>

<VideoLISA checkout>: showlab/VideoLISA at 146f2bc (evaluation/reason_vos/eval_reason_vos.py and
its metrics.py, run unchanged with this interpreter: numpy, opencv, scikit-image). The fixture is
written by make_fixture.py into <work dir>; expected.json holds the printed J, F, J&F (parsed from
its stdout, repr of the float64 values as printed), its result JSON (per expression [J, F]) and the
lines it printed about skipped folders. Nothing of VideoLISA's code is kept.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_fixture import write_fixture  # noqa: E402

COMMIT = "146f2bc"


def main(checkout: str, work: str) -> None:
    root, pred = write_fixture(work)
    out = Path(work) / "result.json"
    script = Path(checkout) / "evaluation" / "reason_vos" / "eval_reason_vos.py"
    proc = subprocess.run([sys.executable, str(script), "--meta_exp_path", str(root / "meta_expressions.json"),
                           "--mask_path", str(root / "Annotations"), "--pred_path", str(pred), "--save_name", str(out)],
                          capture_output=True, text=True, cwd=script.parent, timeout=600)
    printed = {k: float(v) for k, v in re.findall(r"^(J|F|J&F): (\S+)$", proc.stdout, re.M)}
    expected = {
        "source": f"showlab/VideoLISA@{COMMIT} evaluation/reason_vos/eval_reason_vos.py, run by run_reference.py",
        "printed": printed,
        "per_expression": json.loads(out.read_text()),
        "not_found": sorted(re.findall(r"^(.*) not found, not take into metric computation$", proc.stdout, re.M)),
        "worker_errors": len(re.findall(r"^Traceback", proc.stderr, re.M)),
    }
    expected["not_found"] = [str(Path(p).relative_to(Path(work).resolve()) if Path(p).is_absolute() else p)
                             for p in expected["not_found"]]
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(proc.stdout)
    print(proc.stderr[-3000:], file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:3])
