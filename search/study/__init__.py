"""The Optuna study: spec, space, scoring, running, storing, reporting.

The study file (`spec`), the search space and deployment sweep (`space`), the vectorized scoring
of a batch of candidates (`evaluation`), the run loop (`runner`), where a study lives
(`storage`, `journal_file`, the trial index `trial_index`), retries and RUNNING trials left
behind (`resilience`), the Pareto report (`report`), the stored spec (`record`), convergence and
bounds (`convergence`), NSGA-II with incremental generation bookkeeping (`distinct_children`),
storage URLs without their passwords (`secrets`), and every private Optuna access, in one place
(`optuna_adapter`).

May import: cost_model, constraints, objectives, search.errors, optuna, numpy; nothing else
under search/.
"""
