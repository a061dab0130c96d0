"""Errors of the cost model: one base class, each message names the field, the rule and the
value."""


class CostModelError(ValueError):
    """Base class of every error raised by `cost_model`."""


class ConfigError(CostModelError):
    """A configuration (architecture, hardware, deployment) is invalid or unsupported."""
