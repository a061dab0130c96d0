"""Pictures of a study: frontiers, breakdowns, rooflines, hypervolume.

The frontier plot (`frontier`) and the other kinds of `archscout plot` (`kinds`: a trial's time
breakdown, GEMM roofline, hypervolume over trials), drawn with matplotlib's headless Agg
backend.

May import: search.records, search.study, search.errors and the layers below.
"""
