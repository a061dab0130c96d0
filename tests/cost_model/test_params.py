"""Exact parameter counts (vs transformers and published numbers), and the table of weight GEMMs
checked against them (two FLOPs per active weight)."""

import csv
import re
from functools import cache
from pathlib import Path

import pytest

from cost_model.architecture import Architecture
from cost_model.hf import load_architecture
from cost_model.params import BREAKDOWN_KEYS, count_params
from cost_model.sharded_gemms import layer_sources, rows_of
from cost_model.units import gemm_flop

from tests.cost_model.transformers_meta import meta_model, transformers_config
from tests.data_paths import HF_CONFIGS as TEST_CONFIGS
from tests.data_paths import MODEL_CONFIGS, MODEL_PARAMS_CSV

CONFIG_FILES = sorted(MODEL_CONFIGS.glob("*.json")) + sorted(TEST_CONFIGS.glob("*.json"))
with open(MODEL_PARAMS_CSV, newline="", encoding="utf-8") as _file:
    CSV_ROWS = list(csv.DictReader(_file))
B = 1e9


def matmul_flop_per_token(arch: Architecture) -> float:
    """FLOPs of every weight GEMM one token goes through, from the table of weight GEMMs (what
    the step model runs): each row on the layers of its kind, k of the routed experts, router
    and LM head included."""
    flop = 0.0
    for row in rows_of(arch):
        copies = arch.ffn.experts_per_token if row.experts else 1
        flop += sum(float(gemm_flop(1, row.n.value(src), row.k.value(src))) * copies * layers
                    for src, layers in layer_sources(arch, row.layers))
    return flop


def _load(stem: str) -> Architecture:
    path = MODEL_CONFIGS / f"{stem}.json"
    return load_architecture(path if path.exists() else TEST_CONFIGS / f"{stem}.json")


# ---- the development set: validation/model_params.csv ------------------------------------------


@pytest.mark.parametrize("row", CSV_ROWS, ids=[row["model"] for row in CSV_ROWS])
def test_counts_equal_validation_csv(row):
    counts = count_params(_load(row["model"]))
    # source: validation/model_params.csv (transformers' own counts); tolerance 0
    assert counts.total_params == int(row["transformers_params"])
    assert counts.embedding_params == int(row["transformers_embedding_params"])
    tied = row["tie_word_embeddings"] == "True"
    assert counts.lm_head_params == (0 if tied else int(row["transformers_lm_head_params"]))
    # active = total - unused routed experts; includes embedding and lm_head (the CSV's notes)
    active = row["transformers_active_params"]
    assert counts.active_params == (int(float(active)) if active else counts.total_params)


# ---- every config against transformers itself (meta device: nothing is allocated) -------------


def _transformers_group(name: str) -> str:
    """Our coarse component of one transformers parameter name."""
    rules = [
        ("embed_tokens", "embedding"), ("lm_head", "lm_head"), (".self_attn.", "attention"),
        (".linear_attn.", "linear_attention"),  # Gated DeltaNet (Qwen3-Next, Qwen3.5)
        (".mamba.", "linear_attention"),  # Falcon-H1's parallel Mamba-2
        # Nemotron-H names every block's module `mixer`, its embedding `embeddings`
        ("model.embeddings.", "embedding"), ("backbone.embeddings.", "embedding"),
        *((f".mixer.{name}", "attention") for name in ("q_proj", "k_proj", "v_proj", "o_proj")),
        *((f".mixer.{name}", "linear_attention")
          for name in ("in_proj", "conv1d", "dt_bias", "A_log", "D", "norm", "out_proj")),
        (".mixer.experts.", "moe/experts"), (".mixer.shared_experts.", "moe/shared"),
        (".mixer.gate.", "moe/router"), (".mixer.", "mlp"),
        (".mlp.experts.", "moe/experts"), (".mlp.shared_expert", "moe/shared"),  # + _gate, -s
        (".mlp.gate.", "moe/router"), (".mlp.router.", "moe/router"), (".mlp.", "mlp"),
        # Llama 4 names its MLP block feed_forward
        (".feed_forward.experts.", "moe/experts"), (".feed_forward.shared_expert.", "moe/shared"),
        (".feed_forward.router.", "moe/router"), (".feed_forward.", "mlp"),
        # Gemma 4's MoE block hangs off the decoder layer itself
        (".experts.", "moe/experts"), (".router.", "moe/router"),
    ]
    return next((group for marker, group in rules if marker in name), "norm")


def _our_group(key: str) -> str:
    return key.split("/")[0] if key.startswith(("attention/", "mlp/", "linear_attention/")) else key


@cache
def _transformers_counts(path: Path) -> tuple[dict[str, int], int, int]:
    """(params by coarse group, routed experts E, top-k) of the transformers model of `path`."""
    config = transformers_config(path)
    model = meta_model(config)
    groups: dict[str, int] = {}
    text = config.get_text_config()  # the language model's config (Llama 4 wraps it)
    types = getattr(text, "layer_types", None) or []
    for name, parameter in model.named_parameters():  # unique: a tied lm_head appears once
        group = _transformers_group(name)
        layer = re.search(r"\.layers\.(\d+)\.", name)
        kind = types[int(layer.group(1))] if layer and int(layer.group(1)) < len(types) else None
        if group == "attention" and kind == "linear_attention":
            group = "linear_attention"  # Kimi Linear names its KDA module self_attn too
        if group == "mlp" and getattr(text, "enable_moe_block", False):
            group = "moe/shared"  # Gemma 4: the MLP beside the experts is our shared expert
        groups[group] = groups.get(group, 0) + parameter.numel()
    experts = getattr(text, "num_local_experts", 0) or getattr(text, "num_experts", 0) or 0
    top_k = getattr(text, "num_experts_per_tok", 0) or getattr(text, "top_k_experts", 0) or 0
    return groups, experts, top_k  # Gemma 4 names its top-k `top_k_experts`


@pytest.mark.parametrize("path", CONFIG_FILES, ids=[path.stem for path in CONFIG_FILES])
def test_counts_equal_transformers_meta_model(path):
    groups, experts, top_k = _transformers_counts(path)
    counts = count_params(load_architecture(path))
    ours: dict[str, int] = {}
    for key in BREAKDOWN_KEYS:
        ours[_our_group(key)] = ours.get(_our_group(key), 0) + counts[key]
    # source: sum(p.numel() for p in model.parameters()) of transformers 5.24; tolerance 0
    assert counts.total_params == sum(groups.values())
    assert {key: value for key, value in ours.items() if value} == groups
    inactive = groups.get("moe/experts", 0) * (experts - top_k) // experts if experts else 0
    assert counts.active_params == counts.total_params - inactive


# ---- published numbers ---------------------------------------------------------------------------

PUBLISHED = [
    # (config, quantity, published value, tolerance, source)
    ("gemma-2-2b", "non_embedding_params", 2_024_517_888, 0,
     "Gemma 2 report (arXiv:2408.00118) Table 2"),
    ("gemma-2-9b", "non_embedding_params", 8_324_201_984, 0,
     "Gemma 2 report Table 2; validation CSV notes"),
    ("Llama-3.2-1B", "total_params", 1.23 * B, 0.01 * B, "Meta Llama 3.2 model card: 1.23B"),
    ("Qwen2.5-0.5B", "total_params", 0.49 * B, 0.005 * B, "Qwen2.5-0.5B model card: 0.49B"),
    ("Qwen2.5-0.5B", "non_embedding_params", 0.36 * B, 0.005 * B,
     "Qwen2.5-0.5B card: 0.36B non-embedding"),
    ("Qwen3-0.6B", "total_params", 0.6 * B, 0.005 * B, "Qwen3-0.6B model card: 0.6B"),
    ("Qwen3-0.6B", "non_embedding_params", 0.44 * B, 0.005 * B,
     "Qwen3-0.6B card: 0.44B non-embedding"),
    ("gpt-oss-20b", "total_params", 20.91 * B, 0.005 * B,
     "gpt-oss model card (arXiv:2508.10925) Table 1"),
    ("gpt-oss-20b", "active_without_embedding", 3.61 * B, 0.005 * B,
     "same table (unembedding counted)"),
    ("Moonlight-16B-A3B", "non_embedding_params", 15.29 * B, 0.005 * B,
     "Moonlight (arXiv:2502.16982)"),
    ("Moonlight-16B-A3B", "active_non_embedding", 2.24 * B, 0.005 * B,
     "Moonlight: 2.24B activated"),
    # Meta's Llama 4 model cards: 17B active, 109B (Scout) / 400B (Maverick) total with the vision
    # encoder, which archscout does not model (the text model alone is 107.8B / 400.7B)
    ("serving_Llama-4-Scout-17B-16E-Instruct", "active_params", 17 * B, 0.5 * B, "Llama 4 card"),
    ("serving_Llama-4-Maverick-17B-128E-Instruct", "active_params", 17 * B, 0.5 * B,
     "Llama 4 card"),
    ("serving_Llama-4-Maverick-17B-128E-Instruct", "total_params", 400 * B, 2 * B, "Llama 4 card"),
]


def _quantity(stem: str, quantity: str) -> int:
    counts = count_params(_load(stem))
    derived = {
        "active_without_embedding": counts.active_params - counts.embedding_params,
        "active_non_embedding": (counts.active_params - counts.embedding_params
                                 - counts.lm_head_params),
    }
    return derived[quantity] if quantity in derived else getattr(counts, quantity)


@pytest.mark.parametrize(
    ("stem", "quantity", "published", "tolerance", "source"),
    PUBLISHED,
    ids=[f"{case[0]}-{case[1]}" for case in PUBLISHED],
)
def test_counts_match_published_numbers(stem, quantity, published, tolerance, source):
    assert abs(_quantity(stem, quantity) - published) <= tolerance, source


def test_breakdown_is_a_read_only_named_mapping():
    counts = count_params(_load("Mixtral-8x7B-v0.1"))
    assert list(counts) == [*BREAKDOWN_KEYS, "total"]
    assert counts["total"] == sum(counts.parts.values()) == counts.total_params
    assert counts["moe/router"] == 32 * 8 * 4096  # one 4096 -> 8 router per layer, no bias
    with pytest.raises(TypeError):
        counts.parts["total"] = 0  # type: ignore[index]


# ---- FLOPs per token -----------------------------------------------------------------------------


def _has_biases(arch: Architecture) -> bool:
    return any((arch.attention.qkv_bias, arch.attention.o_bias, arch.ffn.mlp_bias,
                arch.ffn.router_bias, arch.ffn.expert_bias))


# biases are parameters but not GEMM weights
BIAS_FREE = [path for path in CONFIG_FILES if not _has_biases(load_architecture(path))]


@pytest.mark.parametrize("path", BIAS_FREE, ids=[path.stem for path in BIAS_FREE])
def test_matmul_flop_is_two_per_active_weight(path):
    arch = load_architecture(path)
    counts = count_params(arch)
    not_gemm = (counts.embedding_params + counts["norm"] + counts["attention/norm"]
                + counts["attention/sinks"])
    # Gated DeltaNet: the depthwise conv, dt_bias, A_log and its norm are not GEMM weights
    not_gemm += counts["linear_attention/conv"] + counts["linear_attention/other"]
    # Gemma 4's router scales (H + E per MoE layer, in moe/router) multiply, they are no GEMM
    not_gemm += (arch.ffn.router_scales * arch.num_moe_layers
                 * (arch.hidden_size + arch.ffn.num_experts))
    tied_head = arch.vocab_size * arch.hidden_size if arch.tie_word_embeddings else 0
    # Kaplan et al. 2020 (arXiv:2001.08361) Table 1: C_forward = 2N (N: active non-embedding
    # weights, plus the output projection); tolerance 0
    assert matmul_flop_per_token(arch) == 2 * (counts.active_params - not_gemm + tied_head)


# ---- families users benchmark (issue 14): published totals, hand counts -------------------------

PUBLISHED_NEW = [
    # (config, quantity, published value, tolerance, source); embeddings and LM head count in
    # "total"; "active" cards quote without them where the row says so
    ("DeepSeek-V3.2", "total_params", 671 * B, 1 * B,
     "DeepSeek-V3.2-Exp report: 671B (685B on the Hub counts the 14B MTP module)"),
    ("GLM-5", "total_params", 744 * B, 1 * B,
     "zai-org/GLM-5 model card: 744B parameters (40B active)"),
    ("GLM-5", "active_non_embedding", 40 * B, 0.5 * B, "same card: 40B active"),
    ("Kimi-K2-Instruct", "total_params", 1.04e12, 0.02e12, "Kimi K2 model card: 1T total (1.04T)"),
    ("Kimi-K2-Instruct", "active_params", 32 * B, 1 * B, "Kimi K2 model card: 32B activated"),
    ("MiniMax-M2.5", "total_params", 230 * B, 2 * B, "MiniMax-M2 model card: 230B total"),
    ("MiniMax-M2.5", "active_non_embedding", 10 * B, 0.5 * B, "MiniMax-M2 model card: 10B active"),
    ("Llama-3_3-Nemotron-Super-49B-v1", "total_params", 49.9 * B, 0.05 * B,
     "nvidia/Llama-3_3-Nemotron-Super-49B-v1 on the Hub: 49.9B params (safetensors)"),
]


@pytest.mark.parametrize(
    ("stem", "quantity", "published", "tolerance", "source"),
    PUBLISHED_NEW,
    ids=[f"{case[0]}-{case[1]}" for case in PUBLISHED_NEW],
)
def test_new_families_match_published_numbers(stem, quantity, published, tolerance, source):
    assert abs(_quantity(stem, quantity) - published) <= tolerance, source


def test_nemotron_super_49b_hand_count():
    """transformers 5.x has no Nemotron-NAS (DeciLM) class; the Hub repo's remote code
    (modeling_decilm.py, as vLLM's nemotron_nas.py) builds per layer: attention (q, k, v, o of
    a Llama layer with 64 / n_heads_in_group = 8 KV heads, and its input RMSNorm) unless
    `attention.no_op`, and a SwiGLU of int(2·ffn_mult·H/3) rounded up to 256 (with its
    post-attention RMSNorm) unless `ffn.no_op`. Llama-3.3-Nemotron-Super-49B-v1 (H 8192, 80
    layers, vocabulary 128,256, untied):
      embedding = LM head = 128,256 · 8,192 = 1,050,673,152 each;
      49 attention layers · (2 · 8192² + 2 · 8 · 128 · 8192) = 49 · 150,994,944 = 7,398,752,256;
      FFN widths: 28,672 (ffn_mult 5.25) x 49, 14,336 (2.625) x 6, 7,168 (1.3125) x 10,
      5,632 (1.0) x 8, 2,816 (0.5) x 6, 17,920 (3.28125) x 1: Σ = 1,642,496, times 3 · 8,192
      = 40,365,981,696;
      norms: (49 + 80 + 1 final) · 8,192 = 1,064,960;
      total = 49,867,145,216 (the Hub's safetensors: 49.9B)."""
    arch = _load("Llama-3_3-Nemotron-Super-49B-v1")
    counts = count_params(arch)
    assert (arch.num_attention_layers, arch.num_dense_layers, arch.attention.num_kv_heads) == \
        (49, 80, 8)
    assert counts.embedding_params == counts.lm_head_params == 1_050_673_152
    assert counts["attention/q"] + counts["attention/kv"] + counts["attention/o"] == 7_398_752_256
    assert counts["mlp/gate"] + counts["mlp/up"] + counts["mlp/down"] == 40_365_981_696
    assert counts["norm"] == 1_064_960
    assert counts.total_params == counts.active_params == 49_867_145_216
    assert matmul_flop_per_token(arch) == 2 * (counts.total_params - counts.embedding_params
                                                - counts["norm"])


def test_kimi_k25_text_model_is_kimi_k2():
    """Kimi-K2.5's language model is Kimi-K2's (DeepSeek-V3's architecture, 384 experts)."""
    k25, k2 = _load("Kimi-K2.5"), _load("Kimi-K2-Instruct")
    assert count_params(k25).total_params == count_params(k2).total_params == 1_026_408_209_408
    assert (k25.family, k25.ffn.num_experts, k25.attention.attention_kind) == \
        ("kimi_k2", 384, "mla")


def test_dsa_indexer_breakdown():
    """DeepSeek-V3.2's indexer per layer: wq_b 1536 → 64·128, wk 7168 → 128, weights_proj
    7168 → 64 (+ a LayerNorm of 2·128 counted with the norms)."""
    arch = _load("DeepSeek-V3.2")
    per_layer = 1536 * 64 * 128 + 7168 * 128 + 7168 * 64
    assert count_params(arch)["attention/indexer"] == 61 * per_layer
