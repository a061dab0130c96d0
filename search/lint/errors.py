"""Errors of the lint package. One base, `LintError`, under layer 2's `SearchError`."""

from search.errors import SearchError


class LintError(SearchError):
    """A model or deployment lint cannot check as given (exit code 2)."""
