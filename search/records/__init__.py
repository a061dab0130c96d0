"""What a study's results look like written down: documents, tables, exports.

The per-model documents every command prints (`documents`: parameters, memory, deployment,
operating points), plain-text tables and JSON (`tables`), one trial as our JSON record, a
Hugging Face config.json or vLLM arguments (`export`), the Pareto set as Parquet/CSV
(`arrow_export`), the feasible-only view of a study for optuna-dashboard (`dashboard`), all
written through the one atomic file writer (`search/atomic.py`).

May import: search.study, search.errors and the layers below (cost_model, constraints,
objectives).
"""
