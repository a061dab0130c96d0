"""Errors of the calibration package: measured tables that cannot be read or fitted. One base,
`CalibrationError`, under layer 2's `SearchError` (search/errors.py)."""

from search.errors import SearchError


class CalibrationError(SearchError):
    """A measured table or calibration source that cannot be used (exit code 2)."""
