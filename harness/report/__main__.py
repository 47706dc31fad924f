from harness.report import main

main()
