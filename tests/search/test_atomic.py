"""search/atomic.py: the one atomic writer. A file is its old self or wholly new; nothing
half-written or temporary is left behind; errors are one WriteError line naming the option."""

import os

import pytest

from search.atomic import Protected, protecting, real_path, write_atomic, write_text_atomic
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


# ---- the guard (issue 29): protected files and folders, links out of their folder ------------


def test_a_protected_file_is_refused_naming_the_option(tmp_path):
    journal = tmp_path / "study.journal"
    journal.write_text("journal")
    with protecting(Protected({real_path(journal): "the study's journal"})):
        with pytest.raises(WriteError, match=r"^`--csv` \(.*study.journal\) is the study's "
                                             r"journal; an output never overwrites it"):
            write_text_atomic(journal, "csv", "--csv")
    assert journal.read_text() == "journal" and [p.name for p in tmp_path.iterdir()] == \
        ["study.journal"]
    write_text_atomic(journal, "csv", "--csv")  # outside `protecting`: an ordinary file
    assert journal.read_text() == "csv"


def test_a_protected_folder_covers_everything_under_it(tmp_path):
    data = tmp_path / "data"
    (data / "hardware").mkdir(parents=True)
    with protecting(Protected(folders={real_path(data): "the package's data"})):
        for target in (data / "x.toml", data / "hardware" / "new" / "y.toml"):
            with pytest.raises(WriteError, match="is the package's data"):
                write_text_atomic(target, "x", make_parents=True)
        write_text_atomic(tmp_path / "data-copy.toml", "x")  # a sibling, not under it
    assert not (data / "hardware" / "new").exists() and not (data / "x.toml").exists()


def test_protecting_nests_and_ends(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    with protecting(Protected({real_path(a): "a"})):
        with protecting(Protected({real_path(b): "b"})):
            for path in (a, b):
                with pytest.raises(WriteError):
                    write_text_atomic(path, "x")
        write_text_atomic(b, "x")  # the inner protection ended
        with pytest.raises(WriteError):
            write_text_atomic(a, "x")


def test_a_link_to_a_protected_file_is_refused(tmp_path):
    journal = tmp_path / "study.journal"
    journal.write_text("journal")
    link = tmp_path / "frontier.png"
    link.symlink_to(journal)
    with protecting(Protected({real_path(journal): "the study's journal"})):
        with pytest.raises(WriteError, match="is the study's journal"):
            write_text_atomic(link, "png")
    assert journal.read_text() == "journal"


@pytest.mark.parametrize("target", ["../outside.txt", "/etc/hostname-archscout-absent"],
                         ids=["sibling-folder", "absolute"])
def test_a_link_out_of_its_folder_is_refused(tmp_path, target):
    (tmp_path / "outs").mkdir()
    (tmp_path / "outside.txt").write_text("keep")
    link = tmp_path / "outs" / "x.json"
    link.symlink_to(target)
    with pytest.raises(WriteError, match=r"is a symbolic link to .*, outside its folder"):
        write_text_atomic(link, "new")
    assert (tmp_path / "outside.txt").read_text() == "keep" and link.is_symlink()
    assert not os.path.exists("/etc/hostname-archscout-absent")
    assert sorted(p.name for p in (tmp_path / "outs").iterdir()) == ["x.json"]


def test_a_link_to_a_device_is_written_in_place(tmp_path):
    """`-o /dev/stdout` is a link out of /dev to a stream: written in place, not refused."""
    link = tmp_path / "null.json"
    link.symlink_to(os.devnull)
    write_text_atomic(link, "x")
    assert link.is_symlink() and os.path.exists(os.devnull)


def test_a_name_past_the_file_system_limit_is_one_line(tmp_path):
    target = tmp_path / ("n" * 300 + ".json")
    with pytest.raises(WriteError) as info:
        write_text_atomic(target, "x", "-o")
    message = str(info.value)
    assert "\n" not in message and "name too long" in message.lower()
    assert len(message) < 300 and list(tmp_path.iterdir()) == []
