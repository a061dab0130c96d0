"""search/atomic.py: the one atomic writer. A file is its old self or wholly new; nothing
half-written or temporary is left behind; errors are one WriteError line naming the option."""

import os

import pytest

from search.atomic import write_atomic, write_text_atomic
from search.errors import EXIT_BAD_INPUT, SearchError, WriteError


def test_keeps_the_old_file_when_the_writer_fails(tmp_path):
    target = tmp_path / "config.json"
    target.write_text("old")

    def fail(tmp):
        tmp.write_text("half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_atomic(target, fail)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["config.json"]


def test_replaces_the_file_and_follows_the_umask(tmp_path):
    target = tmp_path / "a.txt"
    target.write_text("old")
    write_text_atomic(target, "new")
    umask = os.umask(0)
    os.umask(umask)
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask
    write_text_atomic(target, "data", mode=0o644)
    assert target.stat().st_mode & 0o777 == 0o644


def test_creates_missing_folders_unless_told_not_to(tmp_path):
    write_text_atomic(tmp_path / "new" / "dir" / "config.json", "{}", make_parents=True)
    assert (tmp_path / "new" / "dir" / "config.json").read_text() == "{}"
    with pytest.raises(WriteError, match=r"^`--output` \(.*nope/x\) cannot be written: "):
        write_text_atomic(tmp_path / "nope" / "x", "", "--output")
    assert not (tmp_path / "nope").exists()


def test_a_symlink_keeps_pointing_at_the_new_file(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_text_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_a_device_is_written_in_place(tmp_path):
    write_text_atomic(os.devnull, "x")  # a character device: never replaced
    assert os.path.exists(os.devnull) and not os.path.isfile(os.devnull)


def test_an_unwritable_target_is_one_line_naming_the_option(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "file").write_text("x")
    with pytest.raises(WriteError) as info:
        write_text_atomic(folder / "file" / "under-a-file", "x", "-o")
    assert str(info.value).startswith("`-o` (") and "\n" not in str(info.value)
    assert isinstance(info.value, SearchError) and info.value.exit_code == EXIT_BAD_INPUT


def test_on_error_makes_the_caller_s_error():
    class Mine(Exception):
        pass

    with pytest.raises(Mine):
        write_text_atomic("/proc/no/such/dir/x", "x", on_error=lambda exc: Mine(str(exc)))
