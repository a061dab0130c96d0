"""The cost model with its fitted serving terms as variables, so that they can be refitted fold by
fold in seconds.

Every fitted serving term enters a step's time linearly: the scheduler's host time h·n
(`cost_model.host`: n the sequences the busiest rank's step schedules) and the fused-MoE
overhead f·F + m·S (`cost_model.layers.moe_overhead_s`: F its floor, S its two size terms, per
local routed token copy and per scanned routing index, each fitted per engine and experts'
format, `Env.moe_terms`; the package ships f = m = 1 on every engine). So each step-time
computation (`serving_times` of an aggregated point, each `stage_forward` of a disaggregated one)
is evaluated once at four settings of (h, f, m), (0, 0, 0), (1 µs, 0, 0), (0, 1, 0) and (0, 1, 1)
(a dense model: the first two), and every array it returns is then
    base + h·∂h + f·∂f + m·∂m
at any setting. Everything after the step times runs as shipped on them (the real functions are
called: request lifetime, throughput, the balancer's round wait, the polling wait, the benchmark
TTFT with the terms given for the engine, the xPyD pools); the memory limit, which none of the
terms touches, is computed once. `loso.check_against_full` compares rows scored this way with
the cost model evaluated in full at the same terms (`terms.full_model_at`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields, is_dataclass, replace
from functools import partial

import numpy as np

import cost_model.disaggregated as disaggregated_module
import cost_model.evaluate as evaluate_module
from cost_model import host
from cost_model.disaggregated import PoolLimits
from tests.benchmarks.serving.scenarios import Models
from tests.benchmarks.serving.terms import MOE_VARIANTS, Terms, moe_efficiencies, patched

H_PROBE_S = 1e-6  # the host time at which ∂h is taken (exact: the model is linear in h)
# what this module replaces while it evaluates, by module (cost_model's own names)
REAL_POINTS = evaluate_module._points
REAL_SERVING_TIMES = evaluate_module.serving_times
REAL_DISAGGREGATED = disaggregated_module.evaluate_disaggregated
REAL_STAGE_FORWARD = disaggregated_module.stage_forward
REAL_MAX_CONCURRENCY = disaggregated_module.max_concurrency


# ---- linear step times -------------------------------------------------------------------


def _leaves(obj) -> list:
    if is_dataclass(obj):
        return [leaf for f in fields(obj) for leaf in _leaves(getattr(obj, f.name))]
    return [np.asarray(obj, dtype=np.float64)]


def _rebuild(template, leaves):
    if is_dataclass(template):
        return type(template)(**{f.name: _rebuild(getattr(template, f.name), leaves)
                                 for f in fields(template)})
    return next(leaves)


def _host_at(h_s: float):
    return patched(host, request_step_s=lambda cpu: h_s)


@dataclass
class Linear:
    """A tree of arrays as base + h·∂h + f·∂f + m·∂m (∂f, ∂m None for a dense model)."""

    template: object
    base: list
    dh: list
    df: list | None
    dm: list | None

    @classmethod
    def of(cls, call, env, moe: bool) -> Linear:
        """`call(env)` (a step-time function of the environment) at the basis settings."""
        if not moe:
            with _host_at(0.0):
                base = call(env)
            with _host_at(H_PROBE_S):
                probe = call(env)
            return cls(base, _leaves(base), _slope(probe, base), None, None)
        effs = moe_efficiencies(env.eff)
        at = {name: replace(env, eff=eff) for name, eff in effs.items()}
        with _host_at(0.0):
            base, floor, full = (call(at[name]) for name in ("none", "floor", "full"))
        with _host_at(H_PROBE_S):
            probe = call(at["none"])
        return cls(base, _leaves(base), _slope(probe, base), _difference(floor, base),
                   _difference(full, floor))

    def at(self, thetas: np.ndarray):
        """The tree at settings `thetas` (G × (h s, f, m)): G = 1 keeps every array's shape;
        G > 1 puts the settings on the leading (candidates) axis, of size 1 or G in every
        array."""
        if len(thetas) == 1:
            h_s, f, m = thetas[0]
        else:
            h_s, f, m = (thetas[:, [i]] for i in range(3))
        if self.df is None:
            leaves = [b + _lead(h_s, b) * d for b, d in zip(self.base, self.dh)]
        else:
            leaves = [b + _lead(h_s, b) * dh + _lead(f, b) * df + _lead(m, b) * dm
                      for b, dh, df, dm in zip(self.base, self.dh, self.df, self.dm)]
        return _rebuild(self.template, iter(leaves))


def _lead(value, leaf: np.ndarray):
    """A scalar, or a (G, 1) column shaped to lead `leaf`'s axes (its first of size 1)."""
    if np.ndim(value) == 0:
        return value
    if leaf.ndim == 0 or leaf.shape[0] not in (1, len(value)):
        raise ValueError(f"a step-time array of shape {leaf.shape} has no candidates axis to "
                         "carry the settings on")
    return np.reshape(value, (-1,) + (1,) * (leaf.ndim - 1))


def _difference(a, b) -> list:
    return [x - y for x, y in zip(_leaves(a), _leaves(b))]


def _slope(probe, base) -> list:
    return [d / H_PROBE_S for d in _difference(probe, base)]


def _is_moe(a) -> bool:
    return bool(np.any(np.asarray(a.ffn.moe_layers) > 0))


# ---- the two entry points ------------------------------------------------------------------


@dataclass
class _Aggregated:
    args: tuple  # what evaluate_points passed to evaluate._points
    times: dict = field(default_factory=dict)  # serving_times call index -> Linear


@dataclass
class _Disaggregated:
    stages: dict = field(default_factory=dict)  # call index -> Linear
    memory: dict = field(default_factory=dict)  # call index -> memory limit


@dataclass
class Batch:
    """Settings evaluated together (the same benchmark-TTFT terms: they are applied after the
    step times, inside the real functions), and their batched operating points by call."""

    terms: list[Terms]
    points: dict = field(default_factory=dict)
    _thetas: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len({t.ttft for t in self.terms}) != 1:
            raise ValueError("the settings of one batch must share their benchmark-TTFT terms")

    def thetas(self, hw, engine: str | None) -> np.ndarray:
        key = (hw.host_cpu, engine)
        if key not in self._thetas:
            self._thetas[key] = np.array([_theta(t, hw, engine) for t in self.terms])
        return self._thetas[key]


class FastModels:
    """`evaluate_points` and `evaluate_disaggregated` at any `Terms`, with step times linear in
    them: each call's basis evaluations are made once and kept; a batch of settings is
    evaluated in one call, the settings on the candidates axis, and each setting's `Models`
    reads its slice."""

    def __init__(self) -> None:
        self._aggregated: dict = {}
        self._disaggregated: dict = {}

    def models(self, terms: Terms) -> Models:
        return self.batch([terms])[0]

    def batch(self, terms: list[Terms], shared: Batch | None = None) -> list[Models]:
        """One `Models` per setting; they share one cache of batched points, `shared` (drop
        them to free it)."""
        shared = shared or Batch(list(terms))
        return [Models(partial(self._points, shared, g), partial(self._disaggregated_at, shared, g))
                for g in range(len(terms))]

    def _points(self, shared: Batch, g: int, archs, deps, hw, workload, concurrency=None):
        return _slice(self.batch_points(shared, archs, deps, hw, workload, concurrency), g,
                      len(shared.terms))

    def batch_points(self, shared: Batch, archs, deps, hw, workload, concurrency=None):
        """The operating points of every setting of `shared` (one candidate each)."""
        key = ("agg", id(archs[0]), deps[0], hw.name, workload, _concurrency_key(concurrency))
        if key not in shared.points:
            entry = self._aggregated.get(key[1:])
            if entry is None:
                entry = self._aggregated[key[1:]] = _Aggregated(
                    _captured_points_args(archs, deps, hw, workload, concurrency))
            thetas = shared.thetas(hw, workload.engine)
            try:
                shared.points[key] = _replay(entry, thetas, shared.terms[0])
            except ValueError:  # step times that enter a broadcast of one candidate's shape
                shared.points[key] = _stack([_replay(entry, thetas[g:g + 1], shared.terms[g])
                                             for g in range(len(thetas))])
        return shared.points[key]

    def _disaggregated_at(self, shared: Batch, g: int, archs, prefill, decode, hw, workload,
                          concurrency=None, limits: PoolLimits = PoolLimits()):
        """The batch as that many candidates of the same deployment (the pools' times enter
        broadcasts of the candidates' shape), each candidate one setting."""
        settings = len(shared.terms)
        key = ("disagg", id(archs[0]), prefill[0], decode[0], hw.name, workload,
               _concurrency_key(concurrency), limits, settings)
        if key not in shared.points:
            entry = self._disaggregated.setdefault(key[1:], _Disaggregated())
            thetas = shared.thetas(hw, workload.engine)
            stage, memory = itertools.count(), itertools.count()
            with patched(disaggregated_module, shipped_terms=shared.terms[0].ttft_terms,
                          stage_forward=partial(_linear, REAL_STAGE_FORWARD, entry.stages, thetas,
                                                stage),
                          max_concurrency=partial(_memory_once, entry, memory)):
                shared.points[key] = REAL_DISAGGREGATED(
                    archs * settings, prefill * settings, decode * settings, hw, workload,
                    concurrency, limits)
        return _slice(shared.points[key], g, settings)


def _slice(points, g: int, settings: int):
    """Setting g's operating points out of a batch (arrays whose candidates axis holds the
    settings); a batch of one is returned as it is."""
    return points if settings == 1 else _Setting(points, g, settings)


class _Setting:
    """A read-only view of one setting's rows of batched operating points (each field sliced
    when read: the scenarios read a few)."""

    def __init__(self, points, g: int, settings: int) -> None:
        self._points, self._g, self._settings = points, g, settings

    def __getattr__(self, name: str):
        value = getattr(self._points, name)
        if isinstance(value, np.ndarray) and value.ndim >= 2 and value.shape[0] == self._settings:
            return value[self._g:self._g + 1]
        return value


def _concurrency_key(concurrency):
    return None if concurrency is None else tuple(np.ravel(concurrency).tolist())


def _theta(terms: Terms, hw, engine: str | None) -> tuple[float, float, float]:
    return (terms.host_s(hw.host_cpu), *MOE_VARIANTS[terms.moe_variant(engine)])


def _captured_points_args(archs, deps, hw, workload, concurrency) -> tuple:
    """The arguments `evaluate_points` hands to `evaluate._points` (memory limit and grid
    included), captured instead of evaluated."""
    captured = []
    with patched(evaluate_module, _points=lambda *args: captured.append(args)):
        evaluate_module.evaluate_points(archs, deps, hw, workload, concurrency)
    if len(captured) != 1:
        raise RuntimeError("cost_model.evaluate no longer computes its points in `_points`: "
                           "update tests/benchmarks/serving/fast.py")
    return captured[0]


def _replay(entry: _Aggregated, thetas: np.ndarray, terms: Terms):
    """evaluate._points on the captured arguments, its step times from `entry`'s linear
    forms at `thetas` (each `serving_times` call by its index in the evaluation)."""
    times = partial(_linear, REAL_SERVING_TIMES, entry.times, thetas, itertools.count())
    with patched(evaluate_module, serving_times=times, shipped_terms=terms.ttft_terms):
        return REAL_POINTS(*entry.args)


def _stack(points: list):
    """Operating points of one candidate each, stacked on the candidates axis."""
    def stacked(name):
        values = [getattr(p, name) for p in points]
        return np.concatenate(values) if isinstance(values[0], np.ndarray) else values[0]
    return replace(points[0], **{f.name: stacked(f.name) for f in fields(points[0])})


def _linear(real, cache: dict, thetas, counter, a, d, env, *args, **kwargs):
    """`real`'s result at `thetas`, from the linear form of its call number `next(counter)`
    (built once per entry and kept in `cache`): `serving_times` or `stage_forward`."""
    index = next(counter)
    if index not in cache:
        call = lambda e: real(a, d, e, *args, **kwargs)  # noqa: E731
        cache[index] = Linear.of(call, env, _is_moe(a))
    return cache[index].at(thetas)


def _memory_once(entry: _Disaggregated, counter, *args, **kwargs):
    index = next(counter)
    if index not in entry.memory:
        entry.memory[index] = REAL_MAX_CONCURRENCY(*args, **kwargs)
    return entry.memory[index]
