"""Range flags of the accuracy proxy: each fires where the data behind a term end.

Hard flags mark designs no published run covers, where a term's sign or size is unknown; they
put the candidate's ranked loss at the pessimistic end of its band. Soft flags annotate (for
example, every over-trained model is past the Chinchilla data's 341 tokens per parameter; that
is the usual inference-driven choice and is not hard until far past Sardana et al.'s runs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from objectives import accuracy_terms as terms
from objectives import capacity_terms as cap
from objectives import mixer_terms as mix


@dataclass(frozen=True)
class RangeFlag:
    """One quantity outside the data its term was fitted on."""

    quantity: str
    value: float | str
    valid_range: str
    source: str
    hard: bool

    def __str__(self) -> str:
        value = f"{self.value:.4g}" if isinstance(self.value, float | int) else self.value
        kind = "hard" if self.hard else "soft"
        return f"{kind}: {self.quantity} = {value}, validated {self.valid_range} ({self.source})"


def outside(quantity: str, value: float, bounds: tuple[float, float], source: str,
            hard: bool = False) -> list[RangeFlag]:  # fmt: skip
    low, high = bounds
    if low <= value <= high:
        return []
    return [RangeFlag(quantity, float(value), f"[{low:.4g}, {high:.4g}]", source, hard)]


# ---- limits (each with the data that set it) ----------------------------------------------------

TOKENS_PER_PARAM_SOFT_MAX = terms.BASE_LAW_MAX_TOKENS_PER_PARAM  # 341: Chinchilla's data [V]
TOKENS_PER_PARAM_HARD_MAX = 10_000.0  # Sardana et al. 2024 trained up to ~10,000 tokens/param [S]
MIN_LAYERS = 4  # below: Kaplan Fig. 6 (< 2 layers off-trend), Gemstones/Morph's 3-layer runs steep
MAX_LAYERS_SOFT = cap.GEMSTONES_DEPTH_RANGE[1]  # 80, the deepest Gemstones model [V]
ASPECT_RATIO_HARD_MAX = terms.ASPECT_RATIO_KAPLAN_RANGE[1]  # 700: Kaplan's (6, 4288) [V]
# Gemstones 768×98 (R 7.8) to Morph's 384
ASPECT_RATIO_SOFT_RANGE = (5.0, terms.ASPECT_RATIO_MORPH_RANGE[1])
MIN_ATTENTION_WIDTH_FRAC = 1 / 8  # no run narrower than n_q·d_h = H/8 (Kaplan Fig. 5 keeps H)
# the widest trained: 2·H (Qwen3 configs, Bian 2025b's Panda-1B [V]), 2.3·H (DeepSeek-V3's MLA
# queries [V]); beyond 2.5·H the mix and KV terms would be rewarding an untested extreme
MAX_ATTENTION_WIDTH_FRAC = 2.5
MIN_KV_WIDTH_FRAC = 1 / 32  # DeepSeek-V2 Table 8's MQA at 7B: one 128-wide KV head at H 4096 [V]
# The narrowest trained MLA latent: DeepSeek-V3's 512 at H 7168 (its config.json) [V]; no loss row
# prices the latent rank (kv_width_coef has no row), so a narrower latent is outside the data.
MIN_MLA_RANK_FRAC = 512 / 7168
MIN_HEAD_DIM_HARD = 32
MIN_FFN_WIDTH_FRAC = 1.0  # Bian 2025b's narrowest: Panda-3B, gated d_ff = d_model [V]
# top-1 past 64 experts: only small dense sizes in the scaling runs (Clark 2022: <= 1.3B) [S]
TOP1_MAX_EXPERTS = 64
NON_GATED_SOURCE = "Narang 2021 Table 1: ReLU/GeLU/Swish vs GLU FFNs at 223M, 34B tokens only"
VOCAB_HARD_MAX = 262_144  # largest production vocabulary of the validation models (Gemma 2) [V]


def base_law_flags(n_eff: float, tokens: float) -> list[RangeFlag]:
    per_param, source = tokens / n_eff, "Chinchilla/Epoch fit data"
    flags = outside("N_eff (params)", n_eff, terms.BASE_LAW_PARAMS_RANGE, source)
    hard = outside("D/N_eff (tokens per param)", per_param, (0.0, TOKENS_PER_PARAM_HARD_MAX),
                   "Sardana 2024: runs up to ~10,000; gains over-predicted far past the data",
                   True)  # fmt: skip
    return flags + (hard or outside("D/N_eff (tokens per param)", per_param,
                                    (0.0, TOKENS_PER_PARAM_SOFT_MAX),
                                    "Chinchilla data"))  # fmt: skip


def depth_flags(shape) -> list[RangeFlag]:
    layers, ratio, name = shape.num_layers, shape.aspect_ratio, "R (d_model/n_layers)"
    flags = outside(
        "L (layers)", layers, (MIN_LAYERS, math.inf), "Kaplan 2020 Fig. 6; Gemstones", True
    )
    flags += outside("L (layers)", layers, (0, MAX_LAYERS_SOFT),
                     "Gemstones: depths 3–80; the depth term is clamped there")  # fmt: skip
    hard = outside(name, ratio, (0.0, ASPECT_RATIO_HARD_MAX), "Kaplan 2020 Fig. 5", hard=True)
    return flags + (hard or outside(name, ratio, ASPECT_RATIO_SOFT_RANGE, "Gemstones, Morph runs"))


def attention_flags(shape) -> list[RangeFlag]:
    flags = outside("n_q·d_h / H (attention width)", shape.attention_width_frac,
                    (MIN_ATTENTION_WIDTH_FRAC, MAX_ATTENTION_WIDTH_FRAC),
                    "trained models span H/8 (none below) to 2.3·H", hard=True)  # fmt: skip
    flags += outside("n_kv·d_h / H (KV width)", shape.kv_width_frac, (MIN_KV_WIDTH_FRAC, math.inf),
                     "DeepSeek-V2 Table 8: MQA at 7B", hard=True)  # fmt: skip
    no_law = "no loss law; Kaplan 2020: weak effect"
    head = outside("d_h (head dim)", shape.head_dim, (MIN_HEAD_DIM_HARD, math.inf), no_law, True)
    flags += head or outside("d_h (head dim)", shape.head_dim, terms.HEAD_DIM_RANGE, no_law)
    if shape.is_mla:
        flags += mla_flags(shape.mla_rank_frac)
    elif shape.num_kv_heads == 1:
        flags.append(RangeFlag("n_kv (KV heads)", 1.0, "[2, n_q]",
                               "MQA: training instability (Ainslie 2023)", False))  # fmt: skip
    return flags


def mla_flags(rank_frac: float) -> list[RangeFlag]:
    """MLA itself (one lab's evidence) and its latent rank against the trained ones."""
    flags = [RangeFlag("attention", "MLA", "MHA/GQA/MQA",
                       "DeepSeek-V2 Table 9: MLA >= MHA, one lab", hard=False)]  # fmt: skip
    name = "MLA latent rank / H"
    hard = outside(name, rank_frac, (MIN_MLA_RANK_FRAC, math.inf),
                   "narrowest trained latent: DeepSeek-V3's 512 at H 7168", hard=True)  # fmt: skip
    return flags + (hard or outside(name, rank_frac, (cap.MLA_PARITY_RANK_FRAC, math.inf),
                                    "DeepSeek-V2 Table 9 parity with MHA at rank H/10"))


def mixer_flags(shape) -> list[RangeFlag]:
    """Where the linear-attention and sliding-window evidence ends (`mixer_terms`)."""
    flags: list[RangeFlag] = []
    if shape.linear_layers:
        frac, name = shape.full_attention_frac, "attention share of mixer layers"
        if frac <= 0.0:
            flags.append(RangeFlag(name, 0.0, "> 0", "no attention layer: copying and in-context "
                                   "deficits (Waleffe 2024) the loss does not show",
                                   hard=True))  # fmt: skip
        else:
            flags += outside(name, frac, mix.HYBRID_ATTENTION_SHARE_RANGE,
                             "hybrid rows span 1/8–1/2 (Kimi Linear, MiniMax-01, Griffin); "
                             "the term is interpolated outside")  # fmt: skip
    if shape.sliding_layers:
        window, name = float(shape.sliding_window), "sliding window (tokens)"
        hard = outside(name, window, (mix.HARD_MIN_WINDOW_TOKENS, math.inf),
                       "4x below Gemma 3's 512", hard=True)  # fmt: skip
        flags += hard or outside(name, window, (mix.MIN_WINDOW_TOKENS, math.inf),
                                 "Gemma 3 Fig. 4: 512 at 1:1 and 3:1 local:global")  # fmt: skip
    return flags


def ffn_flags(shape, penalties) -> list[RangeFlag]:
    flags = outside("FFN width / H (SwiGLU-equivalent, active)", shape.ffn_width_frac,
                    (MIN_FFN_WIDTH_FRAC, math.inf), "Bian 2025b: narrowest d_ff = d_model",
                    True)  # fmt: skip
    if not shape.gated_ffn:
        flags.append(RangeFlag("FFN", "non-gated", "gated (GLU)", NON_GATED_SOURCE, hard=False))
    if shape.uses_mix:
        flags += outside("r (MLP/attention params)", shape.mlp_attention_ratio,
                         terms.MIX_RATIO_RANGE, "Bian 2025b fit range; P_mix clipped to it")
        if penalties["mlp_mix"] != 1.0:
            flags += outside("params with the mix term", shape.total_params,
                         (0.0, terms.MIX_PARAMS_RANGE[1]), "Bian 2025b: 80M–3B")  # fmt: skip
    return flags


def moe_flags(shape, tokens: float) -> list[RangeFlag]:
    if not shape.num_experts:
        return []
    flags = outside("E (routed experts)", shape.num_experts, (1, terms.MOE_MAX_EXPERTS),
                    "Clark 2022", True)  # fmt: skip
    flags += outside("activation ratio (k+shared)/(E+shared)", shape.activation_frac,
                     (terms.MOE_MIN_ACTIVATION_FRAC, 1.0), "Ling 2.0 efficiency-leverage law",
                     True)  # fmt: skip
    big = shape.active_params > terms.CLARK_MAX_DENSE_PARAMS
    if shape.experts_per_token == 1 and shape.num_experts > TOP1_MAX_EXPERTS and big:
        flags.append(RangeFlag("top-1 of E experts", float(shape.num_experts),
                               f"<= {TOP1_MAX_EXPERTS}",
                               "top-1 runs past 64 experts: Clark's, <= 1.3B dense",
                               hard=True))  # fmt: skip
    if shape.granularity < cap.COARSE_GRANULARITY_MAX:
        flags.append(RangeFlag("G (granularity)", shape.granularity, ">= 1.5 (fine-grained)",
                               "Krajewski 2024: G = 1 is not optimal", hard=False))  # fmt: skip
    joint = "Joint MoE law runs (Ludziejewski 2025 App. E); evaluated at their edge"
    flags += outside("G (granularity)", shape.granularity, cap.KRAJEWSKI_GRANULARITY_RANGE,
                     "Krajewski 2024 runs; gain held at G = 16")  # fmt: skip
    flags += outside("(E+shared)/(k+shared) (expansion)", shape.expansion,
                     cap.JOINT_MOE_EXPANSION_RANGE, joint)  # fmt: skip
    flags += outside("N_act (params, MoE law)", shape.active_params, cap.JOINT_MOE_PARAMS_RANGE,
                     joint)  # fmt: skip
    return flags + outside("D/N_act (tokens per active param, MoE law)",
                           tokens / shape.active_params,
                           (0.0, cap.JOINT_MOE_MAX_TOKENS_PER_PARAM), joint)  # fmt: skip


def vocab_flags(shape) -> list[RangeFlag]:
    flags = outside("V (vocabulary)", shape.vocab_size, (0, VOCAB_HARD_MAX),
                    "largest production vocabulary (Gemma 2: 256K)", hard=True)  # fmt: skip
    return flags + outside("V (vocabulary)", shape.vocab_size, (cap.TAO_VOCAB_RANGE[0], math.inf),
                           "Tao 2024 runs from 4K; text per token held at 4K")  # fmt: skip


def precision_flags(shape, fmt: str) -> list[RangeFlag]:
    if fmt == "fp8":
        fine = f"{terms.FINE_GRAINED_FP8} (1×128 / 128×128 scales)"
        recipe = "DeepSeek-V3 §3.3: the recipe behind the FP8 term"
        return [RangeFlag("precision", "fp8 (per-tensor scaling)", fine, recipe, hard=False)]
    if fmt not in terms.FP4_FORMATS:
        return []
    tested = "NVFP4 paper: 8B and 12B runs; its full recipe is assumed"
    return outside(
        f"total params trained in {fmt}", shape.total_params, terms.FP4_TESTED_PARAMS_RANGE, tested
    )


def all_flags(shape, n_eff: float, tokens: float, fmt: str, penalties) -> list[RangeFlag]:
    return [*base_law_flags(n_eff, tokens), *moe_flags(shape, tokens), *depth_flags(shape),
            *attention_flags(shape), *mixer_flags(shape), *ffn_flags(shape, penalties),
            *vocab_flags(shape), *precision_flags(shape, fmt)]  # fmt: skip
