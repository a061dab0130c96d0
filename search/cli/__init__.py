"""The command line: each module parses one command's arguments and prints its result.

`main` (the entry point, command table, exit codes), and one module per command group: `cost`
(hardware, gemm), `evaluate` and `evaluate_batch`, `study` (search, pareto), `inspect` (show,
export, plot), `lint`, `loss`, `calibrate`, `dashboard`. Commands parse and print; what they
compute lives in the packages below.

May import: anything under search/ and below; nothing imports search.cli except the entry point
and tests.
"""
