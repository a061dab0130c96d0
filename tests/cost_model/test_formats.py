"""Number formats as deployed: weight-only w4a16 / w8a16 and per-component precision (routed
experts in `moe_precision`, the other linear layers in `precision`), in GEMM rates, step times,
memory and the hardware checks; gpt-oss-120b's exact parameter count."""

from dataclasses import replace

import numpy as np
import pytest

from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import Deployment, Workload, make_deployment
from cost_model.efficiency import get_efficiency
from cost_model.errors import ConfigError
from cost_model.evaluate import evaluate_points
from cost_model.gemm import GemmRates
from cost_model.hardware import get_hardware
from cost_model.hf import load_architecture
from cost_model.layers import GemmList, attention_gemms, ffn_gemms
from cost_model.memory import weight_bytes_per_gpu
from cost_model.params import count_params
from cost_model.precision import get_precision
from cost_model.step_load import StepLoad
from cost_model.units import gemm_flop

from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

H200, B200 = get_hardware("h200"), get_hardware("b200")
GPT_OSS_120B = HF_CONFIGS / "gpt-oss-120b.json"
DEEPSEEK_V3 = MODEL_CONFIGS / "DeepSeek-V3.json"
B = 1e9


def _weights(path, hw, dep) -> float:
    a = ArchArrays.from_architectures([load_architecture(path)])
    d = DeployArrays.from_deployments([dep])
    return float(weight_bytes_per_gpu(a, d, Env.for_deployments(hw, [dep]))[0, 0])


# ---- the formats --------------------------------------------------------------------------------


def test_weight_only_formats_store_low_bit_weights_and_bf16_activations():
    """w4a16: MXFP4 weights, 4 + 8/32 = 4.25 bits (OCP MX v1.0); w8a16: 8 bits; both BF16
    activations (2 bytes) at the BF16 tensor-core rate."""
    w4, w8 = get_precision("w4a16"), get_precision("w8a16")
    assert w4.weight_bytes_per_value == 4.25 / 8 and w8.weight_bytes_per_value == 1.0
    assert w4.activation_bytes_per_value == w8.activation_bytes_per_value == 2.0
    assert w4.tensor_core_rate == w8.tensor_core_rate == "bf16"
    assert w4.weight_only and not get_precision("nvfp4").weight_only


@pytest.mark.parametrize("name", ["w4a16", "w8a16"])
def test_weight_only_rates_are_bf16_but_the_weight_bytes(name):
    """The GEMMs of a weight-only format are the GPU's BF16 GEMMs (peak, efficiency, no
    activation quantization) on the format's weight bytes."""
    env = Env.create(H200, name, "bf16")
    bf16 = GemmRates.of(H200, get_precision("bf16"))
    rates = env.linear_rates
    assert rates.b_bytes_per_value == get_precision(name).weight_bytes_per_value
    for field in ("peak_flop_per_s", "compute_ceiling_frac", "k_half_dim", "fixed_overhead_s",
                  "a_bytes_per_value", "quantize_bytes_per_value"):
        assert getattr(rates, field) == getattr(bf16, field), field


def test_kv_cache_default_follows_attention_activations():
    """FP8 KV by default when attention computes in 8 bits or less; a weight-only format
    computes in BF16, so its KV stays BF16; the experts' format does not change it."""
    assert Deployment(precision="fp8", moe_precision="nvfp4").kv_cache_precision == "fp8"
    assert Deployment(precision="w4a16").kv_cache_precision == "bf16"
    assert Deployment(precision="bf16", moe_precision="w4a16").kv_cache_precision == "bf16"
    assert Deployment(precision="fp8_block").kv_cache_precision == "fp8"


def test_moe_precision_defaults_to_precision():
    dep = Deployment(precision="fp8")
    assert dep.moe_precision is None and dep.expert_precision == "fp8"
    assert not Env.for_deployments(H200, [dep]).mixed_experts


@pytest.mark.parametrize(("hw", "fields", "field"), [
    (H200, dict(precision="fp8", moe_precision="nvfp4"), "moe_precision"),
    (H200, dict(precision="nvfp4", moe_precision="w4a16"), "precision"),
], ids=["nvfp4-experts-on-hopper", "nvfp4-attention-on-hopper"])
def test_hardware_support_is_checked_per_component(hw, fields, field):
    """Hopper has no FP4 tensor cores: the error names the component's field."""
    dep = make_deployment(**fields)
    with pytest.raises(ConfigError, match=f"`{field}` nvfp4 is not supported on h200"):
        Env.for_deployments(hw, [dep])


def test_unknown_moe_precision_names_the_field():
    with pytest.raises(ConfigError, match="`moe_precision` must be one of"):
        make_deployment(moe_precision="int3")


# ---- golden weights per GPU ---------------------------------------------------------------------


def test_weights_deepseek_v3_nvfp4_experts_fp8_attention_8_b200():
    """DeepSeek-V3 (H 7168, 61 layers: 3 dense of H′ 18,432 and 58 MoE of 256 experts × 2,048 +
    one shared expert of 2,048; MLA: 128 heads, q_lora 1,536, kv_lora 512, rope 64, nope 128,
    v 128; vocab 129,280, untied) at tp 8, ep 8 (moe_tp 1) on B200, FP8 attention / dense /
    shared (1 byte), NVFP4 routed experts (4.5 bits = 0.5625 byte), BF16 router and vocab:
    MLA per layer at 16 heads: 7168·1536 + 1536·16·192 + 7168·576 + 512·16·256 + 16·128·7168 =
    36,634,624, × 61 = 2,234,712,064; dense 3 · 3·7168·18432/8 = 148,635,648; shared
    58 · 3·7168·2048/8 = 319,291,392; FP8 total 2,702,639,104 bytes. Experts 58 · 32·3·7168·2048
    = 81,738,596,352 values · 0.5625 = 45,977,960,448 bytes. Router 58·256·7168 = 106,430,464 and
    vocab 2·129280·7168/8 = 231,669,760 values · 2 = 676,200,448 bytes. Total 49,356,800,000."""
    dep = Deployment(tp=8, ep=8, precision="fp8", moe_precision="nvfp4")
    assert _weights(DEEPSEEK_V3, B200, dep) == 49_356_800_000


def test_weights_gpt_oss_120b_w4a16_experts_bf16_attention_8_h200():
    """gpt-oss-120b (H 2880, 36 layers, 64 q / 8 kv heads × 64, 128 experts × 2,880, top-4,
    vocab 201,088, untied) at tp 8, ep 8 on H200, BF16 attention, MXFP4 weight-only experts
    (4.25 bits = 0.53125 byte): attention per layer 2880·(8 + 2·1)·64 + 8·64·2880 = 3,317,760,
    × 36 · 2 bytes = 238,878,720; experts 36 · 16·3·2880·2880 = 14,332,723,200 values ·
    0.53125 = 7,614,259,200 bytes; router 36·128·2880 = 13,271,040 and vocab 2·201088·2880/8 =
    144,783,360 values · 2 = 316,108,800 bytes. Total 8,169,246,720. (The matrices' biases and
    attention sinks, 0.02% of the model, are not counted.)"""
    dep = Deployment(tp=8, ep=8, precision="bf16", moe_precision="w4a16")
    assert _weights(GPT_OSS_120B, H200, dep) == 8_169_246_720


def test_gpt_oss_120b_on_one_h200_is_its_checkpoint_size():
    """At TP 1 the same formats hold 65,168,179,200 bytes = 60.7 GiB: the MXFP4 checkpoint's
    ~60.8 GiB (gpt-oss model card, arXiv:2508.10925 §2: "the 120b model fits on a single 80GB
    GPU"); in BF16 it would not fit one H200 (141 GB)."""
    one = _weights(GPT_OSS_120B, H200, Deployment(precision="bf16", moe_precision="w4a16"))
    assert one == 65_168_179_200
    assert _weights(GPT_OSS_120B, H200, Deployment(precision="bf16")) > H200.hbm_capacity_bytes


# ---- gpt-oss-120b's exact count -----------------------------------------------------------------


def test_gpt_oss_120b_count_equals_transformers_meta_model():
    """tests/data/hf_configs/gpt-oss-120b.json is openai/gpt-oss-120b's config.json: the model
    transformers 5.x builds from it on the meta device has exactly our count."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.from_pretrained(GPT_OSS_120B)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    # source: sum(p.numel() for p in model.parameters()) of transformers 5.24; tolerance 0
    assert count_params(load_architecture(GPT_OSS_120B)).total_params == \
        sum(p.numel() for p in model.parameters()) == 116_829_156_672


def test_gpt_oss_120b_count_equals_the_model_card():
    """gpt-oss model card (arXiv:2508.10925) Table 1: 116.83B total, 5.13B active per token
    (the unembedding counted, the embedding not); tolerance 0.005B (the card's rounding)."""
    counts = count_params(load_architecture(GPT_OSS_120B))
    assert counts.total_params == pytest.approx(116.83 * B, abs=0.005 * B)
    assert counts.active_params - counts.embedding_params == pytest.approx(5.13 * B, abs=0.005 * B)


# ---- step times ---------------------------------------------------------------------------------

MODELS = {"gpt-oss-120b": GPT_OSS_120B, "Qwen3-30B-A3B": MODEL_CONFIGS / "Qwen3-30B-A3B.json",
          "Llama-3.1-8B": MODEL_CONFIGS / "Llama-3.1-8B.json"}


def _formats(stem: str, fmt: str) -> dict:
    """`fmt` for the experts of a MoE model (attention BF16), for every linear layer else."""
    return dict(precision="bf16", moe_precision=fmt) if load_architecture(MODELS[stem]).ffn.is_moe \
        else dict(precision=fmt)


@pytest.mark.parametrize("stem", MODELS)
@pytest.mark.parametrize("fmt", ["w4a16", "w8a16"])
def test_weight_only_decode_at_concurrency_1_beats_bf16(stem, fmt):
    """One sequence's decode reads every weight it touches once: fewer weight bytes, shorter
    TPOT (the reason weight-only formats exist), for the dense linear layers, which run the
    BF16 kernel model on narrower weights (a MoE model's experts kept in BF16: its attention
    projections at TP 8 are small enough for the kernel's floor to set their time, so never
    slower, not necessarily faster). Routed experts
    in a weight-only format run their own measured fused kernels, whose floors can outweigh the
    bytes at one token (TensorRT-LLM on H200: w4a16_mxfp4 gpt-oss-120b layer at EP 8, 73 µs at
    1 token; tests/cost_model/test_gemm_properties.py ranks formats as measured)."""
    arch, work = load_architecture(MODELS[stem]), Workload(isl_tokens=1024, osl_tokens=1024)
    deps = [Deployment(tp=8, ep=8 if arch.ffn.is_moe else 1, precision=name,
                       moe_precision="bf16" if arch.ffn.is_moe else None)
            for name in (fmt, "bf16")]
    tpot = evaluate_points([arch] * 2, deps, H200, work, np.array([1.0])).tpot_s[:, 0]
    assert tpot[0] <= tpot[1] if arch.ffn.is_moe else tpot[0] < tpot[1]


def _prefill_gemms(arch, dep, tokens: float) -> tuple[GemmList, Env]:
    a, d = ArchArrays.from_architectures([arch]), DeployArrays.from_deployments([dep])
    g = GemmList((1, 1))
    load = StepLoad.of(d, 0.0, tokens)
    attention_gemms(g, a, d, load, float(arch.num_layers))
    ffn_gemms(g, a, d, load, float(arch.num_dense_layers), float(arch.num_moe_layers))
    return g, Env.for_deployments(H200, [dep])


@pytest.mark.parametrize("stem", MODELS)
def test_w4a16_large_batch_prefill_is_not_faster_than_bf16_math(stem):
    """A 16,384-token prefill step is compute-bound: w4a16 runs BF16 math, so each of its
    weight-only GEMMs takes at least its FLOPs at the BF16 peak; a dense one (BF16's kernel
    model on narrower weights) no longer than the BF16 GEMM; it is slower than FP8, which has
    twice the rate. (Experts: each format's fused kernels as measured.)"""
    arch = load_architecture(MODELS[stem])
    times = {}
    for fmt in ("w4a16", "bf16", "fp8"):
        formats = _formats(stem, fmt) if fmt != "fp8" else dict(precision="fp8")
        g, env = _prefill_gemms(arch, Deployment(**formats), 16_384.0)
        times[fmt] = g.times_s(env)
    rows = [i for i, (name, moe) in enumerate(zip(g.names, g.moe))
            if moe or not arch.ffn.is_moe and not g.high[i]]
    assert rows
    for i in rows:
        m, n, k, groups, count = (float(np.ravel(x)[0]) for x in g.dims[i])
        if count == 0 or m * n * k == 0:
            continue
        name = g.names[i]
        w4, bf16, fp8 = (float(np.ravel(times[f][name])[0]) for f in ("w4a16", "bf16", "fp8"))
        math_s = float(gemm_flop(m, n, k)) * groups * count / H200.peak_for(get_precision("bf16"))
        assert math_s <= w4, name
        assert g.moe[i] or w4 <= bf16 * (1 + 1e-6), name
        assert fp8 < w4, name


def test_expert_rows_use_the_expert_format_and_the_rest_the_linear_one():
    """NVFP4 experts with FP8 attention on B200: the expert GEMMs equal those of an all-NVFP4
    deployment, every other row those of an all-FP8 one."""
    arch = load_architecture(DEEPSEEK_V3)
    get = lambda **f: _decode_times(arch, Deployment(tp=8, ep=8, **f))  # noqa: E731
    mixed, nvfp4, fp8 = get(precision="fp8", moe_precision="nvfp4"), get(precision="nvfp4"), \
        get(precision="fp8")
    for name, value in mixed.items():
        expected = nvfp4 if name.startswith("moe/experts") else fp8
        np.testing.assert_allclose(value, expected[name], rtol=1e-6, err_msg=name)
    assert mixed["moe/experts_up"] != fp8["moe/experts_up"]


def _decode_times(arch, dep) -> dict:
    a, d = ArchArrays.from_architectures([arch]), DeployArrays.from_deployments([dep])
    g = GemmList((1, 1))
    load = StepLoad.of(d, 64.0, 0.0)
    attention_gemms(g, a, d, load, float(arch.num_layers))
    ffn_gemms(g, a, d, load, float(arch.num_dense_layers), float(arch.num_moe_layers))
    times = g.times_s(Env.for_deployments(B200, [dep]))
    return {k: float(np.ravel(v)[0]) for k, v in times.items()}


def test_mixed_formats_vectorize_like_one_at_a_time():
    """A batch mixing expert formats (FormatColumn) gives each candidate its own result."""
    arch = load_architecture(MODEL_CONFIGS / "Qwen3-30B-A3B.json")
    deps = [Deployment(tp=2, ep=2, precision="fp8", moe_precision=m)
            for m in ("nvfp4", None, "w4a16", "fp8_block")]
    work = Workload(isl_tokens=1024, osl_tokens=256)
    together = evaluate_points([arch] * 4, deps, B200, work, np.array([1.0, 64.0]))
    for i, dep in enumerate(deps):
        alone = evaluate_points([arch], [dep], B200, work, np.array([1.0, 64.0]))
        np.testing.assert_allclose(together.tpot_s[i], alone.tpot_s[0], rtol=1e-6)
        np.testing.assert_allclose(together.max_concurrency[i], alone.max_concurrency[0])


def test_prefill_with_an_fp8_kv_cache_by_hand(load_model):
    """One prefill attention layer of Llama-3.1-8B (32 query / 8 KV heads of 128) on one H200,
    one 4,096-token prompt (mean context 2,048.5 keys), with every kernel term neutral but the
    compute fraction 0.5, a 10 µs floor and `prefill_quantized_kv_frac` 0.8: the math is
    4096 · 2048.5 · 32 · 4·128 = 137,472,507,904 FLOP at 0.5 · 989.4 TFLOP/s = 277.8907 µs (the
    K/V re-reads, 32 tiles · 2048.5 · 4,096 B = 268.5 MB at 4.8 TB/s = 55.94 µs, are hidden).
    BF16 KV: 10 + 277.8907 = 287.8907 µs; FP8 KV: 10 + 0.8 · 277.8907 = 232.3126 µs."""
    from cost_model.attention import prefill_attention_s

    llama = load_model("Llama-3.1-8B")
    a, d = ArchArrays.from_architectures([llama]), DeployArrays.from_deployments([Deployment()])
    base = get_efficiency("h200", "trtllm").model_copy(update=dict(
        prefill_attention_compute_frac=0.5, prefill_attention_fixed_overhead_s=10e-6,
        prefill_attention_per_tile_s=0.0, prefill_attention_per_token_s=0.0,
        prefill_quantized_kv_frac=0.8))
    times = {}
    for kv in ("bf16", "fp8"):
        env = replace(Env.create(H200, "bf16", kv), eff=base)
        times[kv] = float(prefill_attention_s(a, d, env, 4096.0, 2048.5)[0, 0]) * 1e6
    assert times == pytest.approx({"bf16": 287.8907, "fp8": 232.3126}, rel=1e-6)
