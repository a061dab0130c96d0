"""One setting of every fitted serving term (`Terms`): the scheduler's host time per host CPU
kind, the fused-MoE variant each engine pays, the benchmark-TTFT terms per engine; the shipped
setting, and the cost model evaluated in full at any setting (`full_model_at`: the terms set
where the package reads them, as the fit scripts set the host time)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from functools import cached_property

import cost_model.disaggregated as disaggregated_module
import cost_model.evaluate as evaluate_module
from cost_model import host
from cost_model.benchmark_ttft import GENERIC, BenchmarkTerms, shipped_terms
from cost_model.deployment import ENGINES
from cost_model.efficiency import Efficiency, get_efficiency
from cost_model.hardware import catalog_names, get_hardware
from cost_model.units import US_PER_S

# the fused-MoE variants an engine's steps may pay: (f, m) = (floor, size terms)
MOE_VARIANTS = {"none": (0.0, 0.0), "floor": (1.0, 0.0), "full": (1.0, 1.0)}
DEFAULT_MOE_VARIANT = "floor"  # an engine without fitted kernels pays the floor alone
MOE_FIELDS = ("moe_fixed_overhead_s", "moe_per_token_s", "moe_per_routed_copy_s")


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
    """The terms the package ships (cost_model/data/serving/*.toml, the efficiency files)."""
    return Terms(host_us=tuple((cpu, host.request_step_s(cpu) * US_PER_S)
                               for cpu in host.HOST_CPUS),
                 moe=tuple((engine, _shipped_moe_variant(engine))
                           for engine in (None, *ENGINES)),
                 ttft=tuple(sorted({**{e: shipped_terms(e) for e in ENGINES},
                                    GENERIC: shipped_terms(None)}.items())))


def _shipped_moe_variant(engine: str | None) -> str:
    """"full" where `Efficiency.for_engine` keeps the size terms, else "floor"; the same on
    every catalog GPU (raises otherwise: Terms holds one variant per engine)."""
    variants = set()
    for name in catalog_names():
        eff = get_efficiency(get_hardware(name).name)
        kept = eff.for_engine(engine)
        variants.add("full" if all(getattr(kept, f) == getattr(eff, f) for f in MOE_FIELDS)
                     else "floor")
    if len(variants) != 1:
        raise ValueError(f"the fused-MoE rule of engine {engine!r} differs between GPUs")
    return variants.pop()


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


def moe_efficiencies(eff: Efficiency, source: Efficiency) -> dict[str, Efficiency]:
    """`eff` with the fused-MoE terms of each variant: `source`'s `[moe]` values (the GPU's
    unrestricted coefficients), scaled by the variant's (f, m)."""
    values = {name: getattr(source, name) for name in MOE_FIELDS}
    scaled = lambda f, m: {"moe_fixed_overhead_s": f * values["moe_fixed_overhead_s"],  # noqa: E731
                           "moe_per_token_s": m * values["moe_per_token_s"],
                           "moe_per_routed_copy_s": m * values["moe_per_routed_copy_s"]}
    return {name: eff.model_copy(update=scaled(f, m)) for name, (f, m) in MOE_VARIANTS.items()}


@contextlib.contextmanager
def full_model_at(terms: Terms):
    """The shipped cost model evaluated in full with `terms` set where the package reads them
    (host time per CPU kind, each engine's fused-MoE terms, the benchmark-TTFT terms)."""
    def for_engine(self: Efficiency, engine: str | None) -> Efficiency:
        return moe_efficiencies(self, self)[terms.moe_variant(engine)]

    with contextlib.ExitStack() as stack:
        stack.enter_context(patched(host, request_step_s=terms.host_s))
        stack.enter_context(patched(Efficiency, for_engine=for_engine))
        for module in (evaluate_module, disaggregated_module):
            stack.enter_context(patched(module, shipped_terms=terms.ttft_terms))
        yield
