"""Fitting the cost model's efficiency layer to measured kernels, per serving engine.

Each engine's aiconfigurator-core tables at one engine version (`tables`): dense GEMMs per format
(`gemm`), attention (`attention`), the all-reduce (`comm`), the fused MoE per experts' format
(`moe`); the generic kernels (`generic`); the efficiency files and the shipped measured GEMM grid
(`files`, `measured_lookup`); what every fit shares (`fitting`).

May import: search.records, search.study, search.errors and the layers below; aiconfigurator-
core and scipy only inside functions (the calibrate extra).
"""
