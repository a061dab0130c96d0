"""A study is its own record: the spec a study ran with is stored in its storage (`SPEC_ATTR`,
written when the study is created), and the commands that read a study (`pareto`, `show`,
`export`, `plot`) rebuild its candidates from that record, not from the file on disk. When the
file differs they say so in one plain line on stderr, naming the differing fields; `search`
refuses to resume a changed study (`store_or_check_spec`), naming them the same way."""

from __future__ import annotations

import sys
from typing import Any

import optuna

from search.study.errors import SpecError
from search.study.spec import StudySpec, spec_from_dict

SPEC_ATTR = "archscout_spec"  # the study user attribute holding the spec it was created with
# Fields that may change between runs of one study without changing what was searched.
RESUMABLE_FIELDS = {"trials", "seed", "batch_size", "description", "sampler"}
# Field paths are named down to this depth: `space.head_dim`, `workload.osl_tokens`.
DIFF_DEPTH = 2


def _normalized(stored: dict) -> dict:
    """A stored spec as the current code reads it (defaults of fields added since filled in);
    the raw document when it no longer validates."""
    try:
        return spec_from_dict(stored).model_dump(mode="json")
    except SpecError:
        return stored


def _shown(value: Any) -> str:
    """A compact value: a dimension `{value=128}` or `{min=32, max=72, step=4}`."""
    if isinstance(value, dict):
        kept = {k: v for k, v in value.items() if v is not None and (k, v) != ("step", 1)}
        return "{" + ", ".join(f"{k}={_shown(v)}" for k, v in kept.items()) + "}"
    return repr(value) if isinstance(value, str) else str(value)


def _paths(old: Any, new: Any, prefix: str, depth: int) -> list[tuple[str, Any, Any]]:
    if old == new:
        return []
    if depth >= DIFF_DEPTH or not (isinstance(old, dict) and isinstance(new, dict)):
        return [(prefix, old, new)]
    found = []
    for key in sorted(old.keys() | new.keys()):
        path = f"{prefix}.{key}" if prefix else key
        found += _paths(old.get(key), new.get(key), path, depth + 1)
    return found


def spec_differences(stored: dict, spec: StudySpec) -> list[tuple[str, Any, Any]]:
    """(field path, stored value, value in `spec`) of every field that changes what a study
    searches or how it scores (the `RESUMABLE_FIELDS` may change between runs)."""
    old = {k: v for k, v in _normalized(stored).items() if k not in RESUMABLE_FIELDS}
    new = spec.model_dump(mode="json", exclude=RESUMABLE_FIELDS)
    return _paths(old, new, "", 0)


def describe_differences(changes: list[tuple[str, Any, Any]]) -> str:
    """'space.head_dim: stored {value=128}, file {choices=[64, 128]}; …'"""
    return "; ".join(f"{path}: stored {_shown(old)}, file {_shown(new)}"
                     for path, old, new in changes)


def recorded_spec(study: optuna.Study, file_spec: StudySpec, source: str = "the study file"
                  ) -> StudySpec:
    """The spec `study` ran with (its stored record); `file_spec` for a study that holds none.
    Prints one line on stderr when `source` (the file `file_spec` came from) differs."""
    stored = study.user_attrs.get(SPEC_ATTR)
    if stored is None:
        return file_spec
    try:
        spec = spec_from_dict(stored, f"the spec stored with study `{file_spec.name}`")
    except SpecError as exc:
        print(f"note: {exc}; reading the study with {source} instead", file=sys.stderr)
        return file_spec
    changes = spec_differences(stored, file_spec)
    if changes:
        print(f"note: {source} differs from the spec study `{spec.name}` ran with "
              f"({describe_differences(changes)}); reporting what was evaluated, from the "
              f"stored spec", file=sys.stderr)
    note_hardware_change(study.user_attrs, spec, source)
    return spec


def store_or_check_spec(study: optuna.Study, spec: StudySpec) -> None:
    """Store the spec of a new study; refuse to resume one whose spec changed, naming each
    changed field with its stored and new value."""
    stored = study.user_attrs.get(SPEC_ATTR)
    if stored is None:
        study.set_user_attr(SPEC_ATTR, spec.model_dump(mode="json"))
        store_or_check_hardware(study, spec)
        return
    changes = spec_differences(stored, spec)
    if changes:
        raise SpecError(f"study `{spec.name}` exists in this storage with a different spec "
                        f"(changed: {describe_differences(changes)}); give the new study "
                        f"another `name`, or restore the file")
    store_or_check_hardware(study, spec)


# ---- a hardware file used by the study (issue 29) -------------------------------------------
# A study whose `hardware.gpu` is a file path (not a catalog name) keeps that file's hardware, as
# the study ran with it, beside its spec: a file edited since is said by the commands that read
# the study (`recorded_spec`) and refused by a resume (`store_or_check_spec`). Its sources and
# description may change freely: they change no result.
HARDWARE_ATTR = "archscout_hardware"  # {"path": the file, "spec": its HardwareSpec (SI)}
HARDWARE_NOTES = ("sources", "description")


def hardware_record(spec: StudySpec) -> dict | None:
    """The record of the study's hardware file; None for a catalog GPU."""
    from cost_model.hardware import catalog_names, get_hardware

    gpu = spec.hardware.gpu
    if gpu.strip().lower() in catalog_names():
        return None
    hardware = get_hardware(gpu).model_dump(mode="json", exclude=set(HARDWARE_NOTES))
    return {"path": gpu, "spec": hardware}


def hardware_changes(user_attrs: dict, spec: StudySpec) -> tuple[str, list] | None:
    """(path, differences) when the hardware file of `spec` is no longer what the study's
    record holds; None when it is (or when the study keeps no hardware record)."""
    stored, now = user_attrs.get(HARDWARE_ATTR), hardware_record(spec)
    if not isinstance(stored, dict) or now is None:
        return None
    changes = _paths(stored.get("spec"), now["spec"], "", 0)
    return (now["path"], changes) if changes else None


_NOTED: set[tuple[str, str, str]] = set()  # (file, study, changes) said once per process


def note_hardware_change(user_attrs: dict, spec: StudySpec, source: str) -> None:
    """One line on stderr (once per process) when the study's hardware file changed since it
    ran."""
    found = hardware_changes(user_attrs, spec)
    if found and (key := (found[0], spec.name, _hardware_differences(found[1]))) not in _NOTED:
        _NOTED.add(key)
        print(f"note: hardware file {found[0]} of {source} changed since study `{spec.name}` ran "
              f"({key[2]}); results are computed with the file as it is now", file=sys.stderr)


def _hardware_differences(changes: list[tuple[str, Any, Any]]) -> str:
    """'hbm_bytes_per_s: stored 4.8e+12, file 9.6e+12; …' (SI units, numbers in short form)."""
    def short(value: Any) -> str:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return f"{value:g}" if number else _shown(value)

    return "; ".join(f"{path}: stored {short(old)}, file {short(new)}"
                     for path, old, new in changes)


def store_or_check_hardware(study: optuna.Study, spec: StudySpec) -> None:
    """Keep the hardware file of a new study in its record; refuse to resume with one that
    changed since, naming what changed."""
    if HARDWARE_ATTR not in study.user_attrs:
        if (record := hardware_record(spec)) is not None:
            study.set_user_attr(HARDWARE_ATTR, record)
        return
    if found := hardware_changes(study.user_attrs, spec):
        raise SpecError(f"hardware file {found[0]} of study `{spec.name}` changed since the "
                        f"study ran (changed: {_hardware_differences(found[1])}); restore it, or "
                        "give the study another `name`")
