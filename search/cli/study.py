"""`archscout search` and `archscout pareto`: run a study, read its Pareto set."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
from pathlib import Path

import optuna

from cost_model import CostModelError
from search.cli.arguments import whole_number
from search.cli.errors import CommandError
from search.errors import SearchError
from search.records.arrow_export import write_pareto_files
from search.records.documents import FLAGS_NOTE
from search.records.tables import format_table, print_json
from search.study.errors import NoFeasibleError, SpecError, StorageError
from search.study.record import hardware_record, recorded_spec
from search.study.report import pareto_document, read_cached_document, write_cached_document
from search.study.resilience import with_retries
from search.study.runner import RunSummary, describe_rejections, run_study
from search.study.space import sweeps_deployments
from search.study.spec import StudySpec, load_spec
from search.study.journal_file import check_readable
from search.study.storage import (
    StorageHandle,
    default_journal_path,
    open_default,
    open_url,
    prepare_for_workers,
)
from search.study.secrets import redact_text
from search.cli.secrets import redacting


def open_storage(spec_path: Path, spec: StudySpec, url: str | None, shared: bool = False,
                 worker: bool = False) -> StorageHandle:
    """The study's storage for writing: `url`, or its default journal (owned by this run, or
    `shared` with other writers, or by the workers of one run: `worker`)."""
    if url:
        return open_url(url)
    return open_default(default_journal_path(spec_path, spec.name), shared, worker=worker)


def open_for_reading(spec_path: Path, spec: StudySpec, url: str | None) -> StorageHandle:
    """The study's storage for a command that only reads it: a default journal that does not
    exist yet is an error, and nothing is created, locked, repaired or rewritten for it."""
    if url:
        return open_url(url, read_only=True)
    path = default_journal_path(spec_path, spec.name)
    if not path.exists():
        raise StorageError(f"no study `{spec.name}` in journal {path}; run `archscout search` "
                           "first")
    return open_default(path, read_only=True)


# One `--workers` process holds the cost model, numpy, Optuna and its copy of the study: 178 MiB
# resident at most (`ps -o rss` of the spawned workers of `search quickstart --trials 512
# --workers 2`, sampled every 0.5 s); 256 MiB leaves room for a larger study. A count whose
# processes cannot all fit in the machine's memory is refused; one above the cores warns.
WORKER_MEMORY_BYTES = 256 * 2**20


def check_workers(workers: int) -> None:
    """Refuse a `--workers` count this machine cannot hold (one line, exit 2); warn once when it
    exceeds the cores (the processes then share them: no faster, more memory)."""
    memory_bytes = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    most = max(memory_bytes // WORKER_MEMORY_BYTES, 1)
    if workers > most:
        raise CommandError(f"`--workers` must be at most {most} on this machine (its "
                           f"{memory_bytes / 2**30:.0f} GiB of memory hold that many worker "
                           f"processes of ~{WORKER_MEMORY_BYTES // 2**20} MiB); got {workers}")
    cores = os.cpu_count() or 1
    if workers > cores:
        print(f"archscout: warning: --workers {workers} is more than this machine's {cores} "
              "cores; the workers share them (no faster than one per core)", file=sys.stderr)


def _worker(number: int, spec_path: str, url: str | None, trials: int, seed: int) -> None:
    """One `--workers` process: any failure is one line on stderr and a non-zero exit code
    (2 for bad input or storage errors, 1 otherwise), never a traceback."""
    try:
        spec = load_spec(spec_path)
        handle = open_storage(Path(spec_path), spec, url, worker=True)
        try:
            run_study(spec, handle, trials, seed, show_progress=False)
        finally:
            handle.close()
    except KeyboardInterrupt:
        sys.exit(130)
    except (CostModelError, SearchError) as exc:
        print(f"archscout: worker {number}: error: {redact_text(str(exc), url)}",
              file=sys.stderr)
        sys.exit(2)
    except Exception as exc:  # noqa: BLE001 - one line per worker, the parent sums them up
        print(f"archscout: worker {number}: {type(exc).__name__}: "
              f"{redact_text(_first_line(exc), url)}", file=sys.stderr)
        sys.exit(1)


def _run_workers(args, spec: StudySpec, trials: int, seed: int) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_worker,
                         args=(i + 1, args.study, args.storage, trials, seed + 7919 * i))
             for i in range(args.workers)]
    try:
        for p in procs:
            p.start()
    finally:
        for p in procs:
            if p.pid is not None:
                p.join()
    failed = [p.exitcode for p in procs if p.exitcode]
    if failed:
        raise StorageError(f"{len(failed)} of {args.workers} workers failed (exit codes "
                           f"{failed}; each said why above)")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


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
                     "deployment": _deployments_shown(item, d),
                     "flags": len(item["flags"])})
    return rows


def _short(label: str) -> str:
    """`tp8 ep8 pp1 dp1 fp8 kv-fp8` without the KV format (the table's width)."""
    return " ".join(word for word in label.split() if not word.startswith("kv-"))


def _deployments_shown(item: dict, d: dict) -> str:
    """The deployment of the entry's trial, or, when its frontier takes several, the one at
    the latency end and the one at the throughput end: `tp8 … fp8 | tp2 … nvfp4`."""
    ends = [p["deployment"] for p in item.get("frontier", [])]
    if len(set(ends)) > 1:
        return f"{_short(ends[-1])} | {_short(ends[0])}"
    return f"tp{d['tp']} ep{d['ep']} pp{d['pp']} dp{d['dp']} {d['precision']}"


def print_pareto(doc: dict) -> None:
    """The Pareto table and what its `flags` column counts, then whether the front still moved
    and the space edges it reaches."""
    from search.study.convergence import bounds_line, convergence_line, exact_line

    shown = f", the top {len(doc['pareto'])} shown" if "pareto_size" in doc else ""
    print(f"study {doc['study']}: {doc['trials']} trials, {doc['feasible']} feasible, "
          f"{doc.get('pareto_size', len(doc['pareto']))} Pareto-optimal architectures (ranked "
          f"by frontier area{shown})")
    print(format_table(_pareto_rows(doc)))
    print(f"flags: {FLAGS_NOTE} (`archscout show` names them)")
    if "convergence" in doc:
        print(convergence_line(doc["convergence"]))
    if "bounds" in doc:
        print(bounds_line(doc["bounds"], len(doc["pareto"])))
    if "exact_front" in doc:
        print(exact_line(doc))
    if "sla" in doc:
        from search.study.sla import binding_line

        print(binding_line(doc))


def run_search(args: argparse.Namespace) -> int:
    spec = load_spec(args.study)
    sweeps_deployments(spec)  # a deployment space beyond the sweep limit: refused, nothing opened
    trials = spec.trials if args.trials is None else args.trials
    seed = spec.seed if args.seed is None else args.seed
    if args.workers > 1 and (args.exhaustive or spec.sampler == "exhaustive"):
        raise SpecError("`--workers`: an exhaustive search runs in one process")
    if args.workers > 1:
        check_workers(args.workers)
        # The default journal: this process holds its owner lock while its workers run (it
        # checks and repairs it first, and no single run may start beside them).
        path = default_journal_path(Path(args.study), spec.name)
        lock_fd = None if args.storage else prepare_for_workers(path, spec.name)
        try:
            _run_workers(args, spec, trials, seed)
        finally:
            if lock_fd is not None:
                os.close(lock_fd)
        return _finish(args, spec, None)
    handle = open_storage(Path(args.study), spec, args.storage)
    try:
        if args.exhaustive or spec.sampler == "exhaustive":
            return _exhaustive(args, spec, handle, seed)
        summary = run_study(spec, handle, trials, seed, show_progress=not args.no_progress)
    finally:
        handle.close()
    if summary.exhausted and summary.finished == 0:  # not one design inside the rules
        from search.study.proposals import describe

        raise NoFeasibleError(f"no feasible candidate in 0 trials of `{spec.name}`: no design "
                              f"of its space is inside the study's rules ("
                              f"{describe(summary.proposals).removeprefix('proposals: ')})")
    _say_proposals(summary)
    return _finish(args, spec, summary, handle)


def _say_proposals(summary: RunSummary) -> None:
    """One line on stderr: what the sampler drew to hand out only new designs inside the
    study's rules (search/study/proposals.py), and whether the space ran out of them."""
    from search.study.proposals import describe

    if summary.proposals.get("drawn"):
        print(describe(summary.proposals), file=sys.stderr)
    if summary.exhausted:
        print(f"every design inside the study's rules was tried ({summary.finished:,} trials): "
              "the search stopped; `search --exhaustive` gives the exact front",
              file=sys.stderr)


def _exhaustive(args, spec: StudySpec, handle: StorageHandle, seed: int) -> int:
    """`search --exhaustive` (or `sampler = "exhaustive"`): the exact front, in the study."""
    from search.study.exhaustive import run_exhaustive
    from search.study.runner import open_study

    study = with_retries(lambda: open_study(spec, handle, seed), "opening the study")
    found = run_exhaustive(spec, study, show_progress=not args.no_progress,
                           write_batch=lambda: handle.write_batch(spec.name))
    print(f"exhaustive: {found.designs:,} parameter sets, {found.within_rules:,} inside the "
          f"rules, {found.scored:,} designs scored, {found.feasible:,} feasible; exact front "
          f"{found.size} designs ({found.wall_s:.1f} s)", file=sys.stderr)
    return _finish(args, spec, None, handle)


def _finish(args, spec: StudySpec, summary: RunSummary | None,
            written: StorageHandle | None = None) -> int:
    """The Pareto table (or document) at the end of a search; `written`: the run's own storage,
    whose trials are in memory already (a journal is not decoded a second time)."""
    handle = written or open_for_reading(Path(args.study), spec, args.storage)
    doc = closing_document(spec, handle)
    if not args.storage:  # this run wrote the journal: keep its document for `pareto`
        write_cached_document(default_journal_path(Path(args.study), spec.name), spec, doc)
    if not doc["pareto"]:
        why = describe_rejections(summary) if summary else "see `archscout pareto`"
        raise NoFeasibleError(f"no feasible candidate in {doc['trials']} trials of "
                              f"`{spec.name}` ({why})")
    if args.json:  # the document `pareto --json` prints
        print_json(doc)
    else:
        print_pareto(doc)
    return 0


def closing_document(spec: StudySpec, handle: StorageHandle) -> dict:
    """The Pareto document of the study in `handle`, read after the last batch with the retry
    policy of the batches (a database restart then is one line per attempt, not a traceback
    in every worker)."""
    return with_retries(lambda: pareto_document(spec, load_study(spec, handle)),
                        "the closing report")


def load_study(spec: StudySpec, handle: StorageHandle) -> optuna.Study:
    try:
        return optuna.load_study(study_name=spec.name, storage=handle.storage)
    except KeyError:
        raise StorageError(f"no study `{spec.name}` in {handle.description}; run "
                           f"`archscout search` first") from None


def run_pareto(args: argparse.Namespace) -> int:
    spec = load_spec(args.study)
    doc, path = None, default_journal_path(Path(args.study), spec.name)
    # a study on a hardware file is read through its record, which says when the file changed
    if not (args.storage or args.parquet or args.csv) and path.exists() \
            and hardware_record(spec) is None:
        check_readable(path)
        doc = read_cached_document(path, spec)  # the document the last search kept
    if doc is None:
        study = load_study(spec, open_for_reading(Path(args.study), spec, args.storage))
        spec = recorded_spec(study, spec)  # the spec it ran with (one note on stderr if not)
        doc = pareto_document(spec, study)
        write_pareto_files(doc, args.parquet, args.csv, spec, study)
    if args.top is not None and args.top < len(doc["pareto"]):  # the first N ranks
        doc = {**doc, "pareto": doc["pareto"][:args.top], "pareto_size": len(doc["pareto"])}
    if args.json:
        print_json(doc)
    else:
        print_pareto(doc)
    return 0


_at_least_one = whole_number(1)  # argparse type of --trials and --workers


def add_parsers(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("search", help="run (or resume) a study and print its Pareto set")
    s.add_argument("study", help="study file (TOML)")
    s.add_argument("--trials", type=_at_least_one, default=None, help="finished trials to "
                   "reach, >= 1 (default: the study's `trials`)")
    s.add_argument("--storage", default=None, help="Optuna storage URL (default: a journal file "
                   "under the study's out/ folder)")
    s.add_argument("--workers", type=_at_least_one, default=1, help="processes on one study "
                   "(default 1)")
    s.add_argument("--seed", type=int, default=None, help="sampler seed (default: the study's)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--exhaustive", action="store_true", help="enumerate the whole space (up "
                   "to its stated size) and store its exact Pareto set in the study, as "
                   "`sampler = \"exhaustive\"` does")
    s.add_argument("--json", action="store_true", help="end with the `pareto --json` document "
                   "on stdout instead of the table")
    s.set_defaults(func=redacting(run_search))

    p = sub.add_parser("pareto", help="the Pareto-optimal architectures, ranked by frontier area")
    p.add_argument("study", help="study file (TOML)")
    p.add_argument("--storage", default=None, help="Optuna storage URL (default: the study's)")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--parquet", metavar="PATH", default=None, help="also write the table as "
                   "Parquet (versioned schema)")
    p.add_argument("--csv", metavar="PATH", default=None, help="also write the table as CSV")
    p.add_argument("--top", type=_at_least_one, default=None, metavar="N", help="only the "
                   "first N ranks (the table and --json; --parquet/--csv keep every entry)")
    p.set_defaults(func=redacting(run_pareto))
