"""Budget-true proposals: a sampler that hands out only new designs inside the study's rules.

Without it most trials are thrown away: a uniform draw of `moe-400b-gb300-nvl72` is inside its
parameter budget 5% of the time, NSGA-II's children repeat designs the study already holds, and
every such trial is asked, built and told for nothing. `ProposalSampler` wraps the study's
sampler (NSGA-II, TPE, random) and conditions it on the rules, by rejection:

1. it asks the inner sampler for a whole proposal (`sample_relative` on the full static space,
   the rest from its `sample_independent`), exactly as the inner sampler would propose it; a
   genetic sampler's (NSGA-II's) children of one generation are independent draws from the
   same parents, so they are drawn `INNER_BLOCK` at a time and their shape rules checked on
   columns at once (one row costs as much as a thousand), handed out in draw order to the
   generation's trials, the rest dropped when the generation ends;
2. it keeps the proposal if it is a model inside the parameter budget and the aspect-ratio band
   with an aligned hidden size, where those constraints are hard (`param_table.rule_masks`,
   exact counts on columns), if some deployment of the space (the
   study's own, when deployments are sampled) runs on the study's engine and passes every
   static hard constraint (alignment, divisibility, block scaling, GPUs: all but `memory_fit`,
   which needs the cost model), and if its design (`design_identity`) is not in the study yet
   nor handed out before; else it asks again.

Redrawing until a proposal is accepted draws from the inner sampler's distribution conditioned on
the rules (rejection sampling does not bias it). When the inner sampler proposes independently
(NSGA-II's first generation, TPE's start-up trials, random search: uniform draws), proposals are
drawn `UNIFORM_BATCH` at a time on columns with the same uniform distribution, and the accepted
ones are kept for the next trials. After `INNER_DRAWS` rejected proposals of the inner sampler
(a converged NSGA-II population whose every child is a design already tried) the trial takes the
next accepted uniform proposal instead ("fallback", counted). Only when no new design passes in
`UNIFORM_DRAWS` uniform draws (a space nearly exhausted) is a repeat handed out; `exhausted`
says so, and the runner stops there.

`stats` counts draws and their fate (acceptance = accepted / draws); the runner reports it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import FrozenTrial

from search.study.evaluation import constraint_rules, hard_constraints, passes_static
from search.study.param_table import (
    NAMED, column, complete_columns, first_broken, rule_masks,
)  # fmt: skip
from search.study.space import (
    DEPLOYMENT_PARAMS, build_candidate, complete_params, gpus_allowed, runnable_columns,
    searched_dimensions, sweeps_deployments,
)  # fmt: skip
from search.study.spec import StudySpec
from constraints import DeploymentColumns

INNER_DRAWS = 64  # proposals asked of the inner sampler per trial before a uniform fallback
INNER_BLOCK = 16  # a genetic sampler's children drawn (and checked on columns) at a time
UNIFORM_BATCH = 1024  # uniform proposals drawn (and checked on columns) at a time
UNIFORM_DRAWS = 65_536  # uniform proposals tried before a space counts as exhausted
# why a proposal was rejected, besides the first shape rule it breaks (`param_table.rule_masks`:
# shape, params_budget, alignment, aspect_ratio): no deployment passes the static hard constraints
STATIC = "static constraints"
MEMO_PROPOSALS = 50_000  # checks kept (NSGA-II proposes the same params again and again)


def sampled_distributions(spec: StudySpec) -> dict[str, BaseDistribution]:
    """The distribution of each dimension Optuna samples (`space.suggest_params`: the searched
    ones, less the deployment dimensions when the study sweeps them)."""
    skip = DEPLOYMENT_PARAMS if sweeps_deployments(spec) else ()
    out: dict[str, BaseDistribution] = {}
    for name, dim in searched_dimensions(spec.space).items():
        if name in skip:
            continue
        out[name] = CategoricalDistribution(dim.choices) if dim.choices is not None else \
            IntDistribution(dim.min, dim.max, step=dim.step)
    return out


class Rules:
    """Whether a proposal may become a trial, and what it is (its design identity)."""

    def __init__(self, spec: StudySpec, memo: int = MEMO_PROPOSALS):
        self.spec, self.memo = spec, memo
        self.rules, self.hard = constraint_rules(spec), hard_constraints(spec)
        self.sweeps = sweeps_deployments(spec)
        self._memo: dict[tuple, tuple[str | None, Any]] = {}
        self._one_row = complete_columns(spec, {}, 1)  # the fixed dimensions of one proposal

    def shape_ok(self, columns: dict[str, np.ndarray], rows: int
                 ) -> tuple[np.ndarray, dict[str, int]]:
        """(`within_rules` of `rows` proposals given as columns of the sampled dimensions, how
        many break each rule first: `first_broken`)."""
        masks = self._rule_masks(columns, rows)
        return np.logical_and.reduce(list(masks.values())), first_broken(masks)

    def first_broken_rule(self, columns: dict[str, np.ndarray], rows: int) -> list[str | None]:
        """Per proposal (`rows` given as columns of the sampled dimensions), the first shape
        rule it breaks (`rule_masks`' order), None if none."""
        why: list[str | None] = [None] * rows
        for name, ok in self._rule_masks(columns, rows).items():
            for i in np.flatnonzero(~ok):
                why[i] = why[i] or name
        return why

    def _rule_masks(self, columns: dict[str, np.ndarray], rows: int) -> dict[str, np.ndarray]:
        """`rule_masks` of `rows` proposals given as columns of the sampled dimensions, the
        study's fixed dimensions filled in (one proposal: from the row kept for it)."""
        complete = {**self._one_row, **columns} if rows == 1 else \
            complete_columns(self.spec, columns, rows)
        return rule_masks(self.spec, complete)

    def check(self, params: dict[str, Any], shape_checked: bool = False
              ) -> tuple[str | None, Any]:
        """(why the proposal is no model inside the shape rules, None if it is; its design
        identity: `design_identity`'s, the params themselves for a shape that is no model)."""
        key = tuple(sorted(params.items()))
        if key not in self._memo:
            if len(self._memo) >= self.memo:
                self._memo.pop(next(iter(self._memo)))  # the oldest
            self._memo[key] = self._check(params, key, shape_checked)
        return self._memo[key][:2]

    def identity(self, params: dict[str, Any]) -> Any:
        """The design identity of sampled params (a trial of the study)."""
        return self.check(params, shape_checked=True)[1]

    def _check(self, params: dict[str, Any], key: tuple, shape_checked: bool) -> tuple:
        if not shape_checked:
            columns = {n: np.array([v], dtype=object if n in NAMED else np.int64)
                       for n, v in params.items()}
            ok, broken = self.shape_ok(columns, 1)
            if not ok[0]:
                return next(iter(broken)), key, None
        cand = build_candidate(self.spec, complete_params(self.spec, params))
        if not cand.valid:
            return "shape", key, None
        return None, (cand.arch.design_key, cand.deployment), cand

    def candidate(self, params: dict[str, Any]):
        """The candidate `check` built for a proposal it found a model (None: not kept)."""
        found = self._memo.get(tuple(sorted(params.items())))
        return None if found is None else found[2]

    def static_ok(self, params: dict[str, Any]) -> bool:
        """Whether some deployment of the proposal (of the space when the study sweeps them, its
        own when they are sampled) passes every static hard constraint (all but memory_fit)."""
        cand = self.candidate(params)
        if self.sweeps:
            cols = runnable_columns(self.spec, cand.arch)
            if not len(cols):
                return False
        elif not gpus_allowed(self.spec, cand.deployment):
            return False
        else:
            cols = DeploymentColumns.of([cand.deployment])
        return bool(passes_static(cand.arch, cols, self.rules, self.hard,
                                  every_if_none=False).any())


class ProposalSampler(optuna.samplers.BaseSampler):
    """`inner` conditioned on the study's rules and on designs being new (module docstring)."""

    def __init__(self, inner: optuna.samplers.BaseSampler, spec: StudySpec, seed: int | None):
        self.inner = inner
        self.space = sampled_distributions(spec)
        self.check = Rules(spec)
        self.stats: Counter = Counter()
        self.exhausted = False
        self.repeats: set[int] = set()  # numbers of the trials handed a repeat (exhausted)
        self._rng = np.random.default_rng(seed)
        self._seen: set = set()
        self._read = 0
        self._queue: list[dict[str, Any]] = []
        self._pool: list[tuple[dict[str, Any], str | None]] = []  # inner proposals, checked
        self._pool_generation: int | None = None

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial
                                    ) -> dict[str, BaseDistribution]:
        return dict(self.space)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if not self.space:
            return {}
        self._read_study(study)
        for _ in range(INNER_DRAWS):
            drawn = self._next_inner(study, trial)
            if drawn is None:  # the inner sampler draws independently: uniformly
                return self._uniform(trial)
            proposal, why = drawn
            self.stats["drawn"] += 1
            if why is not None:
                self.stats[f"rejected: {why}"] += 1
            elif self._accept(proposal, "inner", shape_checked=True):
                return proposal
        self.stats["fallback"] += 1
        return self._uniform(trial)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self.inner.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.inner.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state, values) -> None:
        self.inner.after_trial(study, trial, state, values)

    def candidate_of(self, params: dict[str, Any]):
        """The candidate built when a trial's params (all of them, `suggest_params`') were
        checked, if still kept; None otherwise (e.g. a repeat handed out, or a fixed value)."""
        if any(name not in params for name in self.space):
            return None
        return self.check.candidate({name: params[name] for name in self.space})

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()
        self._rng = np.random.default_rng()

    # ---- checks -------------------------------------------------------------------------------

    def _accept(self, proposal: dict[str, Any], source: str, shape_checked: bool = False
                ) -> bool:
        """Whether `proposal` (drawn from `source`: "inner" or "uniform"; with `shape_checked`,
        already counted as drawn and inside the shape rules) may become a trial; counts its
        fate."""
        if not shape_checked:
            self.stats["drawn"] += 1
        why, identity = self.check.check(proposal, shape_checked)
        if why is None and identity in self._seen:
            why = "repeat"
        if why is None and not self.check.static_ok(proposal):
            why = STATIC
        if why is not None:
            self.stats[f"rejected: {why}"] += 1
            return False
        self._seen.add(identity)
        self.stats["accepted"] += 1
        self.stats[f"accepted from {source}"] += 1
        return True

    # ---- the inner sampler's proposals, checked a block at a time -----------------------------

    def _next_inner(self, study: optuna.Study, trial: FrozenTrial
                    ) -> tuple[dict[str, Any], str | None] | None:
        """The inner sampler's next proposal and the first shape rule it breaks (None: none);
        None when the inner sampler draws independently. A genetic sampler's children of one
        generation are independent draws from the same parents, so they are drawn
        `INNER_BLOCK` at a time and checked on columns at once (`_inner_block`); the rest wait
        for the next trials of the generation and are dropped when it ends."""
        generation = self._generation(study, trial)
        if generation is None or generation != self._pool_generation:
            self._pool, self._pool_generation = [], generation
        if not self._pool:
            self._pool = self._inner_block(study, trial, 1 if generation is None else INNER_BLOCK)
        return self._pool.pop(0) if self._pool else None

    def _generation(self, study: optuna.Study, trial: FrozenTrial) -> int | None:
        """`trial`'s generation (as the genetic sampler's `sample_relative` sets it); None for
        other samplers, whose proposals are drawn one at a time."""
        if not isinstance(self.inner, optuna.samplers.BaseGASampler):
            return None
        return self.inner.get_trial_generation(study, trial)

    def _inner_block(self, study: optuna.Study, trial: FrozenTrial, size: int
                     ) -> list[tuple[dict[str, Any], str | None]]:
        """`size` proposals of the inner sampler with their first broken shape rule ([] when
        it draws independently)."""
        block = []
        for _ in range(size):
            proposal = self.inner.sample_relative(study, trial, self.space)
            if not proposal:
                return []
            for name, dist in self.space.items():
                if name not in proposal:
                    proposal[name] = self.inner.sample_independent(study, trial, name, dist)
            block.append(proposal)
        columns = {name: column([p[name] for p in block], name) for name in self.space}
        return list(zip(block, self.check.first_broken_rule(columns, len(block))))

    def _read_study(self, study: optuna.Study) -> None:
        """Add the designs of the study's trials not read yet (a trial without all its params,
        e.g. one asked in this batch and not suggested yet, stops the scan until it has them)."""
        trials = study.get_trials(deepcopy=False)
        for trial in trials[self._read:]:
            if not all(name in trial.params for name in self.space):
                if not trial.state.is_finished():
                    break
            else:
                self._seen.add(self.check.identity({n: trial.params[n] for n in self.space}))
            self._read += 1

    # ---- uniform proposals on columns ---------------------------------------------------------

    def _uniform(self, trial: FrozenTrial) -> dict[str, Any]:
        """The next uniform proposal that passes (drawn on columns, `UNIFORM_BATCH` at a time;
        those inside the shape rules wait in a queue for the next trials)."""
        tried = UNIFORM_DRAWS if self.exhausted else 0  # exhausted stays exhausted
        while tried < UNIFORM_DRAWS:
            while self._queue:
                proposal = self._queue.pop()
                if self._accept(proposal, "uniform", shape_checked=True):
                    return proposal
            tried += UNIFORM_BATCH
            self._queue = self._draw_batch()[::-1]
        self.exhausted = True
        self.stats["exhausted"] += 1
        self.repeats.add(trial.number)
        return {name: _python(_uniform_column(self._rng, dist, 1)[0])
                for name, dist in self.space.items()}

    def _draw_batch(self) -> list[dict[str, Any]]:
        """`UNIFORM_BATCH` uniform proposals; those inside the shape rules, in draw order."""
        columns = {name: _uniform_column(self._rng, dist, UNIFORM_BATCH)
                   for name, dist in self.space.items()}
        ok, broken = self.check.shape_ok(columns, UNIFORM_BATCH)
        self.stats["drawn"] += UNIFORM_BATCH
        self.stats.update({f"rejected: {rule}": count for rule, count in broken.items()})
        return [{name: _python(columns[name][i]) for name in self.space}
                for i in np.flatnonzero(ok)]


def _uniform_column(rng: np.random.Generator, dist: BaseDistribution, size: int) -> np.ndarray:
    """Uniform draws of one distribution (as `RandomSampler`: uniform over the choices, over
    the grid of an integer range)."""
    if isinstance(dist, CategoricalDistribution):
        choices = np.array(dist.choices, dtype=object)
        picked = choices[rng.integers(0, len(choices), size)]
        return picked if isinstance(dist.choices[0], str) else picked.astype(np.int64)
    steps = (dist.high - dist.low) // dist.step + 1
    return dist.low + dist.step * rng.integers(0, steps, size, dtype=np.int64)


def _python(value: Any) -> Any:
    """A numpy scalar as the plain Python value Optuna stores."""
    return value.item() if isinstance(value, np.generic) else value


def describe(stats: Counter) -> str:
    """'proposals: 400 accepted of 9,344 drawn (4.3%); rejected: params_budget 8,800, repeat
    90, …'."""
    drawn, accepted = stats["drawn"], stats["accepted"]
    share = f" ({accepted / drawn:.1%})" if drawn else ""
    rejected = sorted(((k.removeprefix("rejected: "), v) for k, v in stats.items()
                       if k.startswith("rejected: ")), key=lambda kv: -kv[1])
    parts = [f"proposals: {accepted:,} accepted of {drawn:,} drawn{share}"]
    if rejected:
        parts.append("rejected: " + ", ".join(f"{k} {v:,}" for k, v in rejected))
    if stats["fallback"]:
        parts.append(f"{stats['fallback']:,} uniform fallbacks")
    return "; ".join(parts)


def wrap(sampler: optuna.samplers.BaseSampler, spec: StudySpec, seed: int | None
         ) -> ProposalSampler:
    """The study's sampler, conditioned on its rules (`ProposalSampler`)."""
    return ProposalSampler(sampler, spec, seed)
