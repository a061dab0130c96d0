"""Aggregated serving's schedule as properties over the whole catalog (cost_model/serving_steps.py,
step_load.PromptSchedule, evaluate's attention groups): hypothesis draws the GPU, the format,
the model, the deployment, the workload and the concurrency.

- Dense attention-DP groups are independent replicas: DP d at c = d·n is one replica at n, and
  at any c never worse than one replica at its share (TPOT at most the replica's at ⌈c/d⌉,
  tokens/s/GPU at least the smaller of the replicas' at ⌊c/d⌋ and ⌈c/d⌉).
- MoE groups meet in every MoE layer, so they step in lockstep (no such independence); what
  holds there is that the balancer, which makes the groups prefill in the same steps, never
  raises TPOT.
- No step change: from c to c + 1 TPOT and tokens/s/GPU move by at most 2% beyond what one more
  sequence itself brings (its share of the busiest group, and the decode step's own change).
- A step never carries more than one budget of prompt tokens: past the requests whose prompts
  it absorbs, TPOT and throughput stay where they are and the wait shows in the TTFT.
- No NaN anywhere, for every layer pattern, including patterns without an attention layer.
"""

import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cost_model.architecture_parts import _LINEAR_FIELDS as LINEAR_FIELDS
from cost_model.architecture import Architecture, make_architecture
from cost_model.batch import ArchArrays, DeployArrays, Env
from cost_model.deployment import Deployment, Workload, deployment_violations
from cost_model.errors import ConfigError
from cost_model.evaluate import evaluate_points
from cost_model.operating_points import OperatingPoints
from cost_model.hardware import catalog_names, get_hardware
from cost_model.hf import load_architecture
from cost_model.precision import PRECISIONS
from cost_model.serving_steps import (
    ServingShape, budget_decode_seqs, budget_wait_s, rank_budget_tokens, serving_steps,
)
from cost_model.step import stage_forward_load
from cost_model.step_load import busiest_group_seqs

from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

GPUS = catalog_names()
DENSE = ("Llama-3.1-8B", "Mistral-7B-v0.1", "gemma-2-9b", "Phi-3-mini-4k-instruct")
MOE = ("Qwen3-30B-A3B", "Mixtral-8x7B-v0.1", "DeepSeek-V3")
FORMATS = ("bf16", "fp8", "nvfp4")
PROPERTY = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
F32_REL = 1e-5  # step times compute in float32 (cost_model.gemm.HOT_DTYPE)
STEP_CHANGE_FRAC = 0.02  # issue 24: no more than 2% beyond one sequence's own share
ENGINES = (None, "vllm", "sglang", "trtllm")
WORKLOADS = st.builds(Workload, isl_tokens=st.sampled_from([128, 1024, 8192, 32_768]),
                      osl_tokens=st.sampled_from([16, 256, 1024, 8192]),
                      engine=st.sampled_from(ENGINES),
                      adp_balance_timeout_steps=st.sampled_from([0, 60]))


@functools.cache
def model(stem: str) -> Architecture:
    path = MODEL_CONFIGS / f"{stem}.json"
    return load_architecture(path if path.exists() else HF_CONFIGS / f"{stem}.json")


@st.composite
def gpu_and_format(draw):
    gpu = draw(st.sampled_from(GPUS))
    formats = [f for f in FORMATS if get_hardware(gpu).supports(PRECISIONS[f])]
    return gpu, draw(st.sampled_from(formats))


@st.composite
def deployment_of(draw, arch, precision, dp_choices=(1, 2, 4, 8)):
    """A valid deployment: TP among the divisors the model allows, DP, PP and (MoE) EP = DP."""
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if not deployment_violations(
        arch, Deployment(tp=t, precision=precision))]))
    dp = draw(st.sampled_from(dp_choices))
    pp = draw(st.sampled_from([1, 2]))
    dep = Deployment(tp=tp, dp=dp, pp=pp, ep=dp if arch.ffn.is_moe else 1, precision=precision)
    assume(not deployment_violations(arch, dep))
    return dep


def points(arch, dep, hw, workload, concurrency) -> OperatingPoints:
    return evaluate_points([arch], [dep], hw, workload, np.asarray(concurrency, float))


@PROPERTY
@given(gpu_and_format(), st.sampled_from(DENSE), st.sampled_from([2, 4, 8]), st.data(),
       WORKLOADS, st.integers(1, 600))
def test_dense_dp_groups_are_replicas(hw_format, stem, dp, data, workload, concurrency):
    """DP d at c = d·n equals one replica (dp 1) at n; at any c its TPOT is at most the replica's
    at ⌈c/d⌉ and its tokens/s/GPU at least the smaller of the replica's at ⌊c/d⌋ and ⌈c/d⌉ (the
    fuller and the lighter groups of the mix)."""
    gpu, precision = hw_format
    hw, arch = get_hardware(gpu), model(stem)
    dep = data.draw(deployment_of(arch, precision, (dp,)))
    one = dep.model_copy(update={"dp": 1})
    n_lo, n_hi = concurrency // dp, -(-concurrency // dp)
    many = points(arch, dep, hw, workload, [dp * n_hi, concurrency])
    replica = points(arch, one, hw, workload, [n_hi, max(n_lo, 1)])
    for field in ("tpot_s", "ttft_s", "tokens_per_s_per_gpu"):
        assert getattr(many, field)[0, 0] == pytest.approx(getattr(replica, field)[0, 0],
                                                           rel=F32_REL)
    assert many.tpot_s[0, 1] <= replica.tpot_s[0, 0] * (1 + F32_REL)
    if n_lo >= 1:
        floor = min(replica.tokens_per_s_per_gpu[0])
        assert many.tokens_per_s_per_gpu[0, 1] >= floor * (1 - F32_REL)


@PROPERTY
@given(gpu_and_format(), st.sampled_from(MOE), st.sampled_from([2, 4, 8]), st.data(),
       WORKLOADS, st.sampled_from([8.0, 64.0, 256.0, 1024.0]))
def test_the_balancer_never_raises_moe_tpot(hw_format, stem, dp, data, workload, concurrency):
    """MoE groups step together; with the balancer their chunks land in the same steps, so a
    step carrying prompts is rarer (s = ρ instead of 1 − (1 − ρ)^g) and the prompt work per
    step is the same: TPOT never rises (within float32 rounding and a 1% allowance for a GEMM
    tile the larger prompt step may spill into)."""
    gpu, precision = hw_format
    hw, arch = get_hardware(gpu), model(stem)
    dep = data.draw(deployment_of(arch, precision, (dp,)))
    off = workload.model_copy(update={"adp_balance_timeout_steps": 0})
    on = workload.model_copy(update={"adp_balance_timeout_steps": 60})
    tpot = [points(arch, dep, hw, w, [concurrency]).tpot_s[0, 0] for w in (off, on)]
    assert tpot[1] <= tpot[0] * 1.01


def _decode_step_s(arch, dep, hw, workload, concurrency):
    """The decode-only step of the serving schedule (no prompt), per candidate."""
    a, d = ArchArrays.from_architectures([arch]), DeployArrays.from_deployments([dep])
    shape = ServingShape.of(workload)
    steps = serving_steps(a, d, np.asarray([[concurrency]], float), shape,
                             float(workload.osl_tokens))
    env = Env.for_deployments(hw, [dep], workload.engine)
    return float(stage_forward_load(a, d, env, steps.load, steps.decode_context_tokens,
                                    steps.prompt_context_tokens).part(0).total_s[0, 0])


def _boundaries(arch, dep, workload) -> list[int]:
    """Concurrencies just below where a prompt share reaches one chunk: the micro-batch's
    (m · ISL/OSL = chunk) and the busiest group's (n · ISL/OSL = chunk)."""
    a, d = ArchArrays.from_architectures([arch]), DeployArrays.from_deployments([dep])
    shape = ServingShape.of(workload)
    budget = float(rank_budget_tokens(a, d, shape)[0, 0])
    chunk = shape.isl_tokens / np.ceil(shape.isl_tokens / budget)
    per_seq = shape.isl_tokens / shape.osl_tokens  # prompt tokens per sequence per step
    micro = int(np.ceil(chunk / per_seq))
    return [max(dep.pp * micro - 1, 1), max(dep.pp * dep.dp * micro - 1, 1)]


@PROPERTY
@given(gpu_and_format(), st.sampled_from(DENSE + MOE), st.data(), WORKLOADS,
       st.one_of(st.integers(1, 3000), st.sampled_from(["instance", "group"])))
def test_one_more_request_makes_no_step_change(hw_format, stem, data, workload, concurrency):
    """c → c + 1 (within the memory limit), at random and just below where the micro-batch's or
    the busiest group's prompt share reaches one chunk: TPOT rises by at most 2% plus what the
    extra sequence brings by itself, its share of the busiest group or of the micro-batch whose
    prompts the lockstep groups share (max(n′/n, m′/m) − 1), and the decode step's own change
    (A′/A − 1, e.g. a GEMM tile it spills into); tokens/s/GPU falls by no more than TPOT rises
    and gains no more than the extra request (1/c) plus 2%. Dense DP > 1 is a mix of replicas
    (`test_dense_dp_groups_are_replicas`); here one group kind at a time."""
    gpu, precision = hw_format
    hw, arch = get_hardware(gpu), model(stem)
    dep = data.draw(deployment_of(arch, precision, (1, 2, 4, 8) if arch.ffn.is_moe else (1,)))
    if isinstance(concurrency, str):
        concurrency = _boundaries(arch, dep, workload)[concurrency == "group"]
    c = np.array([concurrency, concurrency + 1], float)
    p = points(arch, dep, hw, workload, c)
    assume(bool(np.all(p.fits_memory)))
    micro = busiest_group_seqs(c, dep.pp)
    group = busiest_group_seqs(micro, dep.dp)
    share = max(group[1] / group[0], micro[1] / micro[0]) - 1.0
    decode = [_decode_step_s(arch, dep, hw, workload, x) for x in c]
    allowance = STEP_CHANGE_FRAC + share + max(decode[1] / decode[0] - 1.0, 0.0)
    tpot, y = p.tpot_s[0], p.tokens_per_s_per_gpu[0]
    assert tpot[1] <= tpot[0] * (1.0 + allowance)
    assert y[1] >= y[0] * (1.0 - allowance)
    assert y[1] <= y[0] * (1.0 + STEP_CHANGE_FRAC + 1.0 / concurrency)


def test_the_deepseek_chunk_boundary_of_issue_24():
    """DeepSeek-V3 on B200, DEP8, FP8 attention and NVFP4 experts, 1k/1k: c = 1,023 → 1,024 used
    to jump TPOT 39.6 → 47.0 ms (every step was charged a whole chunk once the instance's prompt
    share reached one); both now hold the same busiest group (128) and prompt share."""
    arch = model("DeepSeek-V3")
    dep = Deployment(tp=1, dp=8, ep=8, precision="fp8_block", moe_precision="nvfp4")
    p = points(arch, dep, get_hardware("b200"), Workload(), [1023.0, 1024.0])
    assert p.tpot_s[0, 1] == pytest.approx(p.tpot_s[0, 0], rel=1e-3)
    assert p.tokens_per_s_per_gpu[0, 1] >= p.tokens_per_s_per_gpu[0, 0]


# ---- the step budget ----------------------------------------------------------------------


def test_budget_cap_by_hand():
    """MLPerf Llama-3.1-8B (871 prompt tokens, 129 output tokens, one per step) under an
    8,192-token budget: a group keeps ⌊8192 · 129 / 871⌋ = ⌊1213.3⌋ = 1213 requests decoding.
    Half as many more wait (0.5 per decoding one) for half a decoding request's lifetime:
    TTFT 100 ms and TPOT 60 ms give max(0.1 + 128 · 0.06, 129 · 0.06) = 7.78 s, so 3.89 s; at
    TTFT 20 ms the OSL steps bound it, 129 · 0.06 = 7.74 s, so 3.87 s. A prompt longer than the
    budget still leaves one request decoding."""
    assert float(budget_decode_seqs(8192.0, 871.0, 129.0)) == 1213.0
    assert float(budget_wait_s(0.5, 0.100, 0.060, 129.0)) == pytest.approx(3.89, rel=1e-12)
    assert float(budget_wait_s(0.5, 0.020, 0.060, 129.0)) == pytest.approx(3.87, rel=1e-12)
    assert float(budget_decode_seqs(2048.0, 1_000_000.0, 16.0)) == 1.0


@PROPERTY
@given(gpu_and_format(), st.sampled_from(DENSE + MOE), st.data(), WORKLOADS,
       st.sampled_from([1.0, 64.0, 1024.0, 16_384.0]))
def test_a_step_never_carries_more_than_its_budget(hw_format, stem, data, workload,
                                                    concurrency):
    """The prompt tokens the busiest group absorbs per step, and those of a step that carries
    prompts, are at most the rank's budget (every engine caps a forward at it)."""
    gpu, precision = hw_format
    arch = model(stem)
    dep = data.draw(deployment_of(arch, precision))
    a, d = ArchArrays.from_architectures([arch]), DeployArrays.from_deployments([dep])
    shape = ServingShape.of(workload)
    steps = serving_steps(a, d, np.asarray([[concurrency]], float), shape,
                          float(workload.osl_tokens))
    budget = rank_budget_tokens(a, d, shape)
    plan = steps.schedule
    assert np.all(plan.group_tokens_per_step <= budget * (1 + 1e-9))
    assert np.all(plan.group_step_tokens <= budget * (1 + 1e-9))


@PROPERTY
@given(gpu_and_format(), st.sampled_from(DENSE), st.sampled_from([1024, 8192]),
       st.sampled_from([16, 256]))
def test_past_the_budget_more_requests_only_wait(hw_format, stem, isl, osl):
    """One dense group at 2n* and 4n* requests (n* what its budget keeps decoding): the same
    TPOT, the same throughput within 1/OSL (c requests live c / n* decoding lifetimes, X =
    n* / W_0, but for one TPOT less the steady TTFT where OSL TPOTs bound W_0), and a TTFT
    that grows with the requests waiting."""
    gpu, precision = hw_format
    hw, arch = get_hardware(gpu), model(stem)
    workload = Workload(isl_tokens=isl, osl_tokens=osl)
    cap = float(budget_decode_seqs(workload.prefill_chunk_tokens, isl, osl))
    dep = Deployment(precision=precision)
    p = points(arch, dep, hw, workload, [2.0 * cap, 4.0 * cap])
    assume(bool(np.all(p.fits_memory)))
    assert p.tpot_s[0, 1] == pytest.approx(p.tpot_s[0, 0], rel=F32_REL)
    y = p.tokens_per_s_per_gpu[0]
    assert y[1] == pytest.approx(y[0], rel=1.0 / osl)
    assert p.ttft_s[0, 1] > p.ttft_s[0, 0]


# ---- no NaN, whatever the layer pattern ---------------------------------------------------

HYBRID_BASES = {  # stem: the mixers its pattern draws from (one linear kind per model)
    "Nemotron-H-56B-Base-8K": ("attention", "mamba2", "none"),
    "Qwen3-Next-80B-A3B-Instruct": ("attention", "gated_deltanet"),
}


@st.composite
def layer_pattern(draw):
    """A model of 2–6 layers whose mixers (and, on the Nemotron-H base, FFN widths) follow a
    drawn pattern: all attention is the homogeneous model, none at all attention is allowed,
    every layer keeps a mixer or an FFN."""
    stem = draw(st.sampled_from(sorted(HYBRID_BASES)))
    base = model(stem).model_dump()
    layers = draw(st.integers(2, 6))
    mixers = draw(st.lists(st.sampled_from(HYBRID_BASES[stem]), min_size=layers,
                           max_size=layers))
    fields = {"num_layers": layers,
              "layer_mixers": None if set(mixers) == {"attention"} else tuple(mixers)}
    if base["layer_ffn_widths"] is not None:
        width = base["intermediate_size"]
        widths = [width if m == "none" else draw(st.sampled_from([0, width])) for m in mixers]
        fields["layer_ffn_widths"] = None if set(widths) == {width} else tuple(widths)
    if not set(mixers) & {"mamba2", "gated_deltanet"}:  # no linear layer: no linear shape
        fields.update(dict.fromkeys(LINEAR_FIELDS, 0), linear_conv_bias=False)
    try:
        return make_architecture(**{**base, **fields})
    except ConfigError:
        assume(False)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(layer_pattern(), gpu_and_format(), st.sampled_from([1, 2]), st.sampled_from([1, 4]),
       WORKLOADS)
def test_no_nan_for_any_layer_pattern(arch, hw_format, tp, dp, workload):
    """Every field of every operating point is finite (no 0/0 for a model without attention)."""
    gpu, precision = hw_format
    dep = Deployment(tp=tp, dp=dp, ep=dp if arch.ffn.is_moe else 1, precision=precision)
    assume(not deployment_violations(arch, dep))
    p = points(arch, dep, get_hardware(gpu), workload, [1.0, 7.0, 64.0])
    for name, value in vars(p).items():
        if isinstance(value, np.ndarray) and value.dtype != bool:
            assert np.all(np.isfinite(value)), name
