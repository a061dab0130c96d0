"""Which fused-MoE entry each deployment's routed experts run, by its expert parallelism.

Each engine's file holds per experts' format a joint `[moe.<format>]` fit over every measured
configuration (most of them EP > 1) and, where its table has EP = 1 rows, `[moe.<format>.ep1]`
fitted on those alone (`cost_model.efficiency`, `search.calibration.moe`): a deployment whose
experts all sit on each GPU (EP = 1) runs the EP = 1 entry, any other the joint one; without an
EP = 1 entry every deployment runs the joint one. The choice is per deployment, vectorized over
the `DeployArrays.ep` column with `np.where` (`select_ep1`): the grouped expert GEMMs' rates
(`Env.expert_rates`) and the layer's non-GEMM terms (`MoeTerms.at`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from cost_model.efficiency import Efficiency
from cost_model.gemm import GemmRates
from cost_model.precision import Precision

TERMS = ("fixed_overhead_s", "per_local_copy_s", "per_scanned_copy_s")


class CandidateFormats(Protocol):
    """Each candidate's format (`cost_model.batch.FormatColumn`: the distinct formats and each
    candidate's index into them)."""

    @property
    def formats(self) -> tuple[Precision, ...]: ...

    @property
    def index(self) -> np.ndarray: ...


def select_ep1(ep, ep1_value, joint_value):
    """`ep1_value` where a deployment's EP is 1, `joint_value` elsewhere (either one as it is
    when every deployment is on its side)."""
    single = np.asarray(ep) == 1
    if single.all():
        return ep1_value
    if not single.any():
        return joint_value
    return np.where(single, ep1_value, joint_value)


def select_ep1_rates(ep, ep1: GemmRates, joint: GemmRates) -> GemmRates:
    """Field-wise `select_ep1` of two expert GEMMs' rates (`joint` itself when they are one)."""
    if ep1 is joint:
        return joint
    single = np.asarray(ep) == 1
    if single.all():
        return ep1
    if not single.any():
        return joint
    return GemmRates.select(single, ep1, joint)


@dataclass(frozen=True)
class MoeTerms:
    """The fused MoE's non-GEMM terms of each candidate's experts' format (floats, or (n, 1)
    columns where a batch mixes formats): `cost_model.efficiency.MoeEfficiency`; `ep1`: those of
    the EP = 1 entry (None: these at every EP)."""

    fixed_overhead_s: float | np.ndarray
    per_local_copy_s: float | np.ndarray
    per_scanned_copy_s: float | np.ndarray
    ep1: MoeTerms | None = None

    def at(self, ep) -> MoeTerms:
        """Each deployment's terms: the EP = 1 entry's where its EP is 1, these elsewhere."""
        if self.ep1 is None:
            return self
        return MoeTerms(*(select_ep1(ep, getattr(self.ep1, name), getattr(self, name))
                          for name in TERMS))

    def scaled(self, fixed: float, size: float) -> MoeTerms:
        """These terms (and the EP = 1 entry's) with the floor times `fixed` and the per-copy
        terms times `size`."""
        ep1 = None if self.ep1 is None else self.ep1.scaled(fixed, size)
        return MoeTerms(fixed * self.fixed_overhead_s, size * self.per_local_copy_s,
                        size * self.per_scanned_copy_s, ep1)


def _terms(eff: Efficiency, p: Precision, ep1: bool) -> tuple[float, float, float]:
    moe = eff.moe_efficiency(p, ep1)
    return (0.0, 0.0, 0.0) if moe is None else tuple(getattr(moe, name) for name in TERMS)


def _format_terms(eff: Efficiency, fmt: Precision | CandidateFormats, ep1: bool) -> MoeTerms:
    if isinstance(fmt, Precision):
        return MoeTerms(*_terms(eff, fmt, ep1))
    table = np.array([_terms(eff, p, ep1) for p in fmt.formats])[fmt.index]
    return MoeTerms(*(table[:, i].reshape(-1, 1) for i in range(len(TERMS))))


def has_ep1_entry(eff: Efficiency, fmt: Precision | CandidateFormats) -> bool:
    """True when some candidate's experts have an EP = 1 entry of their own."""
    formats = (fmt,) if isinstance(fmt, Precision) else fmt.formats
    return any(eff.moe_format(p) in eff.moe_ep1 for p in formats)


def moe_terms(eff: Efficiency, fmt: Precision | CandidateFormats) -> MoeTerms:
    """Each candidate's fused-MoE terms (0 where the file has no MoE entry), with its EP = 1
    entry's as `ep1` where some format has one."""
    joint = _format_terms(eff, fmt, False)
    return replace(joint, ep1=_format_terms(eff, fmt, True)) if has_ep1_entry(eff, fmt) else joint
