from bench.report import main

main()
