"""Run (or resume) a study: ask a batch, build and score it in one vectorized pass, record
constraints and attributes, tell, make the batch durable, repeat until the study holds the
requested number of finished trials. Never reads `study.trials` inside the loop."""

from __future__ import annotations

import gc
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field

import optuna
from optuna.samplers.nsgaii import PolynomialMutation
from optuna.trial import FrozenTrial, TrialState
from tqdm import tqdm

from search.study import proposals
from search.study.distinct_children import FlatNSGAIISampler, adopt
from search.study.errors import SpecError
from search.study.evaluation import Outcome, evaluate_batch, hard_constraints, stored_attrs
from search.study.exhaustive import EXHAUSTIVE_ATTR
from search.study.record import store_or_check_spec
from search.study.resilience import (
    BatchHeartbeat,
    ask_batch,
    drop_surplus,
    fail_orphans,
    with_retries,
)
from search.study.space import build_candidate, suggest_params, sweeps_deployments
from search.study.spec import StudySpec
from search.study.storage import StorageHandle, WorkerRDBStorage

FINISHED = (TrialState.COMPLETE, TrialState.FAIL)
# A worker whose remaining trials all run in other workers polls the study this often.
WAIT_FOR_OTHERS_S = 0.5


@dataclass
class RunSummary:
    finished: int = 0  # finished trials in the study after the run
    ran: int = 0  # trials this process finished
    feasible: int = 0  # feasible trials this process finished
    feasible_before: int = 0  # feasible trials the study held when this process started
    lost: int = 0  # trials another worker failed as stale before this one could tell them
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
    # Optuna's own warnings are errors archscout reports itself, in one line (e.g. on a database
    # restart it logs the SQL it was running and blames "the number of IN variables")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(study_name=spec.name, storage=handle.storage,
                                directions=spec.objectives.directions,
                                sampler=make_sampler(spec, seed), load_if_exists=True)
    if study.directions != [optuna.study.StudyDirection[d.upper()]
                            for d in spec.objectives.directions]:
        raise SpecError(f"study `{spec.name}` exists with other objectives; use another `name`")
    store_or_check_spec(study, spec)
    _name_metrics(study, spec)
    handle.flush()
    return study


def _name_metrics(study: optuna.Study, spec: StudySpec) -> None:
    """The objectives' names on the study, so optuna-dashboard shows them (not "0", "1")."""
    names = list(spec.objectives.names)
    if study.metric_names != names:
        with warnings.catch_warnings():  # set_metric_names is experimental in Optuna 5.0
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(names)


def finished_trials(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=FINISHED))


def _record(trial: optuna.Trial, outcome: Outcome, hard: tuple[str, ...]) -> None:
    for key, value in stored_attrs(outcome).items():
        trial.set_user_attr(key, value)
    for name, violation in outcome.constraints.items():
        # Only violated hard constraints are recorded with set_constraint: Optuna treats absent
        # keys as satisfied and its samplers sum positive violations, so this is equivalent and
        # saves a storage write per satisfied constraint; every value is kept in `details`.
        if name in hard and violation.value > 0:
            trial.set_constraint(name, float(violation.value))


def run_batch(study: optuna.Study, spec: StudySpec, size: int, hard: tuple[str, ...],
              summary: RunSummary, handle_shared: bool = True,
              target: int | None = None) -> None:
    """Ask `size` trials, score them in one pass, tell them. On a shared storage the asked
    trials are marked as they are asked, and those beyond `target` are dropped unevaluated."""
    trials = ask_batch(study, size, shared=handle_shared)
    if handle_shared and target is not None:
        trials = drop_surplus(study, trials, target)
        size = len(trials)
    with BatchHeartbeat(study, trials):
        cands = [build_candidate(spec, suggest_params(t, spec.space, spec)) for t in trials]
        trials, cands = _without_repeats(study, trials, cands)
        for trial, outcome in zip(trials, evaluate_batch(spec, cands)):
            try:
                _tell(study, trial, outcome, hard, summary)
            except optuna.exceptions.UpdateFinishedTrialError:
                summary.lost += 1  # failed as stale by another worker meanwhile: not ours now
    summary.ran += size


def _without_repeats(study: optuna.Study, trials: list, cands: list) -> tuple[list, list]:
    """The trials whose design is new: a repeat (handed out only once every design inside the
    study's rules was tried, `ProposalSampler.exhausted`) is not scored again; it ends PRUNED,
    which no storage keeps and no count includes."""
    repeats = getattr(study.sampler, "repeats", set())
    kept = [(t, c) for t, c in zip(trials, cands) if t.number not in repeats]
    for trial in trials:
        if trial.number in repeats:
            study.tell(trial, state=TrialState.PRUNED)
    return [t for t, _ in kept], [c for _, c in kept]


def _tell(study: optuna.Study, trial: optuna.Trial, outcome: Outcome, hard: tuple[str, ...],
          summary: RunSummary) -> None:
    _record(trial, outcome, hard)
    if outcome.values is None:
        study.tell(trial, state=TrialState.FAIL)
        summary.rejected_by["shape"] += 1
        return
    study.tell(trial, outcome.values)
    _count(summary, outcome, hard)


def _count(summary: RunSummary, outcome: Outcome, hard: tuple[str, ...]) -> None:
    broken = [n for n in hard if outcome.constraints[n].value > 0]
    summary.rejected_by.update(broken)
    if not broken:
        summary.feasible += 1
        area = outcome.attrs["frontier_area"]
        if not summary.best_area >= area:  # NaN-safe maximum
            summary.best_area = area


class Workspace:
    """Where a run asks and tells its trials, and how they reach the storage.

    A shared journal (`--workers N` on the default storage) is used directly. The default
    single-writer journal is not: Optuna's JournalStorage costs ~55 µs per operation and a
    trial takes ~18 of them (ask, each parameter, attributes, constraints, tell), more than the
    trial's own work. So the run samples in an in-memory copy of the study (its finished
    trials, loaded once) and each finished trial of a batch reaches the journal as one record
    (`add_trials`), appended with one fsync per batch. The sampler sees the same trials either
    way. (RDB storages: `RemoteWorkspace`.)"""

    def __init__(self, study: optuna.Study, handle: StorageHandle):
        self.durable, self.handle = study, handle
        self.study = study
        # an exact front's trials (`exhaustive`) are no sampled trial: not counted, not sampled from
        self.done_at_start = [t for t in study.get_trials(deepcopy=False, states=FINISHED)
                              if not t.user_attrs.get(EXHAUSTIVE_ATTR)]
        self.finished = len(self.done_at_start)
        if not handle.shared:
            self.study = _local_copy(study)
            add_finished(self.study, self.done_at_start)
        self._persisted = len(self.study.get_trials(deepcopy=False))
        self.in_flight = False  # a batch was started and has not finished (cut short)

    def counts(self, target: int) -> tuple[int, int]:
        """(finished trials, trials still to ask) of the study."""
        if self.handle.shared:
            self.finished, missing = _shared_counts(self.study, self.handle, target)
            return self.finished, missing
        return self.finished, max(target - self.finished, 0)

    def run(self, spec: StudySpec, size: int, hard, summary: RunSummary, target: int) -> None:
        # only shared stores need owners, heartbeats and the target check
        run_batch(self.study, spec, size, hard, summary, self.handle.shared, target)
        self.persist()
        if not self.handle.shared:
            self.finished += size

    def recover(self) -> None:
        """Before retrying a batch cut short: settle what it asked (ours: PRUNED)."""
        fail_orphans(self.study, self.handle)

    def persist(self) -> None:
        """Make every trial finished since the last call durable (a trial left unfinished by
        an interrupted batch is dropped, as the journal never holds RUNNING trials)."""
        if self.study is not self.durable:
            trials = self.study.get_trials(deepcopy=False)
            self.durable.add_trials([t for t in trials[self._persisted:] if t.state in FINISHED])
            self._persisted = len(trials)
        self.handle.flush()


def _local_copy(study: optuna.Study) -> optuna.Study:
    """An empty in-memory study with the objectives and sampler of `study`."""
    return optuna.create_study(directions=study.directions, sampler=study.sampler,
                               storage=LocalStorage())


def add_finished(study: optuna.Study, trials: list[FrozenTrial]) -> None:
    """`study.add_trials` of trials read from a storage (validated when they were stored). The
    garbage collector waits meanwhile: these allocations hold no cycles to collect, and each of
    its full passes would walk the whole decoded study (1.7 of 2.2 s at 20,000 trials)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        for trial in trials:
            study._storage.create_new_trial(study._study_id, template_trial=trial)  # noqa: SLF001
    finally:
        if paused:
            gc.enable()


class LocalStorage(optuna.storages.InMemoryStorage):
    """Optuna's in-memory storage, taking finished trials in without a deep copy.

    `add_trials` deep-copies every trial (InMemoryStorage.create_new_trial): loading 20,000
    finished trials into a run's copy took ~8 s, nearly all of a resume. A finished trial
    cannot change any more (every update of one is refused), so the copy shares its params,
    distributions and attributes with the trial it was read as; only its number and id are its
    own. Trials asked here are created as Optuna creates them."""

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        if template_trial is None or not template_trial.state.is_finished():
            return super().create_new_trial(study_id, template_trial)
        with self._lock:  # InMemoryStorage.create_new_trial (Optuna 5.0), less the deep copy
            self._check_study_id(study_id)
            trial = object.__new__(FrozenTrial)  # copy.copy, less its generic reduce (~60 µs)
            trial.__dict__.update(template_trial.__dict__)
            self._max_trial_id += 1
            trial._trial_id, trial.number = self._max_trial_id, len(self._studies[study_id].trials)
            self._trial_id_to_study_id_and_number[trial._trial_id] = (study_id, trial.number)
            self._studies[study_id].trials.append(trial)
            self._update_cache(trial._trial_id, study_id)
            return trial._trial_id


class RemoteWorkspace:
    """A run on an RDB storage (PostgreSQL; any number of workers on any number of machines).

    Optuna's RDBStorage commits each operation: ~30 transactions per trial. Here a worker
    samples, asks and tells in its own in-memory copy of the study, as the journal's runs do,
    and talks to the database twice per batch: `reserve_trials` claims the batch's places as
    RUNNING trials (heartbeat row and worker name included, never beyond the target counting
    the others' running trials), and `finish_trials` writes the finished trials into them, one
    transaction each. After each batch the trials the other workers finished since the last
    read are copied in (`read_trials`: new and still-unfinished trial ids only), so the sampler
    sees the whole study a batch late at most. A worker that dies leaves its reserved trials
    RUNNING with heartbeat rows: the others abandon them (PRUNED, `fail_orphans`) and ask
    their places anew."""

    def __init__(self, study: optuna.Study, handle: StorageHandle):
        self.durable, self.handle = study, handle
        self.rdb = study._storage._backend  # noqa: SLF001 - Optuna's cache wraps the RDB storage
        self.study = _local_copy(study)
        self._after_id, self._pending, self._own = -1, set(), set()
        self._batch: list[tuple[int, optuna.Trial]] = []  # reserved trial id, local trial
        self.done_at_start = self._copy_in(self._read(), joined=False)
        self.finished = len(self.done_at_start)
        self.in_flight = False

    def _read(self) -> list[FrozenTrial]:
        """The others' trials finished since the last read (all finished ones, the first time);
        remembers which are still running, to read them again."""
        self._after_id, finished, self._pending = self.rdb.read_trials(
            self.durable._study_id, self._pending, self._after_id, self._own)  # noqa: SLF001
        return finished

    def _copy_in(self, trials: list[FrozenTrial], joined: bool = True) -> list[FrozenTrial]:
        """Add the others' newly finished `trials` to the local copy (`joined`: as trials of
        the sampler's current generation, `adopt`; else as stored, e.g. when resuming)."""
        add_finished(self.study, adopt(self.study.sampler, self.study, trials) if joined
                     else trials)
        return trials

    def counts(self, target: int) -> tuple[int, int]:
        fail_orphans(self.durable, self.handle)
        self.finished, taken = self.rdb.trial_counts(self.durable._study_id)  # noqa: SLF001
        return self.finished, max(target - taken, 0)

    def run(self, spec: StudySpec, size: int, hard, summary: RunSummary, target: int) -> None:
        self.finished, reserved = self.rdb.reserve_trials(
            self.durable._study_id, size, target)  # noqa: SLF001
        if not reserved:
            return  # the others claimed the rest meanwhile
        ids = [trial_id for trial_id, _ in reserved]
        self._own.update(ids)
        with BatchHeartbeat(self.durable, ids):
            run_batch(self.study, spec, len(ids), hard, summary, handle_shared=False)
            self._batch = list(zip(ids, self.study.get_trials(deepcopy=False)[-len(ids):]))
            summary.lost += len(self._finish())
        self._refresh()

    def _finish(self) -> list[int]:
        lost = self.rdb.finish_trials(self._batch)
        self.finished += len(self._batch) - len(lost)
        self._batch = []
        return lost

    def _refresh(self) -> None:
        self._copy_in(self._read())

    def recover(self) -> None:
        """Before retrying a batch cut short: write its finished trials if their places are
        still ours (a lost connection), then settle the rest (ours: PRUNED)."""
        if self._batch:
            self._finish()
        fail_orphans(self.durable, self.handle)


def _make_workspace(study: optuna.Study, handle: StorageHandle) -> Workspace | RemoteWorkspace:
    if isinstance(getattr(study._storage, "_backend", None), WorkerRDBStorage):  # noqa: SLF001
        return RemoteWorkspace(study, handle)
    return Workspace(study, handle)


def _one_batch(space: Workspace | RemoteWorkspace, spec: StudySpec, size: int, hard, summary,
               target: int) -> None:
    if space.in_flight:  # a retry: settle what the failed attempt left first
        space.recover()
    space.in_flight = True
    space.run(spec, size, hard, summary, target)
    space.in_flight = False


def _shared_counts(study: optuna.Study, handle: StorageHandle, target: int) -> tuple[int, int]:
    """(finished trials, trials still to ask) of a study other workers share: orphans are
    settled first, and trials the others are running count as asked, so no worker asks
    beyond the target (`drop_surplus` settles the rare case of two asking at once)."""
    fail_orphans(study, handle)
    trials = study.get_trials(deepcopy=False, states=(*FINISHED, TrialState.RUNNING))
    finished = sum(t.state in FINISHED for t in trials)
    return finished, max(target - len(trials), 0)


def _resume_summary(done: list[FrozenTrial]) -> RunSummary:
    """Counters of what the study already holds, so the progress bar shows the whole study."""
    feasible = [t for t in done if t.user_attrs.get("feasible")]
    areas = [t.user_attrs.get("frontier_area", float("nan")) for t in feasible]
    return RunSummary(finished=len(done), feasible_before=len(feasible),
                      best_area=max(areas, default=float("nan")))


def run_study(spec: StudySpec, handle: StorageHandle, target_trials: int, seed: int,
              show_progress: bool = True) -> RunSummary:
    """Run until the study holds `target_trials` finished trials (resuming what is there)."""
    sweeps_deployments(spec)  # a deployment space beyond the sweep limit fails before any write
    study = with_retries(lambda: open_study(spec, handle, seed), "opening the study")
    space = with_retries(lambda: _make_workspace(study, handle), "reading the study")
    summary = _resume_summary(space.done_at_start)
    space.study.sampler = make_sampler(spec, seed + summary.finished)  # resumed runs draw anew
    summary.proposals = space.study.sampler.stats
    hard = hard_constraints(spec)
    bar = tqdm(total=target_trials, initial=summary.finished, unit="trial", file=sys.stderr,
               disable=not show_progress, dynamic_ncols=True)
    while True:
        summary.finished, missing = with_retries(lambda: space.counts(target_trials),
                                                 "counting trials")
        bar.update(summary.finished - bar.n)
        if summary.finished >= target_trials:
            break
        if missing == 0:  # the rest is running in other workers: wait for them to finish
            time.sleep(WAIT_FOR_OTHERS_S)
            continue
        size = min(spec.batch_size, missing)
        with_retries(lambda size=size: _one_batch(space, spec, size, hard, summary, target_trials),
                     "a batch")
        feasible = summary.feasible_before + summary.feasible
        bar.set_postfix_str(f"feasible {feasible}, best area {summary.best_area:.4g}")
        if space.study.sampler.exhausted:  # every design inside the rules was tried
            summary.exhausted = True
            break
    bar.close()
    return summary


def describe_rejections(summary: RunSummary) -> str:
    """'memory_fit rejected 120, params_budget rejected 64' (most frequent first)."""
    parts = [f"{name} rejected {count}" for name, count in summary.rejected_by.most_common()]
    return ", ".join(parts) or "no trial ran"
