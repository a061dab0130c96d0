"""The Optuna study: spec, space, scoring, running, storing, reporting.

The study file (`spec`), the search space and deployment sweep (`space`), the vectorized scoring
of a batch of candidates (`evaluation`), the run loop (`runner`), where a study lives
(`storage`, `journal_file`), keeping shared storages healthy (`resilience`), the Pareto report
(`report`), the stored spec (`record`), convergence and bounds (`convergence`), and the NSGA-II
children that do not repeat a design (`distinct_children`).

May import: cost_model, constraints, objectives, search.errors, optuna, numpy; nothing else
under search/.
"""
