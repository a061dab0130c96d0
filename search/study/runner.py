"""Run (or resume) a study. The loop, per batch:

  ask      `size` trials of the run's own in-memory copy of the study (Optuna's ask-and-tell,
           the sampler sees every finished trial of the study);
  evaluate build and score the whole batch in one vectorized pass (`evaluate_batch`);
  tell     constraints, attributes and values, still in memory;
  durable  the batch's finished trials added to the study's storage (`Study.add_trials`) in one
           write: one append and one fsync on the journal, under the storage's batch lock
           (`StorageHandle.write_batch`); then the trials other workers finished meanwhile are
           copied into the run's copy.

until the study holds the requested number of finished trials. Only finished trials reach the
storage: a run killed mid-batch loses that batch and leaves nothing RUNNING, so a resume has
nothing to wait for. Never reads `study.trials` inside the loop."""

from __future__ import annotations

import copy
import gc
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field

import optuna
from optuna.samplers.nsgaii import PolynomialMutation
from optuna.trial import FrozenTrial, TrialState
from tqdm import tqdm

from search.study import optuna_adapter, proposals
from search.study.distinct_children import FlatNSGAIISampler, adopt
from search.study.errors import SpecError
from search.study.evaluation import (
    DETAILS_ATTR, Outcome, evaluate_batch, hard_constraints, stored_attrs,
)  # fmt: skip
from search.study.exhaustive import EXHAUSTIVE_ATTR
from search.study.record import store_or_check_spec
from search.study.resilience import WORKER_ATTR, settle_running, with_retries, worker_id
from search.study.space import build_candidate, suggest_params, sweeps_deployments
from search.study.spec import StudySpec
from search.study.storage import StorageHandle

FINISHED = (TrialState.COMPLETE, TrialState.FAIL)


@dataclass
class RunSummary:
    finished: int = 0  # finished trials in the study after the run
    ran: int = 0  # trials this process finished
    feasible: int = 0  # feasible trials this process finished
    feasible_before: int = 0  # feasible trials the study held when this process started
    best_area: float = float("nan")
    rejected_by: Counter = field(default_factory=Counter)  # hard constraint -> trials it rejected
    proposals: Counter = field(default_factory=Counter)  # `ProposalSampler.stats` of this run
    exhausted: bool = False  # the sampler found no new design inside the rules (proposals.py)


# NSGA-II as measured best on an exhaustively enumerated space (tests/benchmarks/
# bench_search_quality.py, 10 seeds): population 32 with polynomial mutation (eta 5) reached 98.6%
# of the exact front's hypervolume at 2,000 trials (9 of 10 seeds ≥ 98%); the defaults
# (population 50-64, uniform mutation) reached 97.5%.
NSGA2_POPULATION = 32
NSGA2_MUTATION_ETA = 5.0


def make_sampler(spec: StudySpec, seed: int) -> proposals.ProposalSampler:
    """The study's sampler, proposing only new designs inside its rules (`proposals`)."""
    return proposals.wrap(_inner_sampler(spec, seed), spec, seed)


def _inner_sampler(spec: StudySpec, seed: int) -> optuna.samplers.BaseSampler:
    if spec.sampler == "nsga2":
        with warnings.catch_warnings():  # PolynomialMutation is experimental in Optuna 5.0
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            mutation = PolynomialMutation(eta=NSGA2_MUTATION_ETA)
            return FlatNSGAIISampler(population_size=NSGA2_POPULATION, mutation=mutation,
                                     seed=seed)
    if spec.sampler == "tpe":
        return optuna.samplers.TPESampler(multivariate=True, constant_liar=True, seed=seed)
    return optuna.samplers.RandomSampler(seed=seed)


def open_study(spec: StudySpec, handle: StorageHandle, seed: int) -> optuna.Study:
    """The study in its storage, created (with its spec record and metric names, in one write)
    or loaded; RUNNING trials an earlier version left are settled (`settle_running`)."""
    # Optuna's own warnings are errors archscout reports itself, in one line (e.g. on a database
    # restart it logs the SQL it was running and blames "the number of IN variables")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    with handle.write_batch(spec.name):
        study = _load_or_create(spec, handle, make_sampler(spec, seed))
        if study.directions != [optuna.study.StudyDirection[d.upper()]
                                for d in spec.objectives.directions]:
            raise SpecError(f"study `{spec.name}` exists with other objectives; use another "
                            "`name`")
        store_or_check_spec(study, spec)
        _name_metrics(study, spec)
        settle_running(study, owner=not handle.shared)
    return study


def _load_or_create(spec: StudySpec, handle: StorageHandle,
                    sampler: optuna.samplers.BaseSampler) -> optuna.Study:
    """The study, loaded (nothing written) or created (another process may create it at the
    same moment: Optuna's `load_if_exists` then loads theirs)."""
    try:
        return optuna.load_study(study_name=spec.name, storage=handle.storage, sampler=sampler)
    except KeyError:
        return optuna.create_study(study_name=spec.name, storage=handle.storage,
                                   directions=spec.objectives.directions, sampler=sampler,
                                   load_if_exists=True)


def _name_metrics(study: optuna.Study, spec: StudySpec) -> None:
    """The objectives' names on the study, so optuna-dashboard shows them (not "0", "1")."""
    names = list(spec.objectives.names)
    if study.metric_names != names:
        with warnings.catch_warnings():  # set_metric_names is experimental in Optuna 5.0
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(names)


def finished_trials(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=FINISHED))


class _Details(dict):
    """A trial's `details` attribute, whose deep copy is itself: `Study.tell` returns a deep copy
    of the trial it finished (~0.4 ms apiece for a swept trial's details), and a finished
    trial's attributes never change (every update of one is refused). A plain dict to every
    storage that writes it (JSON) and to every reader."""

    def __deepcopy__(self, memo: dict) -> _Details:
        return self


def _record(trial: optuna.Trial, outcome: Outcome, hard: tuple[str, ...]) -> None:
    for key, value in stored_attrs(outcome).items():
        trial.set_user_attr(key, _Details(value) if key == DETAILS_ATTR else value)
    for name, violation in outcome.constraints.items():
        # Only violated hard constraints are recorded with set_constraint: Optuna treats absent
        # keys as satisfied and its samplers sum positive violations, so this is equivalent and
        # saves a storage write per satisfied constraint; every value is kept in `details`.
        if name in hard and violation.value > 0:
            trial.set_constraint(name, float(violation.value))


def run_batch(study: optuna.Study, spec: StudySpec, size: int, hard: tuple[str, ...],
              summary: RunSummary, attrs: dict | None = None) -> list[FrozenTrial]:
    """Ask `size` trials of `study`, score them in one pass, tell them (each with the user
    attributes `attrs` too); returns the scored ones finished (a repeat is not scored:
    `_without_repeats`)."""
    trials = [study.ask() for _ in range(size)]
    cands = [_candidate(study.sampler, spec, suggest_params(t, spec.space, spec))
             for t in trials]
    trials, cands = _without_repeats(study, trials, cands)
    done = []
    for trial, outcome in zip(trials, evaluate_batch(spec, cands)):
        for key, value in (attrs or {}).items():
            trial.set_user_attr(key, value)
        done.append(_tell(study, trial, outcome, hard, summary))
    summary.ran += len(done)
    return done


def _candidate(sampler: optuna.samplers.BaseSampler, spec: StudySpec, params: dict):
    """`build_candidate(spec, params)`: the one the proposal sampler built when it checked
    these params, where it kept it."""
    known = getattr(sampler, "candidate_of", lambda _: None)(params)
    return known if known is not None else build_candidate(spec, params)


def _without_repeats(study: optuna.Study, trials: list, cands: list) -> tuple[list, list]:
    """The trials whose design is new: a repeat (handed out only once every design inside the
    study's rules was tried, `ProposalSampler.exhausted`) is not scored again; it ends PRUNED
    in the run's copy and never reaches the storage (`LocalRun.persist` adds finished ones)."""
    repeats = getattr(study.sampler, "repeats", set())
    for trial in trials:
        if trial.number in repeats:
            study.tell(trial, state=TrialState.PRUNED)
    kept = [(t, c) for t, c in zip(trials, cands) if t.number not in repeats]
    return [t for t, _ in kept], [c for _, c in kept]


def _tell(study: optuna.Study, trial: optuna.Trial, outcome: Outcome, hard: tuple[str, ...],
          summary: RunSummary) -> FrozenTrial:
    _record(trial, outcome, hard)
    if outcome.values is None:
        summary.rejected_by["shape"] += 1
        return study.tell(trial, state=TrialState.FAIL)
    _count(summary, outcome, hard)
    return study.tell(trial, outcome.values)


def _count(summary: RunSummary, outcome: Outcome, hard: tuple[str, ...]) -> None:
    broken = [n for n in hard if outcome.constraints[n].value > 0]
    summary.rejected_by.update(broken)
    if not broken:
        summary.feasible += 1
        area = outcome.attrs["frontier_area"]
        if not summary.best_area >= area:  # NaN-safe maximum
            summary.best_area = area


class LocalRun:
    """The run's in-memory copy of a study (`study`: Optuna's InMemoryStorage, where it asks and
    tells) and the study in its storage (`durable`), which receives finished trials only.

    Sampling in a copy keeps Optuna's per-operation storage cost (~18 operations a trial: ask,
    each parameter, attributes, constraints, tell) off the storage: each batch is one write
    (`persist`). With other writers (`--workers`, `--storage`), each trial carries its worker's
    name (`worker`), so that a batch retried after a database error adds only what did not
    reach the database, and the others' trials are told apart from this run's own."""

    def __init__(self, durable: optuna.Study, handle: StorageHandle, spec: StudySpec):
        self.durable, self.handle, self.spec = durable, handle, spec
        self.me = worker_id() if handle.shared else None
        every = durable.get_trials(deepcopy=False)
        # an exact front's trials (`exhaustive`) are no sampled trial: not counted, not sampled
        self.done_at_start = [t for t in every if t.state in FINISHED
                              and not t.user_attrs.get(EXHAUSTIVE_ATTR)]
        self.finished, self._seen = len(self.done_at_start), len(every)
        self.study = optuna.create_study(directions=durable.directions,
                                         sampler=durable.sampler)
        add_finished(self.study, self.done_at_start)

    def attrs(self) -> dict:
        return {WORKER_ATTR: self.me} if self.me else {}

    def persist(self, batch: list[FrozenTrial], target: int) -> int:
        """Add the finished trials of `batch` to the storage, as many as fit in `target`
        finished trials; then copy in the trials the others finished. Returns how many of the
        batch are stored (the rest came too late: the others reached `target` first)."""
        with self.handle.write_batch(self.spec.name) as journal:
            every = self.durable.get_trials(deepcopy=False)  # read under the lock: up to date
            new = every[self._seen:]
            stored = {t.datetime_start for t in new if self._mine(t)}  # a retried write
            room = target - self.finished - sum(t.state in FINISHED for t in new)
            todo = [t for t in batch if t.datetime_start not in stored][:max(room, 0)]
            if journal is not None:
                journal.trials_of(self.spec.name, len(every), len(todo))
            optuna_adapter.add_trials(self.durable, shared(todo))  # Study.add_trials, batched
            every = self.durable.get_trials(deepcopy=False)
        new = every[self._seen:]
        others = [t for t in new if not self._mine(t)]
        add_finished(self.study, adopt(self.study.sampler, self.study, others))
        self.finished += sum(t.state in FINISHED for t in new)
        self._seen = len(every)
        return len(stored) + len(todo)

    def _mine(self, trial: FrozenTrial) -> bool:
        return self.me is None or trial.user_attrs.get(WORKER_ATTR) == self.me


class _Shared(FrozenTrial):
    """A finished trial whose deep copy is a shallow one: what the run's copy of the study keeps
    of a trial read from the storage. `Study.add_trials` deep-copies each trial, ~2 ms apiece
    here: 20,000 trials took 38.6 s to load, 3.2 s shared (a finished trial never changes:
    every update of one is refused)."""

    def __deepcopy__(self, memo: dict) -> FrozenTrial:
        return copy.copy(self)


def shared(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """Twins of finished `trials` that a storage adding them shares instead of deep-copying
    (`_Shared`): the run's own trials reach the storage so (the run's copy keeps its own)."""
    out = []
    for trial in trials:
        twin = copy.copy(trial)
        twin.__class__ = _Shared
        out.append(twin)
    return out


def add_finished(study: optuna.Study, trials: list[FrozenTrial]) -> None:
    """`study.add_trials(trials)`, sharing what the trials hold (`_Shared`). The garbage
    collector waits meanwhile: these allocations hold no cycles, and each of its full passes
    would walk the whole decoded study."""
    paused = gc.isenabled()
    gc.disable()
    try:
        study.add_trials(shared(trials))
    finally:
        if paused:
            gc.enable()


def _resume_summary(done: list[FrozenTrial]) -> RunSummary:
    """Counters of what the study already holds, so the progress bar shows the whole study."""
    feasible = [t for t in done if t.user_attrs.get("feasible")]
    areas = [t.user_attrs.get("frontier_area", float("nan")) for t in feasible]
    return RunSummary(finished=len(done), feasible_before=len(feasible),
                      best_area=max(areas, default=float("nan")))


def run_study(spec: StudySpec, handle: StorageHandle, target_trials: int, seed: int,
              show_progress: bool = True) -> RunSummary:
    """Run until the study holds `target_trials` finished trials (resuming what is there), or
    until its sampler finds no new design inside the study's rules (`summary.exhausted`)."""
    sweeps_deployments(spec)  # a deployment space beyond the sweep limit fails before any write
    durable = with_retries(lambda: open_study(spec, handle, seed), "opening the study")
    run = with_retries(lambda: LocalRun(durable, handle, spec), "reading the study")
    summary = _resume_summary(run.done_at_start)
    run.study.sampler = make_sampler(spec, seed + summary.finished)  # resumed runs draw anew
    summary.proposals = run.study.sampler.stats
    hard = hard_constraints(spec)
    bar = tqdm(total=target_trials, initial=run.finished, unit="trial", file=sys.stderr,
               disable=not show_progress, dynamic_ncols=True)
    gc.freeze()  # what the process holds now (modules, the study read) the collector skips:
    try:  # its full passes walked all of it (~3% of a swept moe-400b search)
        _loop(run, spec, target_trials, hard, summary, bar)
    finally:
        gc.unfreeze()
    bar.close()
    summary.finished = run.finished
    return summary


def _loop(run: LocalRun, spec: StudySpec, target_trials: int, hard: tuple[str, ...],
          summary: RunSummary, bar: tqdm) -> None:
    """Batches until the study holds `target_trials` finished trials or the sampler found no
    new design (`run_study`)."""
    while run.finished < target_trials:
        size = min(spec.batch_size, target_trials - run.finished)
        batch = run_batch(run.study, spec, size, hard, summary, run.attrs())  # ask → tell
        with_retries(lambda batch=batch: run.persist(batch, target_trials), "a batch")
        bar.update(run.finished - bar.n)
        feasible = summary.feasible_before + summary.feasible
        bar.set_postfix_str(f"feasible {feasible}, best area {summary.best_area:.4g}")
        if run.study.sampler.exhausted:  # every design inside the rules was tried
            summary.exhausted = True
            break


def describe_rejections(summary: RunSummary) -> str:
    """'memory_fit rejected 120, params_budget rejected 64' (most frequent first)."""
    parts = [f"{name} rejected {count}" for name, count in summary.rejected_by.most_common()]
    return ", ".join(parts) or "no trial ran"
