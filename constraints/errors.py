"""Errors of the constraints package: one base class; messages name the field, rule and value."""


class ConstraintError(ValueError):
    """Base class of every error raised by `constraints` (bad input to a check)."""
