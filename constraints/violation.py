"""What a check returns (`Violation`) and the rules a study sets (`ConstraintRules`).

A violation value <= 0 is feasible; > 0 is infeasible and larger is worse. The value is
continuous where it can be, so that NSGA-II's constrained domination (Optuna's
`constraints_func`) can rank infeasible candidates by how far they are from feasibility.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

NOT_CONSTRAINED = "ok: not constrained"
FEASIBLE_VALUE = 0.0


@dataclass(frozen=True)
class Violation:
    """One constraint on one candidate: `value` <= 0 feasible, > 0 infeasible (larger = worse)."""

    name: str
    value: float
    message: str  # one line: why, with the numbers; "ok: …" when feasible

    @property
    def feasible(self) -> bool:
        return self.value <= FEASIBLE_VALUE


def unconstrained(name: str) -> Violation:
    """A rule the study did not set: always satisfied, so the set of names stays stable."""
    return Violation(name, FEASIBLE_VALUE, NOT_CONSTRAINED)


class ConstraintRules(BaseModel):
    """The feasibility rules of a study; a rule left at None is not checked."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    alignment: Literal[128, 256, 512] = 128  # NVIDIA, AI Model Co-Design (2026), Guideline 2
    total_params: float | None = Field(default=None, gt=0)  # target, params
    active_params: float | None = Field(default=None, gt=0)  # target, params
    params_tolerance_frac: float = Field(default=0.1, ge=0)  # |actual/target − 1| allowed
    max_gpus: int | None = Field(default=None, ge=1)  # GPUs one model instance may use
    aspect_ratio_min: float | None = Field(default=None, gt=0)  # hidden_size / num_layers band
    aspect_ratio_max: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _band_is_ordered(self) -> Self:
        low, high = self.aspect_ratio_min, self.aspect_ratio_max
        if low is not None and high is not None and low > high:
            raise ValueError(
                f"`aspect_ratio_min` ({low}) must be <= `aspect_ratio_max` ({high})"
            )
        return self
