"""`python -m rvt_bench ...` = `rvt-bench ...` = `python run_bench.py ...`."""
from rvt_bench.harness.main import console

if __name__ == "__main__":
    console()
