"""`archscout search` and `archscout pareto`: run a study, read its Pareto set."""

from __future__ import annotations

import argparse
import multiprocessing
from pathlib import Path

import optuna

from search.arrow_export import write_pareto_files
from search.report import pareto_document
from search.runner import NoFeasibleError, RunSummary, describe_rejections, run_study
from search.spec import StudySpec, load_spec
from search.storage import StorageError, StorageHandle, default_journal_path, open_default, open_url
from search.tables import format_table, print_json


def open_storage(spec_path: Path, spec: StudySpec, url: str | None, shared: bool) -> StorageHandle:
    if url:
        return open_url(url)
    return open_default(default_journal_path(spec_path, spec.name), shared)


def open_for_reading(spec_path: Path, spec: StudySpec, url: str | None) -> StorageHandle:
    """The study's storage for a command that only reads it: a default journal that does not
    exist yet is an error, and nothing is created for it."""
    path = default_journal_path(spec_path, spec.name)
    if not url and not path.exists():
        raise StorageError(f"no study `{spec.name}` in journal {path}; run `archscout search` "
                           "first")
    return open_storage(spec_path, spec, url, shared=True)


def _worker(spec_path: str, url: str | None, trials: int, seed: int) -> None:
    spec = load_spec(spec_path)
    handle = open_storage(Path(spec_path), spec, url, shared=True)
    try:
        run_study(spec, handle, trials, seed, show_progress=False)
    finally:
        handle.close()


def _run_workers(args, spec: StudySpec, trials: int, seed: int) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(args.study, args.storage, trials, seed + 7919 * i))
             for i in range(args.workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    failed = [p.exitcode for p in procs if p.exitcode]
    if failed:
        raise StorageError(f"{len(failed)} of {args.workers} workers failed (exit codes {failed})")


def _pareto_rows(doc: dict) -> list[dict]:
    """One row per entry; objectives beyond area and loss (TTFT, GPUs) get a column each."""
    rows = []
    extra = [n for n in doc.get("objectives", []) if n in ("ttft_ms", "gpus")]
    for item in doc["pareto"]:
        a, d = item["architecture"], item["deployment"]
        values = item.get("design_values", item.get("values", {}))
        rows.append({"rank": item["rank"], "trial": item["trial"],
                     "frontier_area": item["frontier_area"], "loss": item["loss_proxy"],
                     **{n: values[n] for n in extra},
                     "params_b": item["params_total"] / 1e9,
                     "active_b": item["params_active"] / 1e9, "architecture": a["name"],
                     "deployment": f"tp{d['tp']} ep{d['ep']} pp{d['pp']} dp{d['dp']} "
                                   f"{d['precision']}",
                     "flags": len(item["flags"])})
    return rows


def print_pareto(doc: dict) -> None:
    """The Pareto table, then whether the front still moved and the space edges it reaches."""
    from search.convergence import bounds_line, convergence_line

    print(f"study {doc['study']}: {doc['trials']} trials, {doc['feasible']} feasible, "
          f"{len(doc['pareto'])} Pareto-optimal architectures (ranked by frontier area)")
    print(format_table(_pareto_rows(doc)))
    if "convergence" in doc:
        print(convergence_line(doc["convergence"]))
    if "bounds" in doc:
        print(bounds_line(doc["bounds"], len(doc["pareto"])))


def run_search(args: argparse.Namespace) -> int:
    spec = load_spec(args.study)
    trials = args.trials or spec.trials
    seed = spec.seed if args.seed is None else args.seed
    if args.workers > 1:
        _run_workers(args, spec, trials, seed)
        summary = None
    else:
        handle = open_storage(Path(args.study), spec, args.storage, shared=False)
        try:
            summary = run_study(spec, handle, trials, seed, show_progress=not args.no_progress)
        finally:
            handle.close()
    return _finish(args, spec, summary)


def _finish(args, spec: StudySpec, summary: RunSummary | None) -> int:
    handle = open_storage(Path(args.study), spec, args.storage, shared=True)
    doc = pareto_document(spec, load_study(spec, handle))
    if not doc["pareto"]:
        why = describe_rejections(summary) if summary else "see `archscout pareto`"
        raise NoFeasibleError(f"no feasible candidate in {doc['trials']} trials of "
                              f"`{spec.name}` ({why})")
    print_pareto(doc)
    return 0


def load_study(spec: StudySpec, handle: StorageHandle) -> optuna.Study:
    try:
        return optuna.load_study(study_name=spec.name, storage=handle.storage)
    except KeyError:
        raise StorageError(f"no study `{spec.name}` in {handle.description}; run "
                           f"`archscout search` first") from None


def run_pareto(args: argparse.Namespace) -> int:
    spec = load_spec(args.study)
    handle = open_for_reading(Path(args.study), spec, args.storage)
    doc = pareto_document(spec, load_study(spec, handle))
    write_pareto_files(doc, args.parquet, args.csv)
    if args.json:
        print_json(doc)
    else:
        print_pareto(doc)
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("search", help="run (or resume) a study and print its Pareto set")
    s.add_argument("study", help="study file (TOML)")
    s.add_argument("--trials", type=int, default=None, help="finished trials to reach "
                   "(default: the study's `trials`)")
    s.add_argument("--storage", default=None, help="Optuna storage URL (default: a journal file "
                   "under the study's out/ folder)")
    s.add_argument("--workers", type=int, default=1, help="processes on one study (default 1)")
    s.add_argument("--seed", type=int, default=None, help="sampler seed (default: the study's)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=run_search)

    p = sub.add_parser("pareto", help="the Pareto-optimal architectures, ranked by frontier area")
    p.add_argument("study", help="study file (TOML)")
    p.add_argument("--storage", default=None, help="Optuna storage URL (default: the study's)")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--parquet", metavar="PATH", default=None, help="also write the table as "
                   "Parquet (versioned schema)")
    p.add_argument("--csv", metavar="PATH", default=None, help="also write the table as CSV")
    p.set_defaults(func=run_pareto)
