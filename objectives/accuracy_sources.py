"""Published sources whose loss, perplexity and accuracy RESULTS are a held-out test set for the
accuracy proxy (issue 28 item 1), like aiconfigurator's silicon sample is for the cost model.

No calibration or comparison row may cite one of them for a result, and no fit may use one
(`tests/objectives/test_accuracy_sources.py` checks both data files). Citing them for a layer's
definition or a kernel's cost form (as `cost_model` does for Mamba-2 or Gated DeltaNet) is fine: a
row may name a mixer (e.g. "Gated DeltaNet" as the stand-in of a linear mixer) but its `source`
and `source_id` must be another paper's own runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class ReservedSource:
    arxiv_id: str
    citation: str  # authors, year
    title: str


RESERVED_SOURCES = MappingProxyType({s.arxiv_id: s for s in (
    ReservedSource("2405.21060", "Dao & Gu 2024 (Mamba-2)",
                   "Transformers are SSMs: Generalized Models and Efficient Algorithms Through "
                   "Structured State Space Duality"),
    ReservedSource("2406.06484", "Yang et al. 2024 (DeltaNet)",
                   "Parallelizing Linear Transformers with the Delta Rule over Sequence Length"),
    ReservedSource("2412.06464", "Yang, Kautz & Hatamizadeh 2025 (Gated DeltaNet)",
                   "Gated Delta Networks: Improving Mamba2 with Delta Rule"),
    ReservedSource("2406.07522", "Ren et al. 2024 (Samba)",
                   "Samba: Simple Hybrid State Space Models for Efficient Unlimited Context "
                   "Language Modeling"),
    ReservedSource("2403.19887", "Lieber et al. 2024 (Jamba)",
                   "Jamba: A Hybrid Transformer-Mamba Language Model"),
    ReservedSource("2002.05202", "Shazeer 2020 (GLU variants)", "GLU Variants Improve Transformer"),
    ReservedSource("2507.20534", "Kimi Team 2025 (Kimi K2 report)",
                   "Kimi K2: Open Agentic Intelligence"),
    ReservedSource("2409.02060", "Muennighoff et al. 2024 (OLMoE)",
                   "OLMoE: Open Mixture-of-Experts Language Models"),
    ReservedSource("2101.03961", "Fedus et al. 2021 (Switch Transformer)",
                   "Switch Transformers: Scaling to Trillion Parameter Models with Simple and "
                   "Efficient Sparsity"),
)})  # fmt: skip


def reserved_citations(text: str) -> list[str]:
    """The reserved sources `text` cites, by arXiv id or title (case-insensitive)."""
    lowered = text.lower()
    return [s.arxiv_id for s in RESERVED_SOURCES.values()
            if s.arxiv_id in lowered or s.title.lower() in lowered]  # fmt: skip
