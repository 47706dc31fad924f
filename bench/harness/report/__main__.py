"""`python -m rvt_bench.harness.report RUN_DIR`: rebuild a run's report.html."""
from rvt_bench.harness.report import main

if __name__ == "__main__":
    main()
