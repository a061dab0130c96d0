"""The search space: the only place that calls `trial.suggest_*`.

The space is static per parameter name (Optuna's samplers need the same names and choices on
every trial); dependent sizes are derived: query heads = num_kv_heads × q_per_kv (GQA
divisibility by construction), EP is reduced to a divisor of TP·DP (and to 1 for dense models),
top-k is capped at the expert count. `build_candidate(spec, params)` is deterministic, so the
report and export rebuild exactly the candidate a trial evaluated.
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import optuna

from constraints import (
    ENGINE_LABELS, DeploymentColumns, engine_violations, linear_broken,
    pattern_broken, sharding_broken,
)
from cost_model import (
    ATTENTION_MIXER, GATED_DELTANET_MIXER, MAMBA2_MIXER, Architecture, ConfigError, Deployment,
    design_name, export_gap, field_value, make_architecture, make_deployment,
    periodic_layer_types,
)
from search.study.errors import SpecError
from search.study.spec import SAME_FORMAT, Dimension, Space, StudySpec

DEPLOYMENT_PARAMS = ("tp", "ep", "pp", "dp", "precision", "kv_precision", "moe_precision", "kvp",
                     "spec_tokens", "serving")
MIN_MAX_POSITION = 4096
# A study sweeps every deployment per architecture up to this many combinations of the deployment
# dimensions (the shipped serving-modes study has 48; the sweep costs one vectorized cost-model
# pass per combination); a larger space is an error unless it says `deployments = "sampled"`.
SWEEP_MAX_DEPLOYMENTS = 64


@dataclass(frozen=True)
class Candidate:
    """One trial's design: an architecture and its deployment, or why it is not a model."""

    params: dict
    arch: Architecture | None
    deployment: Deployment | None
    invalid_reason: str = ""

    @property
    def valid(self) -> bool:
        return self.arch is not None and self.deployment is not None


def searched_dimensions(space: Space) -> dict[str, Dimension]:
    """Dimensions with more than one option (the ones Optuna samples), by name."""
    dims = {name: getattr(space, name) for name in Space.model_fields}
    return {name: dim for name, dim in dims.items() if len(dim.options) > 1}


def deployment_combinations(space: Space) -> int:
    """How many combinations the deployment dimensions allow (before sharding rules)."""
    return math.prod(len(getattr(space, name).options) for name in DEPLOYMENT_PARAMS)


def sweeps_deployments(spec: StudySpec) -> bool:
    """Whether each architecture is scored under every deployment of the space: unless the
    study says `deployments = "sampled"`; a space of more deployment combinations than the
    sweep limit is then an error naming the limit and the dimensions (never a silent switch to
    sampled deployments, whose rows' frontiers `show` and `export` could not all reach)."""
    if spec.deployments == "sampled":
        return False
    combos = deployment_combinations(spec.space)
    if combos > SWEEP_MAX_DEPLOYMENTS:
        sizes = " × ".join(f"{name} {len(getattr(spec.space, name).options)}"
                           for name in DEPLOYMENT_PARAMS
                           if len(getattr(spec.space, name).options) > 1)
        raise SpecError(f"`deployments`: the space's deployment dimensions make {combos} "
                        f"combinations ({sizes}), above the sweep limit "
                        f"{SWEEP_MAX_DEPLOYMENTS}; narrow them, or set `deployments = "
                        f"\"sampled\"` to sample them as dimensions of each trial")
    return True


def deployment_grid(space: Space) -> list[dict]:
    """Every combination of the deployment dimensions' options, as params."""
    options = [getattr(space, name).options for name in DEPLOYMENT_PARAMS]
    return [dict(zip(DEPLOYMENT_PARAMS, combo)) for combo in itertools.product(*options)]


def suggest_params(trial: optuna.Trial, space: Space, spec: StudySpec | None = None) -> dict:
    """Sample every searched dimension; fixed ones take their value. Returns all params. When
    `spec` sweeps deployments, the deployment dimensions are not sampled (they take their first
    option: a placeholder, the sweep scores every one)."""
    params = {}
    skip = DEPLOYMENT_PARAMS if spec is not None and sweeps_deployments(spec) else ()
    for name in Space.model_fields:
        dim: Dimension = getattr(space, name)
        if len(dim.options) == 1 or name in skip:
            params[name] = dim.options[0]
        elif dim.choices is not None:
            params[name] = trial.suggest_categorical(name, dim.choices)
        else:
            params[name] = trial.suggest_int(name, dim.min, dim.max, step=dim.step)
    return params


def _moe_fields(p: dict) -> dict:
    if not p["num_experts"]:
        return {}
    return dict(
        num_experts=p["num_experts"],
        experts_per_token=min(p["experts_per_token"], p["num_experts"]),
        moe_intermediate_size=p["moe_intermediate_size"],
        num_shared_experts=p["num_shared_experts"],
        first_dense_layers=min(p["first_dense_layers"], p["num_layers"] - 1),
    )


NO_LINEAR_MIXER = "none"
_LINEAR_SHAPE = ("linear_num_value_heads", "linear_value_head_dim", "linear_num_key_heads",
                 "linear_key_head_dim", "linear_conv_kernel")


def _attention_fields(p: dict) -> dict:
    """GQA: kv heads × q_per_kv query heads of `head_dim`. MLA (DeepSeek-V3's form): as many
    heads, each with a `head_dim`-wide non-RoPE query/key part and value plus the shared
    `qk_rope_head_dim` RoPE key (Architecture's head_dim is their sum), keys and values through
    the `kv_lora_rank` latent, queries through `q_lora_rank` (0: uncompressed)."""
    heads = p["num_kv_heads"] * p["q_per_kv"]
    if p.get("attention_kind", "gqa") == "gqa":
        return dict(num_attention_heads=heads, num_kv_heads=p["num_kv_heads"],
                    head_dim=p["head_dim"])
    rope = p["qk_rope_head_dim"]
    return dict(attention_kind="mla", num_attention_heads=heads, num_kv_heads=heads,
                head_dim=p["head_dim"] + rope, qk_nope_head_dim=p["head_dim"],
                qk_rope_head_dim=rope, v_head_dim=p["head_dim"],
                kv_lora_rank=p["kv_lora_rank"], q_lora_rank=p["q_lora_rank"])


# Mamba-2 hybrids take Nemotron-H's FFN: ungated, squared ReLU (NVIDIA Nemotron-H, arXiv
# 2504.03624, and its config.json `mlp_hidden_act: relu2`), the form nemotron_h exports exactly
NEMOTRON_H_FFN = {"gated_mlp": False, "hidden_act": "relu2"}


def _pattern_fields(p: dict) -> dict:
    """Every `full_attention_period`-th layer keeps full attention (Qwen3-Next: 4; Gemma 3: 6),
    the others take the `linear_mixer` (Gated DeltaNet, with Qwen3-Next's gated attention: QK
    norms and the output gate; or Mamba-2) or, without one, sliding-window attention of
    `sliding_window` tokens; period 1 (or no linear mixer and no window): full everywhere. A
    repeating unit, so a PP split into whole units keeps its stages alike (guideline 6). Mamba-2
    hybrids take Nemotron-H's ungated FFN (`NEMOTRON_H_FFN`)."""
    period, mixer = p.get("full_attention_period", 1), p.get("linear_mixer", NO_LINEAR_MIXER)
    if period == 1 or (mixer == NO_LINEAR_MIXER and not p.get("sliding_window", 0)):
        return {}
    layers = p["num_layers"]
    if period > layers:
        raise ConfigError(f"`full_attention_period` ({period}) must be <= `num_layers` "
                          f"({layers}): at least one layer keeps full attention")
    gqa = p.get("attention_kind", "gqa") == "gqa"
    if mixer == NO_LINEAR_MIXER:  # GQA: QK norms as Gemma 3 and Qwen3 (exports as qwen3 exactly)
        return dict(sliding_window=p["sliding_window"], qk_norm=gqa,
                    layer_types=periodic_layer_types(layers, period))
    full = periodic_layer_types(layers, period)
    gated = mixer == GATED_DELTANET_MIXER and gqa
    return dict(layer_mixers=tuple(ATTENTION_MIXER if t == "full_attention" else mixer
                                   for t in full),
                **{name: p[name] for name in _LINEAR_SHAPE},
                **(dict(qk_norm=True, attention_output_gate=True) if gated else {}),
                **(NEMOTRON_H_FFN if mixer == MAMBA2_MIXER else {}))


def _searched_name(arch: Architecture) -> str:
    """What `design_name` leaves out of a searched design: MLA's ranks (`-R{kv latent}q{q
    latent}r{rope}`) and a sliding pattern (`-W{window}p{full-attention period}`)."""
    name = ""
    if arch.attention.attention_kind == "mla" and arch.num_attention_layers:
        att = arch.attention
        name += f"-R{att.kv_lora_rank}q{att.q_lora_rank}r{att.qk_rope_head_dim}"
    if arch.num_sliding_layers:
        name += f"-W{arch.attention.sliding_window}p{full_attention_period(arch)}"
    return name


def full_attention_period(arch: Architecture) -> int | None:
    """The period of a pattern `_pattern_fields` built: the first full-attention layer is the
    period-th (None without a sliding or linear pattern)."""
    if arch.mixer.layer_mixers is not None and arch.mixer.num_linear_attention_layers:
        return arch.mixer.layer_mixers.index(ATTENTION_MIXER) + 1
    if arch.num_sliding_layers and arch.attention.layer_types is not None:
        return arch.attention.layer_types.index("full_attention") + 1
    return None


def build_architecture(p: dict, max_context_tokens: int, show_vocab: bool = False) -> Architecture:
    """The architecture of a parameter set, named by `design_name` (twins that differ only in a
    field no layer uses, e.g. the dense width of an MoE without dense layers, get one name and
    one `design_key`)."""
    if not p["num_experts"] and p["intermediate_size"] < 1:
        raise ConfigError(f"`intermediate_size` ({p['intermediate_size']}) must be > 0 for a "
                          "dense model (`num_experts` = 0)")
    dense_width = p["intermediate_size"] if (not p["num_experts"] or p["first_dense_layers"]) else 0
    arch = make_architecture(
        name="sampled shape", family="custom", vocab_size=p["vocab_size"],
        hidden_size=p["hidden_size"], num_layers=p["num_layers"], intermediate_size=dense_width,
        max_position_embeddings=max(MIN_MAX_POSITION,
                                    2 ** math.ceil(math.log2(max_context_tokens))),
        **_moe_fields(p), **_attention_fields(p), **_pattern_fields(p),
    )
    return arch.model_copy(update={"name": design_name(arch, show_vocab) + _searched_name(arch)})


def build_deployment(p: dict, is_moe: bool) -> Deployment:
    kvp = p.get("kvp", 1)
    stage_gpus = p["tp"] * p["dp"] * kvp
    ep = math.gcd(p["ep"], stage_gpus) if is_moe else 1
    experts = p.get("moe_precision", SAME_FORMAT)
    return make_deployment(tp=p["tp"], ep=ep, pp=p["pp"], dp=p["dp"], precision=p["precision"],
                           moe_precision=None if experts == SAME_FORMAT or not is_moe else experts,
                           kv_precision=p["kv_precision"], kvp=kvp,
                           spec_tokens=p.get("spec_tokens", 0),
                           serving=p.get("serving", "aggregated"))


@dataclass(frozen=True)
class GridDeployments:
    """The distinct deployments of the space's grid for a dense model or an MoE (EP and the
    experts' format apply to MoEs only), in grid order, with the grid params of each and
    whether the study may run it at all (at most `max_gpus`, its engine's rules: these depend
    on the model only through whether it is an MoE)."""

    params: tuple[dict, ...]
    columns: DeploymentColumns
    runs: np.ndarray  # bool


_GRIDS: dict[tuple[str, bool], GridDeployments] = {}
# `runnable`'s answers, per study and architecture: a search asks for each design when it checks
# the proposal, when it scores it and when it builds its candidate (~0.1-0.4 ms each)
RUNNABLE_KEPT = 4096
_RUNNABLE: OrderedDict[tuple[str, Architecture],
                       tuple[GridDeployments, np.ndarray, DeploymentColumns]] = OrderedDict()
_SPEC_KEYS: dict[int, tuple[StudySpec, str]] = {}  # id -> (the spec, kept alive; its JSON)


def _spec_key(spec: StudySpec) -> str:
    """The study's JSON (its identity in the caches above), kept per spec object."""
    found = _SPEC_KEYS.get(id(spec))
    if found is None or found[0] is not spec:
        if len(_SPEC_KEYS) >= 64:
            _SPEC_KEYS.clear()
        found = _SPEC_KEYS[id(spec)] = (spec, spec.model_dump_json())
    return found[1]


def gpus_allowed(spec: StudySpec, dep: Deployment) -> bool:
    """Whether the study's GPU budget admits `dep`'s instance: at most `max_gpus`, exactly
    `gpus` when set, and no more than the fleet's `total_gpus`."""
    hw = spec.hardware
    return dep.gpus <= hw.max_gpus and (hw.gpus is None or dep.gpus == hw.gpus) and \
        (hw.total_gpus is None or dep.gpus <= hw.total_gpus)


def grid_deployments(spec: StudySpec, is_moe: bool, arch: Architecture) -> GridDeployments:
    """`GridDeployments` of the study for models like `arch` (kept per study, per MoE-ness)."""
    key = (_spec_key(spec), is_moe)
    if key not in _GRIDS:
        params, deps = [], []
        for combo in deployment_grid(spec.space):
            try:
                dep = build_deployment(combo, is_moe)
            except ConfigError:
                continue
            if dep not in deps:
                params.append(combo)
                deps.append(dep)
        runs = [gpus_allowed(spec, dep) and not engine_violations(spec.engine, arch, dep)
                for dep in deps]
        _GRIDS[key] = GridDeployments(tuple(params), DeploymentColumns.of(deps),
                                      np.array(runs, dtype=bool))
    return _GRIDS[key]


def runnable(spec: StudySpec, arch: Architecture) -> tuple[GridDeployments, np.ndarray]:
    """(the study's grid for `arch`, the positions in it of the deployments that are valid
    deployments of `arch`: sharding rules, at most `max_gpus`, its engine's rules; the rules
    checked on columns, `constraints.columns`; kept: `RUNNABLE_KEPT`). The positions are
    shared: read only."""
    return _runnable(spec, arch)[:2]


def runnable_columns(spec: StudySpec, arch: Architecture) -> DeploymentColumns:
    """The columns of `runnable`'s deployments (kept with them: a search takes them for the
    proposal's static check, then to score it). Shared: read only."""
    return _runnable(spec, arch)[2]


def _runnable(spec: StudySpec, arch: Architecture
              ) -> tuple[GridDeployments, np.ndarray, DeploymentColumns]:
    key = (_spec_key(spec), arch)
    found = _RUNNABLE.get(key)
    if found is None:
        grid = grid_deployments(spec, arch.ffn.is_moe, arch)
        cols = grid.columns
        ok = grid.runs & (sharding_broken(arch, cols) == 0) & (linear_broken(arch, cols) == 0) \
            & (pattern_broken(arch, cols) == 0)
        kept = np.flatnonzero(ok)
        found = _RUNNABLE[key] = (grid, kept, cols.take(kept))
        if len(_RUNNABLE) > RUNNABLE_KEPT:
            _RUNNABLE.popitem(last=False)
    return found


def swept_candidates(spec: StudySpec, cand: Candidate) -> list[Candidate]:
    """`cand`'s architecture under every distinct deployment of the space that is a valid
    deployment of it (`runnable`), in grid order."""
    grid, kept = runnable(spec, cand.arch)
    return [Candidate({**cand.params, **grid.params[i]}, cand.arch, grid.columns.deployments[i])
            for i in kept]


def build_candidate(spec: StudySpec, params: dict) -> Candidate:
    """The candidate of a parameter set (all params, fixed ones included). A deployment the
    study's engine cannot run is no candidate (its reason says which rules it breaks); in a
    sweeping study the placeholder deployment becomes the first the engine runs instead."""
    context = spec.workload.isl_tokens + spec.workload.osl_tokens
    try:
        arch = build_architecture(params, context, len(spec.space.vocab_size.options) > 1)
        cand = Candidate(params, arch, build_deployment(params, arch.ffn.is_moe))
    except ConfigError as exc:
        return Candidate(params, None, None, invalid_reason=str(exc))
    gap = export_gap(arch)  # every design the space produces exports to Hugging Face exactly
    if gap:
        return Candidate(params, None, None, invalid_reason=f"no Hugging Face model_type: {gap}")
    broken = engine_violations(spec.engine, arch, cand.deployment)
    if not broken:
        return cand
    runnable = swept_candidates(spec, cand) if sweeps_deployments(spec) else []
    if runnable:
        return runnable[0]
    engine = ENGINE_LABELS[spec.engine]
    lead = f"no deployment of the space runs on {engine}: " if sweeps_deployments(spec) else ""
    return Candidate(params, None, None, invalid_reason=lead + "; ".join(broken))


def complete_params(spec: StudySpec, sampled: dict) -> dict:
    """A trial's stored params plus the fixed dimensions (which Optuna does not store)."""
    params = {name: getattr(spec.space, name).options[0] for name in Space.model_fields}
    params.update(sampled)
    return params


def used_values(cand: Candidate) -> dict:
    """The value of each space dimension as the candidate's model uses it (fields clipped by
    `build_candidate` as built, e.g. top-k ≤ experts; None where the model does not use the
    field: expert fields of a dense model, the dense width of an MoE without dense layers)."""
    a, d = cand.arch, cand.deployment
    moe = (lambda value: value) if a.ffn.is_moe else (lambda value: None)
    mla = a.attention.attention_kind == "mla"
    return {
        "hidden_size": a.hidden_size, "num_layers": a.num_layers,
        "head_dim": a.attention.qk_nope_head_dim if mla else a.attention.head_dim,
        **_pattern_values(a),
        "num_kv_heads": a.attention.num_kv_heads,
        "q_per_kv": a.attention.num_attention_heads // a.attention.num_kv_heads,
        "intermediate_size": a.ffn.intermediate_size if a.num_dense_layers else None,
        "vocab_size": a.vocab_size, "num_experts": a.ffn.num_experts,
        "experts_per_token": moe(a.ffn.experts_per_token),
        "moe_intermediate_size": moe(a.ffn.moe_intermediate_size),
        "num_shared_experts": moe(a.ffn.num_shared_experts),
        "first_dense_layers": moe(a.ffn.first_dense_layers),
        "tp": d.tp, "ep": moe(d.ep), "pp": d.pp, "dp": d.dp, "precision": d.precision,
        "kv_precision": d.kv_cache_precision, "kvp": d.kvp, "spec_tokens": d.spec_tokens,
        "serving": d.serving, "moe_precision": moe(d.expert_precision),
    }


def _pattern_values(a: Architecture) -> dict:
    """`used_values` of the attention and pattern dimensions (None where the model has none)."""
    mla = (lambda value: value) if a.attention.attention_kind == "mla" else (lambda value: None)
    linear = (lambda value: value) if a.mixer.num_linear_attention_layers else (lambda value: None)
    return {
        "attention_kind": a.attention.attention_kind,
        "kv_lora_rank": mla(a.attention.kv_lora_rank),
        "q_lora_rank": mla(a.attention.q_lora_rank),
        "qk_rope_head_dim": mla(a.attention.qk_rope_head_dim),
        "full_attention_period": full_attention_period(a),
        "linear_mixer": a.mixer.linear_mixer_kind or NO_LINEAR_MIXER,
        "sliding_window": a.attention.sliding_window if a.num_sliding_layers else None,
        **{name: linear(field_value(a, name)) for name in _LINEAR_SHAPE},
    }


def design_identity(spec: StudySpec, params: dict) -> tuple | None:
    """What a parameter set evaluates: (`Architecture.design_key`, deployment), equal for params
    that differ only in fields the model does not use; None for a shape that is not a model.
    (For samplers that skip designs already tried: params alone count twins as new.)"""
    cand = build_candidate(spec, complete_params(spec, params))
    return (cand.arch.design_key, cand.deployment) if cand.valid else None
