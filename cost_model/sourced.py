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
    source = entry.get("source") if isinstance(entry, dict) else None
    if "value" not in (entry if isinstance(entry, dict) else ()) or not isinstance(source, str) \
            or not source.strip():
        raise ConfigError(f"`{key}` must be a table {{ value = …, source = \"…\" }}; got "
                          f"{shown(entry)}")
    sources[key] = source
    return entry["value"]


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def unknown_key_message(parent: str, key, known) -> str:
    """One line refusing `key` under the dotted path `parent` ("" at the top): the nearest of
    the `known` keys named when one is close (`difflib`'s ratio >= 0.6), else all of them."""
    import difflib

    key = key_shown(key)
    known = sorted(known)
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean `{close[0]}`?" if close else f"known: {', '.join(known) or 'none'}"
    return f"`{f'{parent}.{key}' if parent else key}` is not a known key ({hint})"


def key_shown(key, limit: int = 40) -> str:
    """A key as an error line names it: printable and short (a key may hold a newline)."""
    text = key if isinstance(key, str) and key.isprintable() else repr(key)
    return text if len(text) <= limit else f"{text[:limit - 1]}…"


def shown(value, limit: int = 60) -> str:
    """`repr(value)` cut to `limit` characters, so a huge value keeps its error on one line
    (a value nested past Python's recursion limit is named so, not shown)."""
    try:
        text = repr(value)
    except RecursionError:
        return "(a value nested too deeply to show)"
    return text if len(text) <= limit else f"{text[:limit - 1]}…"


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
