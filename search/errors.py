"""The one error base of layer 2 (`search/`), and the exit code each kind of error means.

Every package under `search/` has one base of its own (`search/<package>/errors.py`) deriving
from `SearchError`; the CLI (`search/cli/main.py`) catches `SearchError` and exits with the
error's `exit_code`: 2 for bad input (one line naming the field, the rule and the value), 1 for a
valid request with no feasible answer. Layer 0's `CostModelError` and layer 1's `ConstraintError`
stay theirs; the CLI catches them too.
"""

from __future__ import annotations

EXIT_INFEASIBLE, EXIT_BAD_INPUT = 1, 2


class SearchError(ValueError):
    """Bad input to a command of layer 2 (exit code 2). A `ValueError`, like layer 0's errors."""

    exit_code = EXIT_BAD_INPUT


class InfeasibleError(SearchError):
    """A valid request with no feasible answer (exit code 1)."""

    exit_code = EXIT_INFEASIBLE


class WriteError(SearchError):
    """A file that cannot be written (full disk, no permission, not a folder): exit code 2."""
