"""Errors of the study package: bad study files, unusable storages, studies with no feasible
trial. One base, `StudyError`, under layer 2's `SearchError` (search/errors.py)."""

from search.errors import InfeasibleError, SearchError


class StudyError(SearchError):
    """A study that cannot be run or read as asked (exit code 2)."""


class SpecError(StudyError):
    """A study file that does not validate: names the field, the rule and the value."""


class StorageError(StudyError):
    """A storage that cannot be used: locked, unreadable, malformed URL (exit code 2)."""


class NoFeasibleError(StudyError, InfeasibleError):
    """A study with no feasible trial (exit code 1)."""
