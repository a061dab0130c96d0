"""Fitting the cost model's efficiency layer to measured kernels.

GEMM efficiency fits on measured tables (`gemm`), attention kernels (`attention`), all-reduce
(`comm`), fused MoE (`moe`), and the shipped measured GEMM grid that `archscout gemm` compares
with (`measured_lookup`).

May import: search.records, search.study, search.errors and the layers below; aiconfigurator-
core and scipy only inside functions (the calibrate extra).
"""
