"""Errors of the records package: outputs that cannot be produced or written. One base,
`RecordError`, under layer 2's `SearchError` (search/errors.py)."""

from search.errors import SearchError


class RecordError(SearchError):
    """An output that cannot be produced (exit code 2)."""


class ExportError(RecordError):
    """An export that cannot be produced or written (exit code 2)."""
