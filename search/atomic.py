"""The one atomic file writer of `search/`: a file is either its old self or wholly new.

Used by exports, plots, Parquet/CSV tables, `calibrate`'s coefficient files and the journal's
size record: `write(tmp)` fills a temporary file beside the target, which is then renamed onto
it (`os.replace`, atomic on POSIX within one file system); on any error the temporary file is
removed and nothing half-written is left behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from search.errors import WriteError


def write_atomic(path: Path, write: Callable[[Path], None], option: str = "-o",
                 mode: int | None = None, make_parents: bool = False,
                 on_error: Callable[[OSError], Exception] | None = None) -> Path:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it onto `path`. Errors
    raise `WriteError` naming `option` (the option or field that gave the path), or what
    `on_error(exc)` makes of the OSError. What is not a
    regular file or folder (a pipe, a device such as /dev/stdout) is written in place, never
    replaced; a symbolic link keeps pointing where it did, at the new file. `mode`: the new
    file's permissions (default: what a plain new file gets under the umask); `make_parents`
    creates missing folders, as `save_pretrained`-style tools do."""
    path = Path(path)
    fail = on_error or (lambda exc: write_error(option, path, exc))
    if path.exists() and not (path.is_file() or path.is_dir()):
        return _write_in_place(path, write, fail)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
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
    return WriteError(f"`{option}` ({path}) cannot be written: {exc.strerror or exc}")


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
