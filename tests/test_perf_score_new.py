"""perf/bench_score_new.py at its tiny size, this harness only (no reference checkout): each of the
five generated fixtures loads whole (every sample scored, none dropped, skipped or warned about),
so the timings it prints are of scoring, not of failure paths. Timings are never asserted."""
from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "perf" / "bench_score_new.py"
# samples each tiny fixture holds: gRefCOCO 4 images x 4 val sentences; SA-Co/Gold 4 pairs x 3
# images less the one pair not exhaustive for annotator a (the evaluator leaves it out); Ref-SAV and
# Long-RVOS 2 videos x 4 expressions; GroundingSuite-Eval 6 lines, in each mode
TINY_N = {"grefcoco": 16, "saco_gold": 11, "ref_sav": 8, "gseval": 6, "long_rvos": 8}


def load_script():
    spec = importlib.util.spec_from_file_location("bench_score_new", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_tiny_fixture_is_scored_whole(tmp_path):
    outs = {o["bench"]: o for o in load_script().main(["all", "--tiny", "--work", str(tmp_path), "--workers", "1"])}
    assert set(outs) == set(TINY_N) and all("reference" not in o for o in outs.values())
    for bench, out in outs.items():
        results = [out["ours"]["box"], out["ours"]["mask"]] if bench == "gseval" else [out["ours"]]
        for result in results:
            assert result["n"] == TINY_N[bench], bench
            assert not any(result.get(k) for k in ("warnings", "dropped", "skipped", "zeroed")), (bench, result)
            assert max(v for v in result["metrics"].values() if isinstance(v, float)) > 0, bench
    assert set(outs["grefcoco"]["ours"]["counts"].values()) != {0}
