"""One searched quantity of a study's space (`[space]` in a study file, search/study/spec.py):
a fixed value, a list of choices or an integer range, and the checks every dimension's options
share (integers within bounds, format names)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, model_validator

from cost_model.precision import get_precision
from search.study.messages import toml_value as _toml

# strict: TOML has real integers and booleans, so `trials = true` or `isl_tokens = 1e3` is a
# mistake, not a number; finite: `inf` is no budget or window.
FROZEN = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
CHOICES_MAX = 4096  # options listed by hand; a range (`min`/`max`/`step`) is not materialized
SAME_FORMAT = "same"  # `moe_precision`: the routed experts in the linear layers' `precision`
SHOWN_CHARS = 60  # a bare value quoted back in an error is cut to this
OPTION_NAME_CHARS = 64  # a named option (a format, a mixer) is a short word
OptionName = Annotated[StrictStr, Field(max_length=OPTION_NAME_CHARS)]


class Dimension(BaseModel):
    """One searched quantity: `{ value = x }`, `{ choices = [...] }` or `{ min, max, step }`."""

    model_config = FROZEN

    value: StrictInt | OptionName | None = None  # strict: `true` or `128.0` is not a size
    choices: list[StrictInt] | list[OptionName] | None = Field(default=None, min_length=1,
                                                              max_length=CHOICES_MAX)
    min: StrictInt | None = None
    max: StrictInt | None = None
    step: StrictInt = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _one_form(self) -> Dimension:
        forms = [self.value is not None, self.choices is not None,
                 self.min is not None or self.max is not None]
        if sum(forms) != 1:
            raise ValueError("give exactly one of `value`, `choices` or `min`/`max`")
        if forms[2] and (self.min is None or self.max is None):
            raise ValueError("a range needs both `min` and `max`")
        if forms[2] and self.min > self.max:
            raise ValueError(f"`min` ({self.min}) must be <= `max` ({self.max})")
        if forms[2] and (self.max - self.min) % self.step:
            raise ValueError(f"`max` − `min` ({self.max - self.min}) must be a multiple of "
                             f"`step` ({self.step})")
        return self

    @property
    def options(self) -> list | range:
        """Every value this dimension can take, in order (a range is not materialized)."""
        if self.value is not None:
            return [self.value]
        if self.choices is not None:
            return list(self.choices)
        return range(self.min, self.max + 1, self.step)

    def extremes(self) -> list[tuple[str, Any]]:
        """(label, value) of each option a bound check must see: the value, every choice, or
        a range's ends (labelled "`min` = ", "`max` = ")."""
        if self.value is not None:
            return [("", self.value)]
        if self.choices is not None:
            return [("", c) for c in self.choices]
        return [("`min` = ", self.min), ("`max` = ", self.max)]


def fixed(value) -> Dimension:
    return Dimension(value=value)


def dimension_table(value: Any) -> Any:
    """A dimension must be a table; a bare value or list gets the form it probably meant."""
    if isinstance(value, (dict, Dimension)):
        return value
    form = "choices" if isinstance(value, list) else "value"
    shown = _toml(value)
    shown = shown if len(shown) <= SHOWN_CHARS else f"{shown[:SHOWN_CHARS - 1]}…"
    raise ValueError(f"a dimension is a table, not {shown}; write `{{ {form} = {shown} }}`, "
                     "`{ choices = [...] }` or `{ min = ..., max = ..., step = ... }`")


def check_integers(dim: Dimension, low: int, high: int) -> None:
    for label, value in dim.extremes():
        if not isinstance(value, int):  # a string (Dimension's ints are strict: no bools)
            raise ValueError(f"every option must be an integer; got {label}{_toml(value)}")
        if value < low:
            raise ValueError(f"every option must be an integer >= {low}; got {label}{value}")
        if value > high:
            raise ValueError(f"every option must be an integer <= {high}; got {label}{value}")


def largest(dim: Dimension) -> int:
    return max(value for _, value in dim.extremes())


def check_formats(dim: Dimension, field: str) -> None:
    for _, value in dim.extremes():
        if not isinstance(value, str):
            raise ValueError(f"every option must be a format name (a string); got {_toml(value)}")
        if not (field == "moe_precision" and value == SAME_FORMAT):
            get_precision(value, f"space.{field}")
