"""`archscout lint`'s rules: the seven hardware guidelines on a real model.

The policy and guidelines 1-4 (`guidelines`), the parallelism rules 5-7 (`parallel`), and what
the rules share (`support`: the GEMMs one GPU runs, modified copies, the nearest compliant
value, the cost model's verdict on a change).

May import: search.records, search.study, search.errors and the layers below.
"""
