"""argparse types shared by the commands: each rejects a bad value with one line naming the rule
and the value (argparse prefixes the option), which the CLI turns into exit code 2."""

from __future__ import annotations

import argparse
import math
from typing import Callable


def whole_number(low: int, high: int | None = None, noun: str | None = None
                 ) -> Callable[[str], int]:
    """A type accepting whole numbers in [low, high] (no upper bound when `high` is None);
    `noun` names what a non-number should have been (default "a whole number >= low")."""
    bound = f">= {low}" if high is None else f"in [{low}, {high}]"
    noun = noun or f"a whole number {bound}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {noun}; got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {bound}; got {value}")
        return value

    return parse


def positive_number(high: float | None = None) -> Callable[[str], float]:
    """A type accepting finite numbers > 0 (and <= `high` when given): `nan`, `inf`, zero and
    negative values are refused."""
    bound = "> 0" if high is None else f"> 0 and <= {high:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number {bound}; got {text!r}") from None
        if not math.isfinite(value) or value <= 0 or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be a finite number {bound}; got {text}")
        return value

    return parse
