"""Errors of the command line: arguments that do not make a request, trials that do not exist,
models that do not fit. One base, `CommandError`, under layer 2's `SearchError`."""

from search.errors import InfeasibleError, SearchError


class CommandError(SearchError):
    """Command-line arguments that do not make a valid request (exit code 2)."""


class TrialError(CommandError):
    """A trial that does not exist or cannot be shown (exit code 2)."""


class NoFitError(CommandError, InfeasibleError):
    """The deployment cannot hold the model at all (exit code 1)."""
