"""The one atomic file writer of `search/`: a file is either its old self or wholly new.

Used by exports, plots, Parquet/CSV tables, `calibrate`'s coefficient files and the journal's
size record: `write(tmp)` fills a temporary file beside the target, which is then renamed onto
it (`os.replace`, atomic on POSIX within one file system); on any error the temporary file is
removed and nothing half-written is left behind.

It is also the one guard of what a command writes (issue 29): while `protecting(...)` is in
force (the CLI sets it around every command with an output option, `search.cli.guard`), a write
whose target is one of the protected files (the study's journal, its index and size record, its
study file, its hardware file) or lies in a protected folder (the package's data) is refused,
naming the option. Always, a symbolic link is written through only to a file in its own folder.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from search.errors import WriteError


@dataclass(frozen=True)
class Protected:
    """Real paths (symbolic links resolved) no output may replace, each with what it is
    ("the study's journal"): files, and folders whose whole content is protected."""

    files: Mapping[Path, str] = field(default_factory=dict)
    folders: Mapping[Path, str] = field(default_factory=dict)

    def what(self, real: Path) -> str | None:
        """What the real path `real` is, if protected; None otherwise."""
        if real in self.files:
            return self.files[real]
        return next((what for folder, what in self.folders.items()
                     if real == folder or folder in real.parents), None)


_PROTECTED: ContextVar[Protected | None] = ContextVar("archscout_protected_outputs",
                                                      default=None)


@contextmanager
def protecting(protected: Protected) -> Iterator[None]:
    """Refuse writes onto `protected` (besides what an outer `protecting` protects) inside."""
    outer = _PROTECTED.get() or Protected()
    token = _PROTECTED.set(Protected({**outer.files, **protected.files},
                                     {**outer.folders, **protected.folders}))
    try:
        yield
    finally:
        _PROTECTED.reset(token)


def real_path(path: Path | str) -> Path:
    """`path` absolute, with every symbolic link and `..` resolved (what a write would reach)."""
    return Path(os.path.realpath(path))


def checked_target(path: Path, option: str) -> Path:
    """The file a write of `path` reaches, after the guard's checks: a symbolic link must point
    into its own folder (a link to a pipe or device is written in place, `_is_stream`), and the
    file must not be protected (`protecting`). Errors name `option`."""
    target = path
    if path.is_symlink() and not _is_stream(path):
        target = real_path(path)
        if target.parent != real_path(path.parent):
            raise WriteError(f"`{option}` ({_shown(path)}) is a symbolic link to "
                             f"{_shown(target)}, outside its folder; refusing to write through it "
                             "(remove the link or name the file itself)")
    what = (_PROTECTED.get() or Protected()).what(real_path(target))
    if what is not None:
        raise WriteError(f"`{option}` ({_shown(path)}) is {what}; an output never overwrites "
                         "it (choose another path)")
    return target


def write_atomic(path: Path, write: Callable[[Path], None], option: str = "-o",
                 mode: int | None = None, make_parents: bool = False,
                 on_error: Callable[[OSError], Exception] | None = None) -> Path:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it onto `path`. Errors
    raise `WriteError` naming `option` (the option or field that gave the path), or what
    `on_error(exc)` makes of the OSError; so do targets the guard refuses (`checked_target`).
    What is not a regular file or folder (a pipe, a device such as /dev/stdout) is written in
    place, never replaced; a symbolic link keeps pointing where it did, at the new file.
    `mode`: the new file's permissions (default: what a plain new file gets under the umask);
    `make_parents` creates missing folders, as `save_pretrained`-style tools do."""
    path = Path(path)
    fail = on_error or (lambda exc: write_error(option, path, exc))
    try:
        if _is_stream(path):
            return _write_in_place(path, write, fail)
        target = checked_target(path, option)
        if make_parents:
            target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                        suffix=".tmp")
    except OSError as exc:
        raise fail(exc) from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        os.chmod(tmp, _new_file_mode() if mode is None else mode)  # mkstemp makes 0600
        os.replace(tmp, target)
    except OSError as exc:
        raise fail(exc) from None
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_text_atomic(path: Path, text: str, option: str = "-o", **options) -> Path:
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), option,
                        **options)


def write_error(option: str, path: Path, exc: OSError) -> WriteError:
    return WriteError(f"`{option}` ({_shown(path)}) cannot be written: {exc.strerror or exc}")


def _shown(path: Path, limit: int = 120) -> str:
    """A path short enough for one line (a name past the file system's limit is long)."""
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit // 2]}…{text[-limit // 2:]}"


def _is_stream(path: Path) -> bool:
    """Whether `path` reaches something that is not a regular file or folder (a pipe, a device
    such as /dev/stdout, a link to one): written in place, never replaced."""
    return path.exists() and not (path.is_file() or path.is_dir())


def _write_in_place(path: Path, write: Callable[[Path], None],
                    fail: Callable[[OSError], Exception]) -> Path:
    try:
        write(path)
    except OSError as exc:
        raise fail(exc) from None
    return path


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
