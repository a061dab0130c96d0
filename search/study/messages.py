"""A study file read, and its validation errors said in one line each (search/study/spec.py):
pydantic's first error named by its dotted field path, the rule and the bad value (cut short
when long); an unknown key with the nearest known one of its table named (`difflib`, in
`cost_model.sourced.unknown_key_message`, which hardware files share)."""

from __future__ import annotations

import json
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from cost_model.sourced import first_line, key_shown, shown, unknown_key_message
from search.study.errors import SpecError

# pydantic's names of a union's members in an error location (`list[int]` and the like too)
UNION_TAGS = ("int", "str", "float", "bool", "constrained-str", "constrained-int",
              "constrained-float")
VALUE_SHOWN_CHARS = 60  # a bad value longer than this is cut (`…`), keeping the error one line


def toml_value(value: Any) -> str:
    """A value as the study file writes it (error messages quote the user's own syntax)."""
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return str(value).lower()
    return json.dumps(value) if isinstance(value, str) else str(value)


def is_field(part: str | int) -> bool:
    """Whether a part of pydantic's error location is a key or index (not a union member's
    type tag such as `int` or `list[str]`)."""
    return part != "__root__" and not (isinstance(part, str) and (
        part in UNION_TAGS or "[" in part))


def first_error(errors: list[dict[str, Any]]) -> dict[str, Any]:
    """The error to report of pydantic's list: the first, unless a union member at the same
    field says more than "not this type" (a 500-character format name is too long, not "no
    integer")."""
    where = [p for p in errors[0]["loc"] if is_field(p)]
    same = [e for e in errors if [p for p in e["loc"] if is_field(p)] == where]
    return next((e for e in same if not e["type"].endswith("_type")), errors[0])


def describe(err: dict[str, Any], model: type[BaseModel]) -> str:
    """One pydantic error (`ValidationError.errors()` item) of validating `model`."""
    loc = [p for p in err["loc"] if is_field(p)]
    path = ".".join(key_shown(p) if isinstance(p, str) else str(p) for p in loc)
    if err["type"] == "value_error":
        message = str(err["ctx"]["error"])
        named = not path or message.startswith(f"`{path}`")
        return message if named else f"`{path}`: {message}"
    if err["type"] == "extra_forbidden":  # the last part is the user's key, whatever it holds
        key, above = err["loc"][-1], [p for p in err["loc"][:-1] if is_field(p)]
        parent = ".".join(key_shown(p) if isinstance(p, str) else str(p) for p in above)
        return unknown_key_message(parent, key, known_keys(model, above))
    if err["type"] == "missing":
        return f"`{path}` is required"
    return f"`{path}` ({shown(err.get('input'), VALUE_SHOWN_CHARS)}): {err['msg']}"


def known_keys(model: type[BaseModel], loc: list) -> list[str]:
    """The field names of the table at `loc` under `model` (empty when it is not a model)."""
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        inner = _model_in(field.annotation) if field is not None else None
        if inner is None:
            return []
        model = inner
    return list(model.model_fields)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (`X`, `X | None`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return next(filter(None, map(_model_in, typing.get_args(annotation))), None)
    return None


def read_study_document(file: Path) -> dict[str, Any]:
    """The parsed study file, or one `SpecError` line saying why there is none: a folder, a
    missing file, a name the system refuses, bytes that are not UTF-8, text that is not TOML."""
    try:
        if file.is_dir():
            raise SpecError(f"study file {path_shown(file)} is a directory, not a study file "
                            "(a .toml file)")
        if not file.is_file():
            raise SpecError(f"study file {path_shown(file)} does not exist")
        return tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError(f"study file {path_shown(file)} cannot be read: {exc.strerror}") \
            from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path_shown(file)}: not valid TOML: not UTF-8 text (byte "
                        f"{exc.object[exc.start]:#04x} at offset {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path_shown(file)}: not valid TOML: {first_line(exc)}") from None
    except RecursionError:
        raise SpecError(f"{path_shown(file)}: not valid TOML: nested too deeply") from None


def path_shown(file: Path, limit: int = 120) -> str:
    """A path quoted for an error line, cut when long (names can reach 4096 characters)."""
    text = repr(str(file))
    return text if len(text) <= limit else f"{text[:limit - 1]}…'"
