"""What every command reports about one model on one deployment, as plain documents (dicts):
its parameter counts, memory per GPU, resolved deployment and operating points. `evaluate`,
`show`, `export`, `lint` and the plots print or draw these; none of them recomputes one."""

from __future__ import annotations

import numpy as np

from cost_model import (
    GIB_BYTES, MS_PER_S, ArchArrays, Architecture, DeployArrays, Deployment, DisaggregatedPoints,
    Env, HardwareSpec, OperatingPoints, Workload, count_params, kv_bytes_per_gpu_per_sequence,
    uncalibrated_components, usable_bytes_per_gpu, weight_bytes_per_gpu, workspace_bytes_per_gpu,
)

# the columns of `evaluate --batch ROWS.csv` (search/cli/evaluate_batch.py): one operating point
# per row, blank or absent columns taking the command's flags
BATCH_COLUMNS = ("model", "hardware", "tp", "ep", "pp", "dp", "precision", "kv_precision",
                 "moe_precision", "isl", "osl", "concurrency", "engine",
                 "adp_balance_timeout_steps")
# what the `flags` column of `pareto` counts (and `show` lists): objectives/accuracy_flags.py
FLAGS_NOTE = ("the loss proxy's range flags: design quantities outside what its published "
              "evidence covers; each widens the loss band, a hard one ranks the design at the "
              "band's high end")
DEFAULT_WINDOW = (10.0, 1000.0)  # tokens/s/user: from batch-style serving to very fast chat
# TPOT by part (NVIDIA, AI Model Co-Design (2026), Figure 2, with the linear-attention layers'
# state updates and scans as their own part): `attention` is full and sliding attention only
# (`attention_s` less `linear_attention_s`, `breakdown_ms`); the parts sum to TPOT
BREAKDOWN_PARTS = ("gemm", "attention", "linear_attention", "communication", "other")


def breakdown_ms(points: OperatingPoints, j: int, row: int = 0) -> dict[str, float]:
    """TPOT of candidate `row` at column `j` by part (`BREAKDOWN_PARTS`), in ms. The cost model's
    `attention_s` holds the linear-attention layers' time too; here it is split out as
    `linear_attention` (0 for a model without linear layers, or where the points do not split
    it out) and `attention` keeps the rest, so the parts still sum to TPOT."""
    at = lambda field: float(getattr(points, field)[row, j])  # noqa: E731
    linear = 0.0 if points.linear_attention_s is None else at("linear_attention_s")
    seconds = {"gemm": at("gemm_s"), "attention": at("attention_s") - linear,
               "linear_attention": linear, "communication": at("communication_s"),
               "other": at("other_s")}
    return {part: seconds[part] * MS_PER_S for part in BREAKDOWN_PARTS}


def uncalibrated_document(arch: Architecture) -> list[str]:
    """The parts of `arch`'s step time costed by a roofline, not calibrated kernel tables."""
    return list(uncalibrated_components(arch))


def serving_terms_document() -> dict[str, str]:
    """{serving file: the user's calibrated file it was read from, or "package"}
    (`cost_model.serving_origins`)."""
    from cost_model import serving_origins

    return serving_origins()


def serving_terms_line(doc: dict[str, str]) -> str | None:
    """The line `evaluate` and `compare` print when a serving file is the user's calibrated one
    (`archscout calibrate --source RESULTS…`); None when every one is the package's."""
    if all(origin == "package" for origin in doc.values()):
        return None
    return "serving terms: " + "; ".join(
        f"{name} from {origin}" if origin != "package" else f"{name} shipped"
        for name, origin in doc.items())


def uncalibrated_line(parts: list[str]) -> str | None:
    """The one line `evaluate` and `show` print when some part is a roofline (None: none)."""
    if not parts:
        return None
    return (f"uncalibrated: {', '.join(parts)} costed by a roofline with cited kernel "
            "efficiencies (no measured kernel table for it); read those parts as estimates")


def params_document(arch: Architecture) -> dict:
    counts = count_params(arch)
    return {"total": counts.total_params, "active": counts.active_params,
            "embedding": counts.embedding_params, "non_embedding": counts.non_embedding_params,
            "breakdown": {k: v for k, v in counts.items() if v}}


def point_document(points: OperatingPoints | DisaggregatedPoints, j: int) -> dict:
    at = lambda field: float(getattr(points, field)[0, j])  # noqa: E731
    row = {
        "concurrency": int(points.concurrency[0, j]), "tpot_ms": at("tpot_s") * MS_PER_S,
        "ttft_ms": at("ttft_s") * MS_PER_S,
        "benchmark_ttft_ms": at("benchmark_ttft_s") * MS_PER_S,
        "benchmark_ttft_median_ms": at("benchmark_ttft_median_s") * MS_PER_S,
        "tokens_per_s_per_user": at("tokens_per_s_per_user"),
        "tokens_per_s_per_gpu": at("tokens_per_s_per_gpu"),
        "fits_memory": bool(points.fits_memory[0, j]),
    }
    if isinstance(points, DisaggregatedPoints):
        ratio = points.prefill_instances[0, j], points.decode_instances[0, j]
        row.update(ratio="-" if np.isnan(ratio[0]) else f"{ratio[0]:.0f}P{ratio[1]:.0f}D",
                   kv_transfer_ms=at("kv_transfer_s") * MS_PER_S,
                   prefill_queue_ms=at("queue_s") * MS_PER_S)
    else:
        row["breakdown_ms"] = breakdown_ms(points, j)
        if points.benchmark_ttft_p99_s is not None:  # Poisson or offline client
            row["benchmark_ttft_p99_ms"] = at("benchmark_ttft_p99_s") * MS_PER_S
    return row


def breakdown_shares(point: dict) -> dict:
    total = sum(point["breakdown_ms"].values())
    return {p: point["breakdown_ms"][p] / total for p in BREAKDOWN_PARTS}


def memory_document(arch: Architecture, dep: Deployment, hw: HardwareSpec,
                    workload: Workload) -> dict:
    """Memory per GPU in GiB: weights (each component in its format), the workspace of one
    prefill chunk, one request's KV at ISL + OSL, all three (what one request needs) and what
    the engine may fill. Checks each component's format against the GPU."""
    env = Env.for_deployments(hw, [dep])
    a, d = ArchArrays.from_architectures([arch]), DeployArrays.from_deployments([dep])
    gib = lambda value: float(np.ravel(value)[0]) / GIB_BYTES  # noqa: E731
    parts = {
        "weights_gib_per_gpu": gib(weight_bytes_per_gpu(a, d, env)),
        "workspace_gib_per_gpu": gib(workspace_bytes_per_gpu(
            a, d, float(workload.prefill_chunk_tokens))),
        "kv_gib_per_request": gib(kv_bytes_per_gpu_per_sequence(
            a, d, env, float(workload.max_context_tokens))),
    }
    return {**parts, "needed_gib_one_request": sum(parts.values()),
            "usable_gib_per_gpu": gib(usable_bytes_per_gpu(env))}


def deployment_document(dep: Deployment) -> dict:
    """The deployment with its defaults resolved (KV and expert formats) and its GPU count."""
    return {**dep.model_dump(exclude={"kv_precision", "moe_precision"}),
            "moe_precision": dep.expert_precision, "kv_precision": dep.kv_cache_precision,
            "gpus": dep.gpus}


def no_fit_message(doc: dict) -> str:
    """The one line of a deployment that cannot hold the model (exit 1)."""
    p, m, d = doc["params"], doc["memory"], doc["deployment"]
    return (f"{doc['model']} ({p['total']:,} params, {p['active']:,} active) does not fit "
            f"{d['gpus']}× {doc['hardware']} with tp={d['tp']} ep={d['ep']} pp={d['pp']} "
            f"dp={d['dp']}: {m['weights_gib_per_gpu']:.1f} GiB of weights per GPU "
            f"({m['needed_gib_one_request']:.1f} GiB with the workspace and one request's KV), "
            f"{m['usable_gib_per_gpu']:.1f} GiB usable; try more GPUs or a smaller precision")
