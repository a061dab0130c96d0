"""A wide loss-only search (issue 28 item 5): the design minimizing the ranked loss at a size,
over a space far beyond the shipped studies' (widths, depths, heads, KV and MLA ranks, FFN gating,
vocabularies, linear-attention and sliding-window hybrids, expert counts), against the best
published shape of that size, with the gap split into the proxy's families and the part a cited
comparison supports.

A candidate is a dict of dimensions; its FFN (dense) or expert width (MoE) is solved so that the
total parameters hit the size (the parameter count is linear in it). The search: every published
shape and a few random points as starts, then coordinate descent over every dimension. Used by
`test_wide_search.py` and `tests/benchmarks/bench_loss_search.py`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from cost_model.errors import ConfigError
from cost_model.params import count_params
from objectives.accuracy import FAMILY_OF_TERM, LossProxy, predict_loss, summarize_shape
from objectives.accuracy_fit import CalibrationRow, read_rows, shipped_calibration_set
from objectives.shapes import build

MAX_UNSUPPORTED_GAP = 0.005  # issue 28 item 5: 0.5% past what a cited comparison supports
# Total (and MoE active) parameters within ±5% of the size: "a shape of that size" (the base law's
# gain from up to 5% more parameters is the only gain the `base` family may claim).
BUDGET_FRAC = 0.05


@dataclass(frozen=True)
class Size:
    name: str
    total_params: float
    tokens: float
    published: Mapping[str, str]  # name: shape string (objectives.shapes)
    active_params: float = 0.0  # MoE: the active target (0: dense)


SIZES = (
    Size("dense-1b", 1.24e9, 9e12, {  # Llama-3.2-1B's 9T tokens
        "Llama-3.2-1B": "H=2048 L=16 q=32 kv=8 dh=64 ff=8192 V=128256 tied=1",
        "TinyLlama-1.1B": "H=2048 L=22 q=32 kv=4 dh=64 ff=5632 V=32000",
        "OLMo-1B": "H=2048 L=16 q=16 kv=16 dh=128 ff=8192 V=50304 tied=1",
    }),
    Size("dense-8b", 8.0e9, 15e12, {  # the dense-8b-h200 study's 15T tokens
        "Llama-3-8B": "H=4096 L=32 q=32 kv=8 dh=128 ff=14336 V=128256",
        "Qwen3-8B": "H=4096 L=36 q=32 kv=8 dh=128 ff=12288 V=151936",
        "Mistral-7B": "H=4096 L=32 q=32 kv=8 dh=128 ff=14336 V=32000",
        "OLMo-2-7B": "H=4096 L=32 q=32 kv=32 dh=128 ff=11008 V=100352",
    }),
    Size("moe-30b-a3b", 30.5e9, 36e12, {  # Qwen3's 36T tokens
        "Qwen3-30B-A3B": "H=2048 L=48 q=32 kv=4 dh=128 E=128 k=8 de=768 V=151936",
    }, active_params=3.34e9),
)  # fmt: skip

DENSE_OPTIONS: Mapping[str, tuple] = {
    "H": tuple(range(512, 8193, 256)), "L": (4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 48, 56, 64,
                                            80, 96, 128),
    "dh": (32, 64, 128, 256), "width": (0.5, 0.75, 1.0, 1.5, 2.0, 2.5),
    "kv": (1, 2, 4, 8, 16, 32, 64), "V": (4096, 8192, 16384, 32000, 50304, 65536, 100352,
                                          128256, 151936, 262144),
    "tied": (0, 1), "gated": (0, 1), "mla": (0, 16, 64, 256, 512, 1024),
    "mix": (0, 1, 2, 3), "full": (0, 2, 3, 4, 6, 8, 16), "sw": (0, 1024, 4096),
    "swp": (0, 2, 6),
}  # fmt: skip
MOE_OPTIONS: Mapping[str, tuple] = {**DENSE_OPTIONS, "E": (8, 16, 32, 64, 128, 256, 512, 1024),
                                    "k": (1, 2, 4, 6, 8, 16, 32), "sh": (0, 1, 2)}  # fmt: skip
RANDOM_STARTS = 6
ROUNDS = 3


def shape_text(d: Mapping[str, int], width: int) -> str:
    """The shape string of dimensions `d` with FFN (dense) or expert (MoE) width `width`."""
    heads = max(1, round(d["width"] * d["H"] / (192 if d["mla"] else d["dh"])))
    parts = [f"H={d['H']} L={d['L']} q={heads}", f"V={d['V']} tied={d['tied']}",
             f"gated={d['gated']}"]  # fmt: skip
    if d["mla"]:
        parts.append(f"dh=192 mla={d['mla']}")
    else:
        parts.append(f"kv={math.gcd(heads, d['kv'])} dh={d['dh']}")
    if "E" in d:
        parts.append(f"E={d['E']} k={min(d['k'], d['E'])} de={width} sh={d['sh']}")
    else:
        parts.append(f"ff={width}")
    if d["mix"]:
        parts.append(f"mix={d['mix']} full={d['full']} lh=16 ld={max(32, d['H'] // 16)}")
    elif d["sw"]:
        parts.append(f"sw={d['sw']} swp={d['swp']}")
    return " ".join(parts)


@lru_cache(maxsize=8192)
def _total(text: str) -> float:
    return float(count_params(build(text)).total_params)


def solve_width(d: Mapping[str, int], size: Size) -> str | None:
    """The shape with the FFN/expert width (a multiple of 64, at least 64) that puts the total at
    the size; None when no width does (the rest is already too big)."""
    probe = 64 * 16
    try:
        low, high = _total(shape_text(d, probe)), _total(shape_text(d, 2 * probe))
    except ConfigError:
        return None
    slope = (high - low) / probe
    width = 64 * round((probe + (size.total_params - low) / slope) / 64)
    return shape_text(d, width) if width >= 64 else None


def score(d: Mapping[str, int], size: Size) -> tuple[float, str | None, LossProxy | None]:
    """(ranked loss, shape, proxy); inf outside the budget or for an invalid shape."""
    text = solve_width(d, size)
    if text is None:
        return math.inf, None, None
    try:
        arch = build(text)
    except ConfigError:
        return math.inf, None, None
    shape = summarize_shape(arch)
    if abs(shape.total_params / size.total_params - 1) > BUDGET_FRAC:
        return math.inf, None, None
    if size.active_params and abs(shape.active_params / size.active_params - 1) > BUDGET_FRAC:
        return math.inf, None, None
    proxy = predict_loss(arch, size.tokens)
    return proxy.ranked_loss_nats, text, proxy


def _random_point(options: Mapping[str, tuple], rng: np.random.Generator) -> dict:
    return {name: values[rng.integers(len(values))] for name, values in options.items()}


def _start_points(size: Size, options: Mapping[str, tuple], seed: int) -> list[dict]:
    """The published shapes' nearest grid points, then random points."""
    rng, starts = np.random.default_rng(seed), []
    for text in size.published.values():
        s = summarize_shape(build(text))
        point = {name: min(values, key=lambda v, n=name: abs(v - _published_value(s, n)))
                 for name, values in options.items()}  # fmt: skip
        starts.append(point)
    return starts + [_random_point(options, rng) for _ in range(RANDOM_STARTS)]


def _published_value(s, name: str) -> float:
    return {"H": s.hidden_size, "L": s.num_layers, "dh": s.head_dim,
            "width": s.attention_width_frac, "kv": s.num_kv_heads, "V": s.vocab_size,
            "tied": 1.0 if s.vocab_params == s.vocab_size * s.hidden_size else 0.0,
            "gated": float(s.gated_ffn), "mla": 0.0, "mix": 0.0, "full": 0.0, "sw": 0.0,
            "swp": 0.0, "E": s.num_experts, "k": s.experts_per_token,
            "sh": 0.0}[name]  # fmt: skip


def _descend(point: dict, options: Mapping[str, tuple], size: Size) -> tuple[float, dict]:
    best, _, _ = score(point, size)
    for _ in range(ROUNDS):
        improved = False
        for name, values in options.items():
            for value in values:
                trial = {**point, name: value}
                loss, _, _ = score(trial, size)
                if loss < best:
                    point, best, improved = trial, loss, True
        if not improved:
            break
    return best, point


@dataclass(frozen=True)
class SearchResult:
    size: Size
    optimum_shape: str
    optimum: LossProxy
    published_name: str
    published: LossProxy
    contributions: Mapping[str, float] = field(default_factory=dict)  # ln L_pub/L_opt by family
    supported: Mapping[str, float] = field(default_factory=dict)  # the part a comparison covers

    @property
    def gap_log(self) -> float:
        return math.log(self.published.ranked_loss_nats / self.optimum.ranked_loss_nats)

    @property
    def unsupported_log(self) -> float:
        return self.gap_log - sum(self.supported.values())


def wide_search(size: Size, seed: int = 0) -> SearchResult:
    options = MOE_OPTIONS if size.active_params else DENSE_OPTIONS
    best, point = math.inf, None
    for start in _start_points(size, options, seed):
        loss, found = _descend(start, options, size)
        if loss < best:
            best, point = loss, found
    _, text, optimum = score(point, size)
    published = {name: predict_loss(build(t), size.tokens) for name, t in size.published.items()}
    name = min(published, key=lambda n: published[n].ranked_loss_nats)
    if published[name].ranked_loss_nats < optimum.ranked_loss_nats:  # a published shape wins
        text, optimum = size.published[name], published[name]
    contributions = family_contributions(published[name], optimum)
    return SearchResult(size, text, optimum, name, published[name], contributions,
                        supported_gains(contributions))  # fmt: skip


def family_contributions(published: LossProxy, optimum: LossProxy) -> dict[str, float]:
    """ln(L_pub/L_opt) split exactly: the base law (capacity at equal parameters), each family's
    terms, and the ranked loss's band end (hard flags)."""
    parts = {"base": math.log(published.base_loss_nats / optimum.base_loss_nats)}
    for term, family in FAMILY_OF_TERM.items():
        parts[family] = parts.get(family, 0.0) + math.log(
            published.penalties[term] / optimum.penalties[term])
    parts["ranking"] = math.log(published.ranked_loss_nats / published.loss_nats) - math.log(
        optimum.ranked_loss_nats / optimum.loss_nats)
    return parts


@lru_cache(maxsize=1)
def largest_published_effects() -> dict[str, float]:
    """Per family, the largest loss gain a verified calibration row publishes for its variant b
    over its baseline a, −ln(published b/a), 0 when no row's variant won: the most a cited
    comparison supports (a depth gain needs a row where the deeper or shallower variant won, not
    one where it lost)."""
    rows: list[CalibrationRow] = read_rows(shipped_calibration_set())
    effects: dict[str, float] = {}
    for row in rows:
        effects[row.family] = max(effects.get(row.family, 0.0), -math.log(row.published))
    return {family: max(gain, 0.0) for family, gain in effects.items()}


def supported_gains(contributions: Mapping[str, float]) -> dict[str, float]:
    """The part of each family's gain a cited comparison of that family covers: at most the
    largest gain a verified row of that family publishes. The base law's (more counted parameters:
    the ±5% budget, or a published shape below the size) is the Chinchilla/Epoch fit's own; the
    ranking end's (hard flags) none."""
    effects = {**largest_published_effects(), "base": math.inf, "ranking": 0.0}
    return {family: min(max(gain, 0.0), effects.get(family, 0.0))
            for family, gain in contributions.items()}  # fmt: skip
