from rvt_bench.harness.report import main

main()
