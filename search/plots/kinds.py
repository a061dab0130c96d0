"""The other plot kinds of `archscout plot`:

- breakdown: one candidate's time per output token split into GEMM / attention / linear
  attention (state updates and scans of linear layers; 0 without them) / communication / other
  (NVIDIA, AI Model Co-Design (2026), Figure 2) at latency-first (c = 1) and throughput-first
  (the largest fitting c) serving, for the study's workload and a long-context variant of it;
- roofline: the candidate's GEMMs (per-GPU shapes after sharding, decode and prefill) on the
  GPU's roofline (NVIDIA, AI Model Co-Design (2026), Figure 3): arithmetic intensity against
  achieved TFLOP/s, with the memory and compute roofs of the precision and the ridge point;
- history: the hypervolume of the study's feasible Pareto front over trials, and the feasible
  count.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import optuna
from matplotlib.ticker import FuncFormatter
from optuna.trial import TrialState

from cost_model import (
    TERA, ArchArrays, DeployArrays, GemmList, HardwareSpec, StepLoad, evaluate_points, gemm_cost,
    get_hardware, get_precision, layer_gemms, make_workload,
)
from search.plots.frontier import DPI, GRID_ALPHA, TITLE_FONT_SIZE, thousands
from search.records.documents import BREAKDOWN_PARTS
from search.plots.errors import PlotError
from search.plots.labels import Label, place_labels
from search.records.export import time_breakdown
from search.study.convergence import HV_REFERENCE, feasible_trial, hypervolume, normalized
from search.study.evaluation import hard_constraints, score_valid
from search.study.space import Candidate
from search.study.spec import StudySpec

# ---- breakdown ----------------------------------------------------------------------------------

# The long-context column of NVIDIA, AI Model Co-Design (2026), Figure 2: a 32K-token prompt (the
# study's OSL kept); the column is left out when the study's own ISL is already at least this long.
LONG_CONTEXT_ISL_TOKENS = 32_768
PART_COLORS = {"gemm": "tab:blue", "attention": "tab:orange", "linear_attention": "tab:purple",
               "communication": "tab:green", "other": "tab:gray"}
PART_LABELS = {"gemm": "GEMM", "attention": "attention", "linear_attention": "linear attention",
               "communication": "communication", "other": "other"}
SHARE_LABEL_MIN_FRAC = 0.04  # segments narrower than this carry no text inside
BREAKDOWN_SIZE_IN = (10.0, 5.4)
CAPTION_HEIGHT_FRAC = 0.08  # the figure's bottom strip kept for the caption
BAR_HEIGHT = 0.62


@dataclass(frozen=True)
class Regime:
    """One bar: a workload and service goal with its TPOT split (ms)."""

    label: str
    time_ms: dict[str, float]

    @property
    def tpot_ms(self) -> float:
        return sum(self.time_ms.values())


def _regimes(isl_tokens: int, breakdown: dict) -> list[Regime]:
    names = {"latency_first": "latency-first", "throughput_first": "throughput-first"}
    return [Regime(f"ISL {isl_tokens:,}: {names[key]}\n(concurrency {b['concurrency']:,})",
                   b["time_ms"]) for key, b in breakdown.items() if b is not None]


def breakdown_regimes(spec: StudySpec, cand: Candidate) -> list[Regime]:
    """The study's workload, then (when it fits in memory) the long-context variant."""
    regimes = _regimes(spec.workload.isl_tokens, time_breakdown(score_valid(spec, [cand]).points))
    if spec.workload.isl_tokens < LONG_CONTEXT_ISL_TOKENS:
        long = make_workload(isl_tokens=LONG_CONTEXT_ISL_TOKENS,
                             osl_tokens=spec.workload.osl_tokens)
        points = evaluate_points([cand.arch], [cand.deployment], get_hardware(spec.hardware.gpu),
                                 long)
        regimes += _regimes(LONG_CONTEXT_ISL_TOKENS, time_breakdown(points))
    return regimes


def _candidate_title(spec: StudySpec, trial: int, cand: Candidate) -> str:
    d = cand.deployment
    return (f"trial {trial} ({cand.arch.name}) on {d.gpus}× {spec.hardware.gpu}, tp{d.tp} "
            f"ep{d.ep} pp{d.pp} dp{d.dp}, {d.precision}, kv {d.kv_cache_precision}")


def _draw_bar(ax, row: int, regime: Regime) -> None:
    left = 0.0
    for part in BREAKDOWN_PARTS:
        share = regime.time_ms[part] / regime.tpot_ms
        ax.barh(row, share * 100, left=left * 100, height=BAR_HEIGHT, color=PART_COLORS[part],
                label=PART_LABELS[part] if row == 0 else None)
        if share >= SHARE_LABEL_MIN_FRAC:
            ax.text((left + share / 2) * 100, row, f"{share:.0%}", ha="center", va="center",
                    fontsize=9, color="white", fontweight="bold")
        left += share
    ax.text(101, row, f"TPOT\n{regime.tpot_ms:.3g} ms", va="center", fontsize=8)


def breakdown_figure(spec: StudySpec, trial: int, cand: Candidate):
    regimes = breakdown_regimes(spec, cand)
    if not regimes:
        raise PlotError(f"`--trial` ({trial}): {cand.arch.name} holds no request in memory on "
                          f"its deployment; there is no time per output token to break down")
    fig, ax = plt.subplots(figsize=BREAKDOWN_SIZE_IN, dpi=DPI)
    for row, regime in enumerate(regimes):
        _draw_bar(ax, row, regime)
    ax.set_yticks(range(len(regimes)), [r.label for r in regimes], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of the time per output token, TPOT (%)")
    ax.grid(True, axis="x", alpha=GRID_ALPHA)
    ax.set_title(f"Time per output token by part (aggregated serving, prefill amortized, OSL "
                 f"{spec.workload.osl_tokens:,})\n{_candidate_title(spec, trial, cand)}",
                 fontsize=TITLE_FONT_SIZE)
    ax.legend(ncols=len(BREAKDOWN_PARTS), fontsize=8, loc="upper center",
              bbox_to_anchor=(0.5, -0.14), frameon=False)
    fig.tight_layout(rect=(0, CAPTION_HEIGHT_FRAC, 1, 1))
    fig.text(0.5, 0.01, breakdown_caption(spec, regimes), ha="center", va="bottom", fontsize=8,
             wrap=True)
    return fig


def breakdown_caption(spec: StudySpec, regimes: list[Regime]) -> str:
    """What the rows are: the study's workload, and the long-context rows when drawn."""
    w = spec.workload
    text = (f"Rows: the study's workload (ISL {w.isl_tokens:,} / OSL {w.osl_tokens:,}) at "
            "concurrency 1 (latency-first) and at the most requests memory holds "
            "(throughput-first)")
    if any(r.label.startswith(f"ISL {LONG_CONTEXT_ISL_TOKENS:,}:") for r in regimes):
        text += (f"; ISL {LONG_CONTEXT_ISL_TOKENS:,} rows: the same design and deployment at a "
                 f"32K-token prompt (OSL kept), the long-context column of NVIDIA's AI Model "
                 f"Co-Design (2026), Figure 2: where attention's KV reads grow")
    return text + "."


# ---- roofline -----------------------------------------------------------------------------------

ROOFLINE_SIZE_IN = (11.0, 7.0)
REGIME_MARKERS = ("o", "s", "^")
MARKER_SIZE_PT = 7
PLAIN_NUMBER = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")
ROOF_MARGIN = 2.0  # the intensity axis runs this factor beyond the points and the ridge
HIGH_PRECISION = "bf16"  # unquantized GEMMs (LM head, router): see cost_model.layers


@dataclass(frozen=True)
class GemmPoint:
    name: str  # e.g. "attention/qkv"
    regime: str
    m: float
    n: float
    k: float
    high: bool
    intensity_flop_per_byte: float
    achieved_flop_per_s: float


def _scalar(value) -> float:
    return float(np.asarray(value, dtype=np.float64).reshape(-1)[0])


def forward_gemms(cand: Candidate, load: StepLoad) -> GemmList:
    """The named per-GPU GEMMs of one forward step carrying `load` (the model's layers, one
    stage or not: a roofline point does not depend on how many times a GEMM runs)."""
    a = ArchArrays.from_architectures([cand.arch])
    d = DeployArrays.from_deployments([cand.deployment])
    gemms = GemmList((1, 1))
    layer_gemms(gemms, a, d, load, a.attention_layers, a.mixer.linear_layers, a.ffn.dense_layers,
                a.ffn.moe_layers)
    return gemms


def gemm_points(cand: Candidate, hw: HardwareSpec, regime: str, gemms: GemmList) -> list[GemmPoint]:
    """Each GEMM that runs (positive dims and count) with its intensity and achieved rate."""
    points = []
    for name, dims, high in zip(gemms.names, gemms.dims, gemms.high):
        m, n, k, groups, count = (_scalar(x) for x in dims)
        if min(m, n, k, groups, count) <= 0:
            continue
        precision = HIGH_PRECISION if high else cand.deployment.precision
        cost = gemm_cost(m, n, k, hw, precision, groups=groups)
        points.append(GemmPoint(name, regime, m, n, k, high,
                                _scalar(cost.intensity_flop_per_byte),
                                _scalar(cost.achieved_flop_per_s)))
    return points


def roofline_points(spec: StudySpec, cand: Candidate) -> list[list[GemmPoint]]:
    """Decode at c = 1 and at the largest fitting c (M = the busiest DP group's share of the
    ⌈c/PP⌉ sequences of a stage's step), and one prefill chunk (M = the study's chunk of one
    prompt)."""
    hw = get_hardware(spec.hardware.gpu)
    limit = int(score_valid(spec, [cand]).max_concurrency[0])
    pp, dp = cand.deployment.pp, cand.deployment.dp
    workload = make_workload(isl_tokens=spec.workload.isl_tokens,
                             osl_tokens=spec.workload.osl_tokens)
    isl = workload.isl_tokens
    chunk = isl / np.ceil(isl / workload.prefill_chunk_tokens)
    d = DeployArrays.from_deployments([cand.deployment])
    per_group = "" if dp == 1 else " on the busiest DP group"
    # a stage's step holds ⌈c/PP⌉ sequences, the busiest group ⌈·/DP⌉ of them; a prefill chunk
    # is one request's, on one group
    cases = [("decode, concurrency 1", StepLoad.of(d, 1.0, 0.0)),
             (f"decode, concurrency {limit:,}", StepLoad.of(d, np.ceil(limit / pp), 0.0)),
             (f"prefill chunk of {chunk:,.0f} tokens", StepLoad.of(d, 0.0, chunk))]
    if limit <= 1:  # the largest fitting concurrency is c = 1 (or nothing fits): one decode case
        del cases[1]
    return [gemm_points(cand, hw, f"{label} (M = {_scalar(load.group_tokens):,.0f}{per_group})",
                        forward_gemms(cand, load)) for label, load in cases]


def _short(name: str) -> str:
    return name.split("/")[-1]


def _draw_roofs(ax, hw: HardwareSpec, precisions: list[str], x_lo: float, x_hi: float) -> None:
    intensity = np.geomspace(x_lo, x_hi, 256)
    for style, name in zip(("-", "--"), precisions):
        prec = get_precision(name)
        peak, ridge = hw.peak_for(prec), hw.ridge_flop_per_byte(prec)
        roof = np.minimum(hw.hbm_bytes_per_s * intensity, peak) / TERA
        ax.plot(intensity, roof, style, color="black", linewidth=1.4,
                label=f"{name} roofline: {hw.hbm_bytes_per_s / TERA:.1f} TB/s HBM, "
                      f"{peak / TERA:,.0f} TFLOP/s")
        ax.axvline(ridge, color="black", linestyle=":", linewidth=1.0)
        ax.plot([ridge], [peak / TERA], "D", color="black", markersize=6)
        ax.text(ridge, 0.03, f"ridge point ({name}): {ridge:,.0f} FLOP/byte ", rotation=90,
                ha="right", va="bottom", fontsize=8, transform=ax.get_xaxis_transform())


def _draw_gemm_points(ax, cases: list[list[GemmPoint]]) -> list[tuple]:
    """Markers (color = GEMM, marker = regime) and their legend; returns the labels to place."""
    names = list(dict.fromkeys(p.name for case in cases for p in case))
    colors = {name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(names)}
    labels = []
    for marker, case in zip(REGIME_MARKERS, cases):
        for p in case:
            xy = (p.intensity_flop_per_byte, p.achieved_flop_per_s / TERA)
            ax.plot(*xy, marker, color=colors[p.name], markersize=MARKER_SIZE_PT,
                    markeredgecolor="black", markeredgewidth=0.5)
            labels.append(Label(_short(p.name), xy, colors[p.name]))
    for name in names:
        ax.plot([], [], "o", color=colors[name], label=name)
    for marker, case in zip(REGIME_MARKERS, cases):
        if case:
            ax.plot([], [], marker, color="white", markeredgecolor="black", label=case[0].regime)
    return labels


def roofline_figure(spec: StudySpec, trial: int, cand: Candidate):
    hw = get_hardware(spec.hardware.gpu)
    cases = roofline_points(spec, cand)
    points = [p for case in cases for p in case]
    precisions = [cand.deployment.precision]
    if any(p.high for p in points) and get_precision(HIGH_PRECISION).tensor_core_rate != \
            get_precision(cand.deployment.precision).tensor_core_rate:
        precisions.append(HIGH_PRECISION)
    ridges = [hw.ridge_flop_per_byte(get_precision(p)) for p in precisions]
    intensities = [p.intensity_flop_per_byte for p in points]
    x_lo = min(intensities + ridges) / ROOF_MARGIN
    x_hi = max(intensities + ridges) * ROOF_MARGIN
    fig, ax = plt.subplots(figsize=ROOFLINE_SIZE_IN, dpi=DPI)
    _draw_roofs(ax, hw, precisions, x_lo, x_hi)
    labels = _draw_gemm_points(ax, cases)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved (TFLOP/s per GPU), predicted by the calibrated cost model")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(PLAIN_NUMBER)
    ax.grid(True, which="both", alpha=GRID_ALPHA)
    ax.set_title(f"GEMMs of one forward on the {hw.name} roofline (per-GPU shapes after sharding)"
                 f"\n{_candidate_title(spec, trial, cand)}", fontsize=TITLE_FONT_SIZE)
    ax.legend(fontsize=7, loc="upper left", framealpha=0.9)  # above the roof: always empty
    fig.tight_layout()
    # after the layout: placement is in display coordinates
    place_labels(fig, ax, labels, [*ax.lines, *ax.texts, ax.get_legend()])
    return fig


# ---- history ------------------------------------------------------------------------------------

HISTORY_SIZE_IN = (10.0, 6.5)
MAX_HISTORY_POINTS = 400  # hypervolume checkpoints (trials between them are drawn as steps)


@dataclass(frozen=True)
class History:
    objectives: list[str]
    directions: list[str]
    finished_trials: np.ndarray  # trial numbers, ascending
    feasible_cumulative: np.ndarray  # feasible trials up to and including each finished trial
    checkpoints: np.ndarray  # trial numbers at which the hypervolume was computed
    hypervolume: np.ndarray


def hypervolume_history(spec: StudySpec, study: optuna.Study) -> History:
    hard = hard_constraints(spec)
    trials = sorted(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,
                                                             TrialState.FAIL)),
                    key=lambda t: t.number)
    feasible = [t for t in trials if feasible_trial(t, hard)]
    numbers = np.array([t.number for t in trials], dtype=np.int64)
    flags = np.array([feasible_trial(t, hard) for t in trials], dtype=np.int64)
    directions = spec.objectives.directions
    history = History(spec.objectives.names, directions, numbers, np.cumsum(flags),
                      np.zeros(0, np.int64), np.zeros(0))
    if not feasible:
        return history
    z = normalized(np.array([t.values for t in feasible], dtype=float), directions)
    feasible_numbers = np.array([t.number for t in feasible])
    picks = np.unique(np.linspace(0, len(feasible) - 1, min(len(feasible), MAX_HISTORY_POINTS))
                      .round().astype(int))
    hv = [hypervolume(z[: i + 1]) for i in picks]
    return History(history.objectives, directions, numbers, history.feasible_cumulative,
                   feasible_numbers[picks], np.array(hv))


def _objective_text(history: History) -> str:
    short = {"maximize": "max", "minimize": "min"}
    return ", ".join(f"{n} ({short[d]})" for n, d in zip(history.objectives, history.directions))


def history_figure(spec: StudySpec, history: History):
    fig, (top, bottom) = plt.subplots(2, 1, figsize=HISTORY_SIZE_IN, dpi=DPI, sharex=True,
                                      height_ratios=(3, 2))
    last = int(history.finished_trials[-1])
    x = np.append(history.checkpoints, last)
    top.step(x, np.append(history.hypervolume, history.hypervolume[-1]), where="post",
             color="tab:blue", linewidth=1.6,
             label=f"hypervolume (final {history.hypervolume[-1]:.3f})")
    top.plot(history.checkpoints, history.hypervolume, "o", markersize=2, color="tab:blue")
    top.set_ylabel(f"hypervolume (normalized,\nreference {HV_REFERENCE:g}; unitless)")
    top.set_ylim(bottom=0)
    top.grid(True, alpha=GRID_ALPHA)
    top.set_title(f"{spec.name}: hypervolume of the feasible Pareto front over trials\n"
                  f"objectives {_objective_text(history)}, each scaled to the range of the final "
                  f"feasible set", fontsize=TITLE_FONT_SIZE)
    top.legend(fontsize=8, loc="best")  # where the curve is not: no text on it
    bottom.step(history.finished_trials, history.feasible_cumulative, where="post",
                color="tab:green", linewidth=1.6,
                label=f"feasible ({int(history.feasible_cumulative[-1]):,} of "
                      f"{len(history.finished_trials):,} finished)")
    bottom.plot(history.finished_trials, np.arange(1, len(history.finished_trials) + 1), "--",
                color="tab:gray", linewidth=1.0, label="finished (complete or failed)")
    bottom.set_ylabel("trials (cumulative)")
    bottom.set_xlabel("trial number")
    thousands(bottom.yaxis)
    bottom.grid(True, alpha=GRID_ALPHA)
    bottom.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig
