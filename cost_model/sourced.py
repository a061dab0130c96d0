"""Reading `{ value = …, source = "…" }` entries of the package's TOML data files (hardware
catalog, efficiency coefficients): one reader, so every file reports a missing, malformed or
non-numeric entry the same way, naming its key."""

from __future__ import annotations

from cost_model.errors import ConfigError

MISSING = object()


def sourced_value(doc: dict, key: str, sources: dict[str, str], file_kind: str,
                  default=MISSING):
    """The raw `value` at dotted `key`; records its source in `sources`. A missing key returns
    `default` when one is given, else raises naming the key and the `file_kind` file."""
    entry = doc
    for part in key.split("."):
        if not isinstance(entry, dict) or part not in entry:
            if default is not MISSING:
                return default
            raise ConfigError(f"`{key}` is missing from the {file_kind} file")
        entry = entry[part]
    if not isinstance(entry, dict) or "value" not in entry or not entry.get("source"):
        raise ConfigError(f"`{key}` must be a table {{ value = …, source = \"…\" }}; got {entry!r}")
    sources[key] = str(entry["source"])
    return entry["value"]


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
