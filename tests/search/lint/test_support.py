"""search/lint/support.py: the fields of each GEMM come from the table of sharded weight GEMMs."""

from cost_model import Deployment, load_architecture
from search.lint.support import gemm_fields, model_gemms, small_dim_field, weight_gemms
from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS


def test_gqa_fields():
    arch = load_architecture(MODEL_CONFIGS / "Llama-3.1-8B.json")
    assert gemm_fields(arch, "attention/qkv") == (
        ("num_attention_heads", "head_dim", "num_kv_heads"), ("hidden_size",))
    assert gemm_fields(arch, "mlp/down") == (("hidden_size",), ("intermediate_size",))


def test_mla_fields_follow_the_model():
    """MLA's o_proj reads n_q·v_head_dim (head_dim is nope + rope there); without a query LoRA
    q_b reads the hidden state (Moonlight-16B-A3B: q_lora_rank 0)."""
    arch = load_architecture(MODEL_CONFIGS / "DeepSeek-V3.json")
    assert gemm_fields(arch, "attention/o")[1] == ("num_attention_heads", "v_head_dim")
    assert gemm_fields(arch, "attention/q_b")[1] == ("q_lora_rank",)
    moonlight = load_architecture(HF_CONFIGS / "Moonlight-16B-A3B.json")
    assert moonlight.attention.q_lora_rank == 0
    assert gemm_fields(moonlight, "attention/q_b")[1] == ("hidden_size",)
    gemm = next(g for g in weight_gemms(moonlight, Deployment()) if g.name == "attention/q_b")
    # N = 16·(128 + 64) = 3072 > K = 2048: the smaller dim is K, set by hidden_size
    assert (gemm.n, gemm.k) == (3072.0, 2048.0)
    assert small_dim_field(moonlight, gemm) == "hidden_size"


def test_absorbed_decode_gemms_are_not_weight_gemms():
    arch = load_architecture(MODEL_CONFIGS / "DeepSeek-V3.json")
    names = {g.name for g in model_gemms(arch, Deployment(tp=8))}
    assert {"attention/absorb_k", "attention/absorb_v"} <= names
    assert not {"attention/absorb_k", "attention/absorb_v"} & \
        {g.name for g in weight_gemms(arch, Deployment(tp=8))}
