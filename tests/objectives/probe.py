"""Adversarial probe of the accuracy proxy (issue 11): degenerate archetypes against standard
shapes of the same compute and no more parameters, and each shipped study's loss-only optimum.

Used by `test_accuracy_probe.py` and `tests/benchmarks/bench_accuracy_probe.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from constraints import check_aspect_ratio, check_params_budget
from cost_model import ConfigError
from objectives import architecture_from_shape, ranking_loss_nats, summarize_shape
from search.study.evaluation import constraint_rules
from search.study.space import build_architecture
from search.study.spec import Space, StudySpec, load_spec

STUDIES = sorted((Path(__file__).resolve().parents[2] / "studies").glob("*.toml"))
LLAMA_3_8B = "H=4096 L=32 q=32 kv=8 dh=128 ff=14336 V=128256"
LLAMA_3_70B = "H=8192 L=80 q=64 kv=8 dh=128 ff=28672 V=128256"
DENSE_TOKENS, MOE_TOKENS = 15e12, 20e12  # the dense-8b-h200 and moe-400b studies' budgets
MOE_ATTENTION = "H=4096 L=32 q=32 kv=8 dh=128 V=128256"


@dataclass(frozen=True)
class Archetype:
    """A degenerate design and a standard one of the same compute and at least as many params."""

    name: str
    degenerate: str
    standard: str
    tokens: float


ARCHETYPES = (
    # 4 heads × 64, FFN 1,344, 337 layers: Llama-3-8B's non-embedding count at H 4096
    Archetype("narrow-deep-4096", "H=4096 L=337 q=4 kv=4 dh=64 ff=1344 V=128256", LLAMA_3_8B,
              DENSE_TOKENS),
    # the same at H 8192 (FFN 2,688), layers matched to Llama-3-70B's non-embedding count
    Archetype("narrow-deep-8192", "H=8192 L=920 q=4 kv=4 dh=64 ff=2688 V=128256", LLAMA_3_70B,
              DENSE_TOKENS),
    # top-1 of 512 / 1,024 experts of width 14,336 vs top-8 of 256 experts of 1,792 (same active)
    Archetype("top1-of-512", f"{MOE_ATTENTION} E=512 k=1 de=14336",
              f"{MOE_ATTENTION} E=256 k=8 de=1792", MOE_TOKENS),
    Archetype("top1-of-1024", f"{MOE_ATTENTION} E=1024 k=1 de=14336",
              f"{MOE_ATTENTION} E=256 k=8 de=1792", MOE_TOKENS),
    # a 1M-token vocabulary on Llama-3-8B (more params, same non-embedding compute)
    Archetype("vocab-1m-untied", "H=4096 L=32 q=32 kv=8 dh=128 ff=14336 V=1048576", LLAMA_3_8B,
              DENSE_TOKENS),
    Archetype("vocab-1m-tied", "H=4096 L=32 q=32 kv=8 dh=128 ff=14336 V=1048576 tied=1",
              "H=4096 L=32 q=32 kv=8 dh=128 ff=14336 V=128256 tied=1", DENSE_TOKENS),
    # two layers of H 16,384 holding Llama-3-8B's non-embedding params
    Archetype("two-layers", "H=16384 L=2 q=128 kv=32 dh=128 ff=57344 V=128256", LLAMA_3_8B,
              DENSE_TOKENS),
    # head_dim 32 with one KV head, layers matched (38 × 185M)
    Archetype("head32-one-kv", "H=4096 L=38 q=32 kv=1 dh=32 ff=14336 V=128256", LLAMA_3_8B,
              DENSE_TOKENS),
)


def ranked(shape: str, tokens: float, precision: str = "bf16") -> float:
    return ranking_loss_nats(architecture_from_shape(shape), tokens, precision)


# ---- degeneracy by the list ------------------------------------------------------------

MIN_LAYERS = 4
MIN_ATTENTION_WIDTH_FRAC = 1 / 8


def degeneracies(arch) -> list[str]:
    """Why a design is degenerate (issue 11's list); empty when it is not."""
    s = summarize_shape(arch)
    reasons = []
    if s.num_layers < MIN_LAYERS:
        reasons.append(f"L = {s.num_layers} < {MIN_LAYERS}")
    if s.attention_width_frac < MIN_ATTENTION_WIDTH_FRAC:
        reasons.append(f"attention width {s.attention_width_frac:.3f}·H < H/8")
    if s.ffn_width_frac < 1.0:
        reasons.append(f"FFN {s.ffn_width_frac:.2f}·H < H")
    if s.num_experts > 64 and s.experts_per_token == 1:
        reasons.append(f"top-1 of {s.num_experts} experts")
    if s.vocab_size > 262_144:
        reasons.append(f"vocabulary {s.vocab_size}")
    if s.head_dim < 64 and s.num_kv_heads == 1:
        reasons.append(f"head_dim {s.head_dim} with one KV head")
    return reasons


# ---- loss-only optimum of a study's space -------------------------------------------------------

ARCH_DIMS = tuple(name for name in Space.model_fields
                  if name not in ("tp", "ep", "pp", "dp", "precision", "kv_precision"))


def _options(spec: StudySpec) -> dict[str, list]:
    return {name: list(getattr(spec.space, name).options) for name in Space.model_fields}


def _score(spec: StudySpec, params: dict) -> float:
    """Ranked loss inside the study's hard budget and aspect-ratio rules; inf outside them."""
    try:
        arch = build_architecture(params, spec.workload.isl_tokens + spec.workload.osl_tokens)
    except ConfigError:  # an invalid shape (e.g. top-k above E) is not a model
        return float("inf")
    rules = constraint_rules(spec)
    if check_params_budget(arch, rules).value > 0:
        return float("inf")
    if check_aspect_ratio(arch, rules.aspect_ratio_min, rules.aspect_ratio_max).value > 0:
        return float("inf")
    return ranking_loss_nats(arch, spec.budget.training_tokens, spec.budget.training_precision)


def _polish(
    spec: StudySpec, options: dict, params: dict, best: float, rounds: int
) -> tuple[dict, float]:
    """Coordinate descent: each architecture dimension over (a grid of) its options."""
    for _ in range(rounds):
        improved = False
        for name in ARCH_DIMS:
            values = options[name]
            grid = (
                values if len(values) <= 24 else values[:: max(1, len(values) // 24)] + [values[-1]]
            )
            for value in grid:
                trial = {**params, name: value}
                score = _score(spec, trial)
                if score < best:
                    params, best, improved = trial, score, True
        if not improved:
            break
    return params, best


def loss_only_optimum(spec: StudySpec, samples: int = 1500, seed: int = 0, rounds: int = 3):
    """(params, ranked loss, architecture) minimizing the ranked loss alone over the study's space:
    `samples` random points, then coordinate descent from the best."""
    rng, options = np.random.default_rng(seed), _options(spec)
    best_params, best = None, float("inf")
    for _ in range(samples):
        params = {name: values[rng.integers(len(values))] for name, values in options.items()}
        score = _score(spec, params)
        if score < best:
            best_params, best = params, score
    params, best = _polish(spec, options, best_params, best, rounds)
    return (
        params,
        best,
        build_architecture(params, spec.workload.isl_tokens + spec.workload.osl_tokens),
    )


def load_studies() -> list[StudySpec]:
    return [load_spec(path) for path in STUDIES]
