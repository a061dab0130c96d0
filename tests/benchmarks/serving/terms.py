"""One setting of every fitted serving term (`Terms`): the scheduler's host time per host CPU
kind, the fused-MoE terms each engine pays (its own kernels' fitted terms, scaled by a variant),
the benchmark-TTFT terms per engine; the shipped setting, and the cost model evaluated in full at
any setting (`full_model_at`: the terms set where the package reads them, as the fit scripts set
the host time)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from functools import cached_property

import cost_model.disaggregated as disaggregated_module
import cost_model.evaluate as evaluate_module
from cost_model import host
from cost_model.batch import Env, MoeTerms
from cost_model.benchmark_ttft import GENERIC, BenchmarkTerms, shipped_terms
from cost_model.deployment import ENGINES
from cost_model.efficiency import Efficiency
from cost_model.units import US_PER_S

# The fused-MoE variants an engine's steps may pay: (f, m) scale the fitted terms of the engine's
# own kernels and the experts' format (`Env.moe_terms`, `cost_model.layers.moe_overhead_s`): f
# its fixed floor, m its two size terms (per local routed copy, per scanned routing index).
MOE_VARIANTS = {"none": (0.0, 0.0), "floor": (1.0, 0.0), "full": (1.0, 1.0)}
SHIPPED_MOE_VARIANT = "full"  # the package prices every engine's own fitted terms in full
DEFAULT_MOE_VARIANT = SHIPPED_MOE_VARIANT


@dataclass(frozen=True)
class Terms:
    """One setting of every fitted serving term: host time per host CPU kind, the fused-MoE
    variant per engine (None: a workload naming none), benchmark-TTFT terms per engine table
    (`GENERIC` for every engine without one)."""

    host_us: tuple[tuple[str, float], ...]
    moe: tuple[tuple[str | None, str], ...]
    ttft: tuple[tuple[str, BenchmarkTerms], ...]

    @cached_property
    def _tables(self) -> tuple[dict, dict, dict]:
        return dict(self.host_us), dict(self.moe), dict(self.ttft)

    def host_s(self, cpu: str) -> float:
        return self._tables[0][cpu] / US_PER_S

    def moe_variant(self, engine: str | None) -> str:
        return self._tables[1].get(engine, DEFAULT_MOE_VARIANT)

    def ttft_terms(self, engine: str | None = None) -> BenchmarkTerms:
        tables = self._tables[2]
        return tables[engine] if engine in tables else tables[GENERIC]

    def with_host(self, host_us: dict[str, float]) -> Terms:
        return replace(self, host_us=tuple(sorted({**dict(self.host_us), **host_us}.items())))

    def with_moe(self, moe: dict[str | None, str]) -> Terms:
        merged = {**dict(self.moe), **moe}
        return replace(self, moe=tuple(sorted(merged.items(), key=lambda kv: str(kv[0]))))

    def with_ttft(self, ttft: dict[str, BenchmarkTerms]) -> Terms:
        return replace(self, ttft=tuple(sorted(ttft.items())))


def shipped() -> Terms:
    """The terms the package ships (cost_model/data/serving/*.toml, the efficiency files: every
    engine pays its own kernels' fused-MoE terms in full)."""
    return Terms(host_us=tuple((cpu, host.request_step_s(cpu) * US_PER_S)
                               for cpu in host.HOST_CPUS),
                 moe=tuple((engine, SHIPPED_MOE_VARIANT) for engine in (None, *ENGINES)),
                 ttft=tuple(sorted({**{e: shipped_terms(e) for e in ENGINES},
                                    GENERIC: shipped_terms(None)}.items())))


@contextlib.contextmanager
def patched(module, **values):
    saved = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def scaled_moe(eff: Efficiency, f: float, m: float) -> Efficiency:
    """`eff` with every experts' format's fused-MoE terms (EP = 1 entries too) scaled: the floor
    by f, the size terms by m (the grouped GEMMs' ceilings as they are)."""
    def scaled(entries: dict) -> dict:
        return {name: entry.model_copy(update={"fixed_overhead_s": f * entry.fixed_overhead_s,
                                               "per_local_copy_s": m * entry.per_local_copy_s,
                                               "per_scanned_copy_s": m * entry.per_scanned_copy_s})
                for name, entry in entries.items()}

    return eff.model_copy(update={"moe": scaled(eff.moe), "moe_ep1": scaled(eff.moe_ep1)})


def moe_efficiencies(eff: Efficiency) -> dict[str, Efficiency]:
    """`eff` (one engine's kernels on one GPU) at each fused-MoE variant (`MOE_VARIANTS`)."""
    return {name: scaled_moe(eff, f, m) for name, (f, m) in MOE_VARIANTS.items()}


def engine_of_kernels(eff: Efficiency) -> str | None:
    """The engine whose kernels `eff` holds (None: the generic ones, a workload naming none)."""
    return eff.kernels if eff.kernels in ENGINES else None


@contextlib.contextmanager
def full_model_at(terms: Terms):
    """The shipped cost model evaluated in full with `terms` set where the package reads them
    (host time per CPU kind, each engine's fused-MoE terms, the benchmark-TTFT terms)."""
    real = Env.moe_terms.func

    def moe_terms(self: Env) -> MoeTerms:
        f, m = MOE_VARIANTS[terms.moe_variant(engine_of_kernels(self.eff))]
        return real(self).scaled(f, m)  # the EP = 1 entry's terms too

    with contextlib.ExitStack() as stack:
        stack.enter_context(patched(host, request_step_s=terms.host_s))
        stack.enter_context(patched(Env, moe_terms=property(moe_terms)))
        for module in (evaluate_module, disaggregated_module):
            stack.enter_context(patched(module, shipped_terms=terms.ttft_terms))
        yield
