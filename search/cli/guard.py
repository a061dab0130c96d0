"""What a command's outputs may never overwrite (issue 29): the files that are a study (its
study file, journal, trial index, size record and the other files beside the journal, its
hardware file, an SQLite or journal `--storage`) and the package's data folders. `guarded(args)`
puts them under `search.atomic.protecting` while a command with an output option runs, so every
atomic write (`export -o`, `pareto --csv/--parquet`, `plot -o`, `dashboard -o`, `evaluate
--plot`, `calibrate --output` and its default user folder) refuses them, naming its option; only
`calibrate --write-package-data` may write the data folders. `search` has no output option:
it writes the study's own files, and runs unguarded."""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from search.atomic import Protected, checked_target, protecting, real_path, write_error

# argparse destinations of the options that name a file or folder a command writes, and the
# option as errors name it (`calibrate` spells its `--output` out)
OUTPUT_DESTS = {"output": "-o", "csv": "--csv", "parquet": "--parquet", "plot": "--plot"}
LONG_OUTPUT = {"calibrate": "--output"}
# packages whose `data/` folder is shipped data no output may rewrite
DATA_PACKAGES = ("cost_model", "objectives")
# the flag with which a maintainer's command regenerates the package data (`calibrate`): only
# then are the data folders writable; without it calibrate writes a user folder, guarded as any
WRITES_PACKAGE_DATA_DEST = "write_package_data"
JOURNAL = "the study's journal"
SQLITE_PREFIX = "sqlite:///"
SQLITE_COMPANIONS = ("", "-journal", "-wal", "-shm")  # SQLite's rollback journal and WAL files


def has_outputs(args: argparse.Namespace) -> bool:
    return any(hasattr(args, dest) for dest in OUTPUT_DESTS)


@contextmanager
def guarded(args: argparse.Namespace) -> Iterator[None]:
    """Run the command of `args` with what its outputs may not overwrite protected; the paths
    its options name are checked first, so a refused one costs no work."""
    with protecting(protected_for(args)):
        for dest, option in OUTPUT_DESTS.items():
            if (value := getattr(args, dest, None)) is not None and str(value).strip():
                option = LONG_OUTPUT.get(args.command, option) if dest == "output" else option
                _checked(Path(value), option)
        yield


def _checked(path: Path, option: str) -> None:
    """`checked_target`; a path the system refuses (a name past its length limit) is one line
    naming the option too."""
    try:
        checked_target(path, option)
    except OSError as exc:
        raise write_error(option, path, exc) from None


def protected_for(args: argparse.Namespace) -> Protected:
    study = getattr(args, "study", None)
    files = study_files(Path(study), getattr(args, "storage", None)) if study else {}
    folders = {} if getattr(args, WRITES_PACKAGE_DATA_DEST, False) else package_data_folders()
    # a journal's companions are named after it: `study.journal.*`, made yet or not
    prefixes = {path: "a file named after the study's journal"
                for path, what in files.items() if what == JOURNAL}
    return Protected(files, folders, prefixes)


def package_data_folders() -> dict[Path, str]:
    """Each data package's folder, found without importing the package."""
    found = {}
    for package in DATA_PACKAGES:
        spec = importlib.util.find_spec(package)
        for location in (spec.submodule_search_locations or []) if spec else []:
            found[real_path(Path(location) / "data")] = f"the package's data ({package}/data)"
    return found


def study_files(study: Path, storage: str | None) -> dict[Path, str]:
    """The study file and, when it reads as a study, the files of its storage and its hardware
    file; a study file that does not read is left to the command to report."""
    from search.study.spec import load_spec
    from search.study.storage import default_journal_path

    files = {real_path(study): "the study file"}
    try:
        spec = load_spec(study)
    except (ValueError, OSError):  # SpecError, ConfigError: the command says so itself
        return files
    if storage is None:
        files |= journal_files(default_journal_path(study, spec.name))
    else:
        files |= storage_files(storage)
    if (hardware := Path(spec.hardware.gpu)).suffix == ".toml":
        files[real_path(hardware)] = "the study's hardware file"
    return files


def journal_files(journal: Path) -> dict[Path, str]:
    """A journal, the files the storage keeps beside it (named, whether they exist yet or not)
    and any other file named after it that exists (`protected_for` guards the names not made
    yet)."""
    from search.study.report import CACHE_NAME
    from search.study.storage import OWNER_LOCK_NAME, SIZE_RECORD_NAME
    from search.study.trial_index import index_path

    named = {journal: JOURNAL, index_path(journal): "the study's trial index",
             journal.with_name(SIZE_RECORD_NAME): "the study's journal size record",
             journal.with_name(OWNER_LOCK_NAME): "the study's owner lock",
             journal.with_name(CACHE_NAME): "the study's cached Pareto document"}
    if journal.parent.is_dir():
        named = {**{p: "a file of the study's journal"
                    for p in journal.parent.glob(f"{journal.name}*")}, **named}
    return {real_path(path): what for path, what in named.items()}


def storage_files(url: str) -> dict[Path, str]:
    """The local files of a `--storage` URL: a journal's, or an SQLite database's."""
    if url.startswith("journal:") or url.endswith(".journal"):
        return journal_files(Path(url.removeprefix("journal:")))
    if url.startswith(SQLITE_PREFIX) and len(url) > len(SQLITE_PREFIX):
        database = url.removeprefix(SQLITE_PREFIX).split("?", 1)[0]
        return {real_path(database + suffix): "the study's SQLite storage"
                for suffix in SQLITE_COMPANIONS}
    return {}  # a database server: nothing local to overwrite
