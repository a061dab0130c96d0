"""Errors of the plots package. One base, `PlotError`, under layer 2's `SearchError`."""

from search.errors import SearchError


class PlotError(SearchError):
    """A plot that cannot be drawn as asked (exit code 2)."""
