"""`archscout show`, `export` and `plot`: look at one trial, write it as a config, draw the
Pareto set's frontiers, a trial's time breakdown or roofline, or the hypervolume history.
(`pareto --parquet/--csv` is `arrow_export.write_pareto_files`.)

`show` and `export` read one trial: through the default journal's trial index when it answers
(`search.study.trial_index.read_trial`: one line decoded, not the whole journal), else by
replaying the study. Plotting (matplotlib) and the study commands' module are imported only
by the commands that use them."""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from optuna.trial import FrozenTrial, TrialState

from search.cli.arguments import positive_number
from search.cli.errors import CommandError, TrialError
from search.records.engines import ENGINES
from search.records.export import (
    FORMATS,
    check_exportable,
    export_document,
    export_target,
    frontier_points,
    serving_document,
    trial_record,
    write_export,
)
from search.records.documents import FLAGS_NOTE, uncalibrated_document, uncalibrated_line
from search.records.tables import format_table, print_json
from search.study.errors import NoFeasibleError
from search.study.evaluation import (
    deployment_label,
    score_valid,
    sweep_outcome,
    trial_candidate,
    trial_details,
)
from search.cli.secrets import redacting
from search.study.record import recorded_spec
from search.study.report import pareto_document
from search.study.space import Candidate, sweeps_deployments, swept_candidates
from search.study.spec import StudySpec, load_spec
from search.study.storage import check_readable, default_journal_path
from search.study.trial_index import IndexedTrial, read_trial

if TYPE_CHECKING:
    import optuna


@contextmanager
def opened_study(args: argparse.Namespace) -> Iterator[tuple[StudySpec, optuna.Study]]:
    """The study and the spec it ran with (its stored record; a note on stderr when the file
    `args.study` differs), so every candidate is rebuilt as it was evaluated."""
    from search.cli.study import load_study, open_for_reading

    spec = load_spec(args.study)
    handle = open_for_reading(Path(args.study), spec, args.storage)
    try:
        study = load_study(spec, handle)
        yield recorded_spec(study, spec, str(args.study)), study
    finally:
        handle.close()


def find_trial(spec: StudySpec, study: optuna.Study, number: int) -> tuple[FrozenTrial, Candidate]:
    """The finished, valid trial `number` of `study` and its rebuilt candidate."""
    trials = study.get_trials(deepcopy=False)
    trial = next((t for t in trials if t.number == number), None)
    if trial is None:
        raise _not_a_trial(spec, number, len(trials))
    return checked_trial(spec, trial)


def _not_a_trial(spec: StudySpec, number: int, trials: int) -> TrialError:
    span = f"0 … {trials - 1}" if trials else "none yet"
    return TrialError(f"`TRIAL` ({number}) is not a trial of study `{spec.name}` "
                      f"(trials: {span})")


def indexed_trial(study_file: Path, spec: StudySpec, number: int) -> IndexedTrial | None:
    """Trial `number` read through the trial index of the study's default journal, after the
    checks a reader makes of that journal (`check_readable`: a StorageError as the replay would
    give); None when there is no journal yet or its index cannot answer."""
    path = default_journal_path(study_file, spec.name)
    if not path.exists():
        return None  # the replay's path names what is missing
    check_readable(path)
    try:
        return read_trial(path, spec.name, number)
    except (OSError, ValueError, KeyError, TypeError):  # an index that does not match: replay
        return None


def read_one_trial(args: argparse.Namespace) -> tuple[StudySpec, FrozenTrial, Candidate]:
    """`show`/`export`: the spec the study ran with, trial `args.trial` and its candidate;
    through the trial index when the study is on the default journal and the index answers,
    else from the replayed study (`opened_study`, `find_trial`)."""
    file_spec = load_spec(args.study)
    found = None if args.storage else indexed_trial(Path(args.study), file_spec, args.trial)
    if found is None:
        with opened_study(args) as (spec, study):
            return spec, *find_trial(spec, study, args.trial)
    spec = recorded_spec(found, file_spec, str(args.study))  # reads found.user_attrs only
    if found.trial is None:
        raise _not_a_trial(spec, args.trial, found.trials)
    return spec, *checked_trial(spec, found.trial)


def checked_trial(spec: StudySpec, trial: FrozenTrial) -> tuple[FrozenTrial, Candidate]:
    """`trial` and its rebuilt candidate, if it is complete and still builds."""
    number = trial.number
    if trial.state == TrialState.FAIL:
        why = trial_details(trial.user_attrs).get("invalid", "no reason recorded")
        raise TrialError(f"`TRIAL` ({number}) failed: its shape is not a model ({why})")
    if trial.state != TrialState.COMPLETE:
        raise TrialError(f"`TRIAL` ({number}) is {trial.state.name.lower()}, not complete")
    cand = trial_candidate(spec, trial.params, trial.user_attrs)
    if not cand.valid:
        raise TrialError(f"`TRIAL` ({number}) no longer builds: {cand.invalid_reason}")
    return trial, cand


# ---- show ---------------------------------------------------------------------------------------


def _shape_line(arch: dict) -> str:
    keys = ("hidden_size", "num_layers", "num_attention_heads", "num_kv_heads", "head_dim",
            "intermediate_size", "vocab_size", "num_experts", "experts_per_token",
            "moe_intermediate_size", "num_shared_experts", "first_dense_layers")
    moe = ("experts_per_token", "moe_intermediate_size", "num_shared_experts", "first_dense_layers")
    return "  ".join(f"{k} {arch[k]}" for k in keys if arch["num_experts"] or k not in moe)


def _params_rows(params: dict) -> list[dict]:
    total = params["total"]
    return [{"component": k, "params": f"{v:,}", "share": f"{v / total:.1%}"}
            for k, v in params["breakdown"].items() if k != "total"]


def _breakdown_rows(breakdown: dict) -> list[dict]:
    rows = []
    for regime, b in breakdown.items():
        if b is None:
            continue
        row = {"regime": regime, "concurrency": b["concurrency"], "tpot_ms": b["tpot_ms"]}
        for part, ms in b["time_ms"].items():
            row[f"{part}_ms"] = f"{ms:.4g} ({b['share_frac'][part]:.0%})"
        rows.append(row)
    return rows


def _constraint_rows(constraints: dict) -> list[dict]:
    return [{"constraint": name, "kind": "hard" if c["hard"] else "soft",
             "ok": "yes" if c["satisfied"] else "NO", "value": c["value"], "message": c["message"]}
            for name, c in constraints.items()]


def _point_rows(points: list[dict]) -> list[dict]:
    return [{**{k: v for k, v in p.items() if k not in ("fits_memory", "on_frontier")},
             "fits": "yes" if p["fits_memory"] else "no",
             "frontier": "*" if p["on_frontier"] else ""} for p in points]


def _envelope_rows(points: list[dict]) -> list[dict]:
    """The envelope's points from the latency end: which deployment, at which concurrency."""
    unique = {(p["deployment"], p["concurrency"]): p for p in points}  # the limit may be 2^k
    return [{"tokens_per_s_per_user": p["tokens_per_s_per_user"],
             "tokens_per_s_per_gpu": p["tokens_per_s_per_gpu"],
             "concurrency": p["concurrency"], "deployment": p["deployment"]}
            for p in sorted(unique.values(), key=lambda q: -q["tokens_per_s_per_user"])]


def print_record(rec: dict) -> None:
    d, p, w = rec["deployment"], rec["params"], rec["workload"]
    print(f"trial {rec['trial']} of `{rec['study']}`: {rec['architecture']['name']} on "
          f"{d['gpus']}× {rec['hardware']} (ISL {w['isl_tokens']} / OSL {w['osl_tokens']})"
          f"{'' if rec['feasible'] else '  [INFEASIBLE]'}")
    print(f"shape: {_shape_line(rec['architecture'])}")
    print(f"params: {p['total']:,} total, {p['active']:,} active")
    print(format_table(_params_rows(p)))
    if (line := uncalibrated_line(rec["uncalibrated"])) is not None:
        print(line)
    print(f"deployment: tp {d['tp']}  ep {d['ep']}  pp {d['pp']}  dp {d['dp']}  "
          f"precision {d['precision']}  kv {d['kv_precision']}  max concurrency "
          f"{rec['max_concurrency']}")
    print("objectives: " + "  ".join(f"{k} {v:.6g}" for k, v in rec["objectives"].items()))
    window = (f"window [{w['interactivity_min']:g}, {w['interactivity_max']:g}] tokens/s/user, "
              f"{w['x_scale']} x")
    if "frontier_deployments" in rec:  # the study sweeps deployments
        print(f"architecture frontier area {rec['frontier_area']:.6g} ({window}): the envelope "
              f"over its {rec['deployments_feasible']} feasible of "
              f"{rec['deployments_evaluated']} deployments, realized by")
        print(format_table(_envelope_rows(rec["frontier_deployments"])))
        print(f"this deployment's own frontier area {rec['deployment_frontier_area']:.6g}; "
              f"* = on its frontier")
    else:
        print(f"frontier area {rec['frontier_area']:.6g} ({window}); * = on the frontier")
    print(format_table(_point_rows(rec["frontier"])))
    print("time per output token by part:")
    print(format_table(_breakdown_rows(rec["breakdown"])))
    print(format_table(_constraint_rows(rec["constraints"])))
    loss = rec["loss"]
    print(f"loss proxy {loss.get('loss_proxy', float('nan')):.4f} nats (the ranked loss: the "
          f"pessimistic end of the band when a hard flag fires)")
    flags = loss.get("loss_flags", [])
    print(f"{len(flags)} flag(s) (the `flags` column of `pareto`): {FLAGS_NOTE}")
    for flag in flags:
        print(f"  flag: {flag}")


def run_show(args: argparse.Namespace) -> int:
    spec, trial, cand = read_one_trial(args)
    record = {**trial_record(spec, trial, cand), "uncalibrated": uncalibrated_document(cand.arch)}
    if args.json:
        print_json(record)
    else:
        print_record(record)
    return 0


# ---- export and plot ----------------------------------------------------------------------------


def point_candidate(spec: StudySpec, cand: Candidate, interactivity: float,
                    design: tuple | None = None) -> tuple[Candidate, dict]:
    """The deployment and concurrency that realize the architecture's frontier at
    `interactivity` tokens/s/user: the envelope point of most tokens/s/GPU at least that
    interactive (a study that sweeps deployments; with sampled deployments the envelope of the
    trial's design over its sibling trials, `design`; else the trial's own frontier)."""
    if sweeps_deployments(spec):
        points = [dict(zip(("deployment", "concurrency", "tokens_per_s_per_user",
                            "tokens_per_s_per_gpu"), p))
                  for p in sweep_outcome(spec, cand).attrs.get("frontier_deployments", [])]
        every = {deployment_label(c.deployment): c for c in swept_candidates(spec, cand)}
    elif design is not None:  # sampled deployments: the design's envelope over its trials
        points, by_trial = design
        every = {p["deployment"]: by_trial[p["trial"]] for p in points}
    else:
        points = [{**p, "deployment": deployment_label(cand.deployment)}
                  for p in frontier_points(score_valid(spec, [cand]).points) if p["on_frontier"]]
        every = {deployment_label(cand.deployment): cand}
    fast = [p for p in points if p["tokens_per_s_per_user"] >= interactivity]
    if not fast:
        best = max((p["tokens_per_s_per_user"] for p in points), default=0.0)
        raise TrialError(f"`--interactivity` ({interactivity:g} tokens/s/user) is beyond trial "
                         f"{cand.arch.name}'s frontier (at most {best:.4g})")
    point = max(fast, key=lambda p: p["tokens_per_s_per_gpu"])
    return every[point["deployment"]], point


def run_export(args: argparse.Namespace) -> int:
    if args.interactivity is not None and args.format not in (*ENGINES, "bundle"):
        raise TrialError(f"`--interactivity` chooses a deployment: it needs --format "
                         f"{' | '.join((*ENGINES, 'bundle'))}")
    target = export_target(args.output, args.format)
    spec, trial, cand = read_one_trial(args)
    infeasible = check_exportable(spec, trial, args.force)
    if args.format == "bundle":
        return _export_bundle(args, spec, trial, cand, infeasible)
    if args.interactivity is not None:
        cand, point = point_candidate(spec, cand, args.interactivity,
                                      _design_frontier(args, spec, trial.number))
        document = {**serving_document(spec, cand, args.format, point["concurrency"]),
                    "operating_point": point}
    else:
        document = export_document(spec, trial, cand, args.format)
    if infeasible and args.format != "hf":
        document["notes"] = [*infeasible, *document.get("notes", [])]
    write_export(args.output, target, document)
    print(f"wrote {args.format} export of trial {trial.number} ({cand.arch.name}) to {target}")
    for line in infeasible:
        print(f"note: {line}", file=sys.stderr)
    return 0


def _export_bundle(args, spec: StudySpec, trial: FrozenTrial, cand: Candidate,
                   infeasible: list[str]) -> int:
    from search.records.bundle import write_bundle

    interactivity = args.interactivity if args.interactivity is not None else \
        spec.workload.interactivity_min
    cand, point = point_candidate(spec, cand, interactivity,
                                  _design_frontier(args, spec, trial.number))
    folder = write_bundle(Path(args.output), spec, trial.number, cand, point, infeasible)
    print(f"wrote bundle of trial {trial.number} ({cand.arch.name}) to {folder}: config.json, "
          f"serve and benchmark commands per engine, README.md")
    return 0


def _design_frontier(args: argparse.Namespace, spec: StudySpec, number: int) -> tuple | None:
    """In a study that samples deployments: the frontier of trial `number`'s design over its
    sibling trials (`design_points.design_frontier`), so that every point of its Pareto row
    can be exported."""
    if sweeps_deployments(spec):
        return None
    from search.study.design_points import design_frontier

    with opened_study(args) as (stored, study):
        return design_frontier(stored, study, number)


PLOT_KINDS = ("frontier", "breakdown", "roofline", "history")
CANDIDATE_KINDS = ("breakdown", "roofline")  # plots of one trial (`--trial`)


def _check_plot_args(args: argparse.Namespace) -> None:
    from search.plots.frontier import DEFAULT_TOP, image_format

    image_format(Path(args.output))  # a bad suffix fails before any work
    if args.top is None:
        args.top = DEFAULT_TOP
    if args.top < 1:
        raise CommandError(f"`--top` ({args.top}) must be >= 1")
    if args.trial is not None and args.kind not in CANDIDATE_KINDS:
        raise CommandError(f"`--trial` ({args.trial}) applies to --kind "
                          f"{' | '.join(CANDIDATE_KINDS)}, not {args.kind}")


def _no_feasible(spec: StudySpec, trials: int) -> NoFeasibleError:
    return NoFeasibleError(f"no feasible candidate in {trials} trials of `{spec.name}`: "
                           f"nothing to plot")


def _plot_frontier(args, spec: StudySpec, study: optuna.Study) -> str:
    from search.plots.frontier import write_frontier_plot

    doc = pareto_document(spec, study)
    if not doc["pareto"]:
        raise _no_feasible(spec, doc["trials"])
    write_frontier_plot(spec, doc, Path(args.output), args.top)
    shown = min(args.top, len(doc["pareto"]))
    return f"frontiers of the top {shown} of {len(doc['pareto'])} Pareto architectures"


def _plot_candidate(args, spec: StudySpec, study: optuna.Study) -> str:
    from search.plots.frontier import write_figure
    from search.plots.kinds import breakdown_figure, roofline_figure

    number = args.trial
    if number is None:  # the top-ranked Pareto architecture
        doc = pareto_document(spec, study)
        if not doc["pareto"]:
            raise _no_feasible(spec, doc["trials"])
        number = doc["pareto"][0]["trial"]
    trial, cand = find_trial(spec, study, number)
    draw = {"breakdown": breakdown_figure, "roofline": roofline_figure}[args.kind]
    write_figure(lambda: draw(spec, trial.number, cand), Path(args.output))
    what = {"breakdown": "time per output token by part", "roofline": "GEMMs on the roofline"}
    return f"{what[args.kind]} of trial {trial.number} ({cand.arch.name})"


def _plot_history(args, spec: StudySpec, study: optuna.Study) -> str:
    from search.plots.frontier import write_figure
    from search.plots.kinds import history_figure, hypervolume_history

    history = hypervolume_history(spec, study)
    if not len(history.hypervolume):
        raise _no_feasible(spec, len(history.finished_trials))
    write_figure(lambda: history_figure(spec, history), Path(args.output))
    return (f"hypervolume over {len(history.finished_trials)} trials "
            f"(final {history.hypervolume[-1]:.3f}; {int(history.feasible_cumulative[-1])} "
            f"feasible)")


def run_plot(args: argparse.Namespace) -> int:
    _check_plot_args(args)
    plot = {"frontier": _plot_frontier, "breakdown": _plot_candidate,
            "roofline": _plot_candidate, "history": _plot_history}[args.kind]
    with opened_study(args) as (spec, study):
        what = plot(args, spec, study)
    print(f"wrote {args.output}: {what}")
    return 0


def _study_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("study", help="study file (TOML)")
    p.add_argument("--storage", default=None, help="Optuna storage URL (default: the study's)")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("show", help="one trial: shape, deployment, frontier, time breakdown, "
                       "constraints")
    _study_arguments(s)
    s.add_argument("trial", type=int, help="trial number")
    s.add_argument("--json", action="store_true", help="one JSON document on stdout")
    s.set_defaults(func=redacting(run_show))

    e = sub.add_parser("export", help="one trial as a Hugging Face config.json, our JSON record "
                       "or vLLM serving arguments")
    _study_arguments(e)
    e.add_argument("trial", type=int, help="trial number")
    e.add_argument("--format", required=True, choices=FORMATS, help="hf | json | vllm | sglang "
                   "| trtllm (serve commands and config files per node) | bundle (a folder: "
                   "config.json, dummy-weight serve and benchmark commands, README)")
    e.add_argument("-o", "--output", required=True, help="file (or, for hf, a folder: "
                   "FOLDER/config.json)")
    e.add_argument("--interactivity", type=positive_number(), default=None, metavar="TOK_S_USER",
                   help="vllm, sglang, trtllm, bundle: the deployment of the frontier point of "
                   "most tokens/s/GPU at this interactivity or more (its concurrency caps the "
                   "engine's batch; bundle default: the study window's low end)")
    e.add_argument("--force", action="store_true", help="export a trial that breaks a hard "
                   "constraint (each broken one is named in the export's notes)")
    e.set_defaults(func=redacting(run_export))

    p = sub.add_parser("plot", help="plot the study: Pareto frontiers, one trial's time "
                       "breakdown or GEMM roofline, or hypervolume over trials")
    _study_arguments(p)
    p.add_argument("-o", "--output", required=True, help="image file (.png, .svg, .pdf)")
    p.add_argument("--kind", choices=PLOT_KINDS, default="frontier", help="frontier: throughput "
                   "vs interactivity of the Pareto set (default); breakdown: TPOT by part at "
                   "latency- and throughput-first serving, for the study's workload and, when "
                   "its ISL is shorter, at ISL 32,768 (the long-context column of NVIDIA's "
                   "co-design post, Figure 2); roofline: a trial's GEMMs on the GPU "
                   "roofline; history: hypervolume and feasible trials over trials")
    p.add_argument("--top", type=int, default=None, help="frontier: architectures drawn, by "
                   "frontier area (default: search.plots.frontier.DEFAULT_TOP; the plotting "
                   "module is imported only when a plot is drawn)")
    p.add_argument("--trial", type=int, default=None, help="breakdown, roofline: the trial "
                   "(default: the top-ranked Pareto architecture)")
    p.set_defaults(func=redacting(run_plot))
