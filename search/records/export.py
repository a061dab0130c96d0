"""What `show` prints and `export` writes about one trial: our full record (JSON), a Hugging Face
`config.json`, or the serving commands of its deployment on vLLM, SGLang or TensorRT-LLM
(`engines`). Files are written atomically: a
temporary file in the target's folder, renamed over the target; on any error nothing is left.

Every number is recomputed from the trial's rebuilt candidate (`score_valid` is deterministic),
so the record agrees with what the trial evaluated.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from optuna.trial import FrozenTrial

from constraints import CONSTRAINT_NAMES
from constraints.engines import ENGINE_LABELS
from cost_model.deployment import Deployment
from cost_model.evaluate import OperatingPoints
from cost_model.hf_config import (
    ARCHSCOUT_RECORD_KEY,
    architecture_to_hf_config,
    architecture_to_json_dict,
)
from cost_model.units import MS_PER_S
from objectives.serving import ServingScores
from search.atomic import write_text_atomic
from search.records.documents import breakdown_ms, params_document
from search.records.engines import ENGINES, MTP_DRAFT_KEYS, MTP_DRAFT_LAYERS, engine_document
from search.records.errors import ExportError
from search.records.tables import plain
from search.study.evaluation import hard_constraints, score_valid, sweep_outcome, trial_details
from search.study.space import Candidate, sweeps_deployments
from search.study.spec import StudySpec

RECORD_KEY = ARCHSCOUT_RECORD_KEY  # marker (and format version) of a trial record
RECORD_VERSION = 1
FORMATS = ("hf", "json", "vllm", "sglang", "trtllm", "bundle")
HF_CONFIG_NAME = "config.json"
HF_ENGINE_KEY = "archscout_engine"  # the study's serving engine in an HF export (null: any)


def write_json(path: Path, document: dict) -> Path:
    text = json.dumps(plain(document), indent=2, allow_nan=False, ensure_ascii=False) + "\n"
    return write_text_atomic(path, text)


# ---- the trial record ---------------------------------------------------------------------------


def deployment_document(dep: Deployment) -> dict:
    return {"tp": dep.tp, "ep": dep.ep, "pp": dep.pp, "dp": dep.dp, "precision": dep.precision,
            "kv_precision": dep.kv_cache_precision, "gpus": dep.gpus, "moe_tp": dep.moe_tp}


def workload_document(spec: StudySpec) -> dict:
    w = spec.workload
    return {"isl_tokens": w.isl_tokens, "osl_tokens": w.osl_tokens,
            "interactivity_min": w.interactivity_min, "interactivity_max": w.interactivity_max,
            "x_scale": w.x_scale}


def _columns(points: OperatingPoints) -> list[int]:
    """Grid columns with a point, one per concurrency (the grid can repeat its last value)."""
    seen, keep = set(), []
    for j, c in enumerate(points.concurrency[0]):
        if np.isfinite(c) and c not in seen:
            seen.add(c)
            keep.append(j)
    return keep


def frontier_points(points: OperatingPoints) -> list[dict]:
    """Every operating point of the sweep, with whether it is on the candidate's frontier."""
    on_front = points.pareto_mask()[0]
    at = lambda field, j: float(getattr(points, field)[0, j])  # noqa: E731
    rows = [{"concurrency": int(points.concurrency[0, j]), "tpot_ms": at("tpot_s", j) * MS_PER_S,
             "ttft_ms": at("ttft_s", j) * MS_PER_S,
             "tokens_per_s_per_user": at("tokens_per_s_per_user", j),
             "tokens_per_s_per_gpu": at("tokens_per_s_per_gpu", j),
             "fits_memory": bool(points.fits_memory[0, j]), "on_frontier": bool(on_front[j])}
            for j in _columns(points)]
    for row, j in zip(rows, _columns(points)):
        if (ratio := points.ratio(0, j)) is not None:  # disaggregated: its xPyD ratio
            row["ratio"] = ratio
    return rows


def _breakdown_at(points: OperatingPoints, j: int) -> dict:
    time_ms = breakdown_ms(points, j)
    total_ms = sum(time_ms.values())
    return {"concurrency": int(points.concurrency[0, j]), "tpot_ms": total_ms, "time_ms": time_ms,
            "share_frac": {p: t / total_ms for p, t in time_ms.items()}}


def time_breakdown(points: OperatingPoints) -> dict:
    """TPOT by part at the latency-first (c = 1) and throughput-first (largest fitting c) points."""
    fitting = [j for j in _columns(points) if points.fits_memory[0, j]]
    if not fitting:
        return {"latency_first": None, "throughput_first": None}
    return {"latency_first": _breakdown_at(points, fitting[0]),
            "throughput_first": _breakdown_at(points, fitting[-1])}


def constraints_document(spec: StudySpec, trial: FrozenTrial) -> dict:
    """Each recorded constraint: violation value (<= 0 satisfied), message, hard or reported."""
    hard = hard_constraints(spec)
    stored = trial_details(trial.user_attrs).get("constraints", {})
    doc = {}
    for name in CONSTRAINT_NAMES:
        recorded = stored.get(name)
        if recorded is not None:
            value, message = recorded
            doc[name] = {"value": value, "satisfied": value <= 0, "hard": name in hard,
                         "message": message}
    return doc


def _loss_document(trial: FrozenTrial) -> dict:
    attrs = {**trial_details(trial.user_attrs), **trial.user_attrs}
    keys = ("loss_proxy", "loss_flags", "ptq_accuracy_delta_points", "ptq_flags")
    return {k: attrs[k] for k in keys if k in attrs}


def _serving_document(scores: ServingScores) -> dict:
    return {"frontier_area": float(scores.frontier_area[0]),
            "max_concurrency": int(scores.max_concurrency[0]),
            "frontier": frontier_points(scores.points),
            "breakdown": time_breakdown(scores.points)}


def trial_record(spec: StudySpec, trial: FrozenTrial, cand: Candidate) -> dict:
    """Our full record of one valid trial (what `show --json` prints, `export --format json`
    writes)."""
    constraints = constraints_document(spec, trial)
    feasible = all(c["satisfied"] for c in constraints.values() if c["hard"])
    return {
        RECORD_KEY: RECORD_VERSION, "study": spec.name, "trial": trial.number,
        "engine": spec.engine, "hardware": spec.hardware.gpu, "workload": workload_document(spec),
        "architecture": architecture_to_json_dict(cand.arch), "params": params_document(cand.arch),
        "deployment": deployment_document(cand.deployment),
        "objectives": dict(zip(spec.objectives.names, trial.values)), "feasible": feasible,
        **_serving_document(score_valid(spec, [cand])), **_sweep_document(spec, cand),
        "constraints": constraints, "loss": _loss_document(trial),
    }


def _sweep_document(spec: StudySpec, cand: Candidate) -> dict:
    """In a study that sweeps deployments: the architecture's frontier area (the envelope over
    every feasible deployment, the trial's objective) beside its chosen deployment's own, and
    the deployment and concurrency of each envelope point."""
    if not sweeps_deployments(spec):
        return {}
    attrs = sweep_outcome(spec, cand).attrs
    if "deployment_frontier_area" not in attrs:  # no feasible deployment
        return {"deployments_evaluated": attrs.get("deployments_evaluated", 0),
                "deployments_feasible": 0}
    return {"frontier_area": attrs["frontier_area"],
            "deployment_frontier_area": attrs["deployment_frontier_area"],
            "deployments_evaluated": attrs["deployments_evaluated"],
            "deployments_feasible": attrs["deployments_feasible"],
            "frontier_deployments": [dict(zip(("deployment", "concurrency",
                                               "tokens_per_s_per_user", "tokens_per_s_per_gpu"),
                                              point)) for point in attrs["frontier_deployments"]]}


# ---- serving-engine exports and feasibility -----------------------------------------------------


def broken_constraints(spec: StudySpec, trial: FrozenTrial) -> list[str]:
    """Each hard constraint the trial breaks, as "`name`: message"."""
    return [f"`{name}`: {c['message']}" for name, c in constraints_document(spec, trial).items()
            if c["hard"] and not c["satisfied"]]


def check_exportable(spec: StudySpec, trial: FrozenTrial, force: bool) -> list[str]:
    """The hard constraints `trial` breaks: an ExportError naming them unless `force`, in which
    case they come back to be written into the export's notes."""
    broken = broken_constraints(spec, trial)
    if broken and not force:
        raise ExportError(f"trial {trial.number} is infeasible in study `{spec.name}`: "
                          f"{'; '.join(broken)}; pass --force to export it anyway")
    return [f"infeasible in study `{spec.name}`: {b}" for b in broken]


def serving_document(spec: StudySpec, cand: Candidate, engine: str, sequences: int,
                     dummy: bool = False) -> dict:
    """`engine`'s commands and config files for the candidate's deployment (a study that names
    another engine chose its deployments for that one: refused)."""
    if spec.engine not in (None, engine):
        raise ExportError(f"`--format {engine}`: study `{spec.name}` names engine "
                          f"{ENGINE_LABELS[spec.engine]} (`engine` = {spec.engine!r}); its "
                          f"deployments were chosen for that engine: export --format "
                          f"{spec.engine}")
    return engine_document(engine, spec, cand, sequences, dummy)


# ---- export -------------------------------------------------------------------------------------


def names_new_folder(output: str | Path) -> bool:
    """`-o` ends in a path separator: a folder, created when the export is written."""
    return str(output).endswith(("/", os.sep))


def export_target(output: str | Path, fmt: str) -> Path:
    """Where a format goes: a directory (an existing one, or a new one per `names_new_folder`)
    holds the HF export as config.json."""
    if not str(output).strip():  # Path("") is ".": an empty -o must not mean the current folder
        raise ExportError(f"`-o` ({str(output)!r}) must name a file or a folder")
    path = Path(output)
    if fmt == "bundle":
        return path
    if path.is_dir() or names_new_folder(output):
        if fmt != "hf":
            raise ExportError(f"`-o` ({path}) is a directory; give a file path for --format {fmt}")
        return path / HF_CONFIG_NAME
    return path


def write_export(output: str | Path, target: Path, document: dict) -> Path:
    """Write an export to `target` (`export_target(output, …)`). Missing folders on the way (a
    new `out/`, or `newdir/` of `newdir/config.json`, as `save_pretrained` does) are created
    only now, when the document exists, and removed again if the write fails."""
    created = make_folders(target.parent, output)
    try:
        return write_json(target, document)
    except BaseException:
        remove_folders(created)
        raise


def make_folders(folder: Path, output: str | Path) -> list[Path]:
    """Create `folder` and its missing parents; return the ones created, outermost first. On
    an error, nothing is left created and the error names `-o`."""
    missing = [f for f in (folder, *folder.parents) if not f.exists()][::-1]
    created: list[Path] = []
    try:
        for path in missing:
            path.mkdir()
            created.append(path)
    except OSError as exc:
        remove_folders(created)
        raise ExportError(f"`-o` ({output}) cannot be created: {exc.strerror or exc}") from None
    return created


def remove_folders(created: list[Path]) -> None:
    for path in reversed(created):
        try:
            path.rmdir()
        except OSError:  # no longer empty: someone else's files are there now
            return


def hf_document(spec: StudySpec, cand: Candidate) -> dict:
    """The architecture's Hugging Face config.json, naming the study's engine (transformers
    keeps an unknown key as a config attribute; archscout's importer ignores it), with the MTP
    draft layers the engines read when the deployment speculates with MTP (transformers builds
    no draft layers: the model's parameter count is unchanged)."""
    config = {**architecture_to_hf_config(cand.arch), HF_ENGINE_KEY: spec.engine}
    dep = cand.deployment
    key = MTP_DRAFT_KEYS.get(config["model_type"])
    if key is not None and dep.spec_tokens and dep.spec_method == "mtp":
        config[key] = MTP_DRAFT_LAYERS
    return config


def export_document(spec: StudySpec, trial: FrozenTrial, cand: Candidate, fmt: str) -> dict:
    if fmt == "hf":
        return hf_document(spec, cand)
    if fmt in ENGINES:
        limit = int(score_valid(spec, [cand]).max_concurrency[0])
        return serving_document(spec, cand, fmt, limit)
    if fmt == "json":
        return trial_record(spec, trial, cand)
    raise ExportError(f"`--format` ({fmt!r}) must be one of {', '.join(FORMATS)}")
