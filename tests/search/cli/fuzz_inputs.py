"""The fuzzer's mutations of valid inputs, and one runner that classifies what the CLI made of
each case (issue 29: "never a traceback, hang or file left behind").

A kind (tests/search/cli/fuzz_kinds.py) is a strategy of `Case`s: the argv of one `archscout`
command and the files it reads, written into a fresh folder (with a copy of a small searched
study when the command reads one).
`run_case` runs it in-process in that folder (`search.cli.main.main`, stdout and stderr
captured) and names the outcome:
  ok          exit 0
  infeasible  exit 1 (a valid request with no feasible answer) and one line on stderr
  clear       exit 2 and one line on stderr (for `evaluate --batch`: one line per bad row)
  unclear     exit 1 or 2 with no line, or with several, or another exit code
  traceback   an exception escaped `main`, or a traceback was printed
  hang        still running after HANG_S seconds
  leftover    a file left that the command had no business leaving: anything new or changed
              after a failure, a temporary file, a study file or a file outside the output
              folder changed
tests/search/cli/test_fuzz.py runs each kind bounded (the suite's property: ok, infeasible or
clear); tests/benchmarks/fuzz_tally.py runs more and prints the tally per kind.

Mutations (`mutate_doc`, `mutate_text`, `mutate_rows`) change types, signs and magnitudes (past
int64 and float range, inf, nan), encodings (NUL, bytes that are not UTF-8, a BOM, CRLF),
nesting (thousands deep) and size (fields of 10^5 characters, truncation). argv never holds NUL:
no shell can pass one.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import fnmatch
import hashlib
import io
import json
import math
import os
import re
import shutil
import signal
import tempfile
import traceback
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from hypothesis import strategies as st

from search.cli.main import main

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "studies" / "quickstart.toml"
HANG_S = 60  # a case still running after this is a hang
GOOD = ("ok", "infeasible", "clear")  # what the suite's property accepts
OUTCOMES = ("ok", "infeasible", "clear", "unclear", "traceback", "hang", "leftover")
STUDY_NAME = "quickstart"
STUDY_FILE = "study.toml"
STUDY_OUT = f"out/{STUDY_NAME}"


# ---- values ---------------------------------------------------------------------------------

INF = float("inf")
MAGNITUDES = st.sampled_from([0, -1, 1, 3, -(2**31), 2**31, 2**53 + 1, 2**63, -(2**63) - 1,
                              2**64, 10**30, 10**400, 1e308, -1e308, 1e-308, 5e-324, 0.5, -0.0,
                              INF, -INF, math.nan])
TEXTS = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", " ", "nan", "inf", "-1", "1e999", "0x10", "１２８", "∞", "None", "null",
                     "true", "../..", "/", "\u202e", "a,b", 'a"b', "a\nb", "\ufeff1"]),
    st.integers(300, 100_000).map(lambda n: "x" * n),  # past any file system's name limit
)
JUNK = st.one_of(st.none(), st.booleans(), MAGNITUDES, st.integers(-(10**12), 10**12),
                 st.floats(allow_nan=True, allow_infinity=True), TEXTS,
                 st.lists(st.integers(-5, 5), max_size=3),
                 st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))


def nested(depth: int, leaf=1):
    """A list nested `depth` deep (what deeply nested TOML or JSON parses to)."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


NESTED = st.integers(2, 5_000).map(nested)


# ---- documents (TOML, JSON) -----------------------------------------------------------------


def _paths(doc, prefix=()):
    """Every key path of a nested dict (into arrays of tables too, by index)."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc)
    for key, value in items:
        yield prefix + (key,)
        tables = isinstance(value, list) and value and all(isinstance(v, dict) for v in value)
        if isinstance(value, dict) or tables:
            yield from _paths(value, prefix + (key,))


@st.composite
def mutate_doc(draw, doc: dict) -> dict:
    """`doc` with 1-3 keys deleted, replaced by junk, a magnitude or deep nesting, or added."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["delete", "replace", "nest", "add", "retype"]))
        if action == "delete" and isinstance(parent, dict):
            parent.pop(path[-1], None)
        elif action in ("replace", "delete"):
            parent[path[-1]] = draw(JUNK)
        elif action == "nest":
            parent[path[-1]] = draw(NESTED)
        elif action == "retype":
            parent[path[-1]] = _retyped(parent[path[-1]])
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=8))] = draw(JUNK)
    return doc


def _retyped(value):
    """The value as another type: a number as text, text as a list, a table as a number."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return [value]
    return 1


@st.composite
def mutate_text(draw, text: str) -> bytes:
    """`text`'s UTF-8 bytes with one encoding-, nesting- or size-level change."""
    data = text.encode()
    at = draw(st.integers(0, len(data)))
    action = draw(st.sampled_from(["nul", "not-utf8", "bom", "crlf", "truncate", "long-line",
                                   "deep", "duplicate", "empty"]))
    if action == "nul":
        return data[:at] + b"\x00" + data[at:]
    if action == "not-utf8":
        return data[:at] + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80"])) + \
            data[at:]
    if action == "bom":
        return b"\xef\xbb\xbf" + data
    if action == "crlf":
        return data.replace(b"\n", b"\r\n")
    if action == "truncate":
        return data[:at]
    if action == "long-line":
        return data + b"\n" + b"x" * draw(st.integers(10_000, 200_000)) + b"\n"
    if action == "deep":  # a value nested thousands deep, as a first key
        depth = draw(st.integers(100, 20_000))
        deep = b"[" * depth + b"1" + b"]" * depth
        if data.startswith(b"{"):
            return b'{"deep": ' + deep + b", " + data[1:]
        return b"deep = " + deep + b"\n" + data
    if action == "duplicate":
        return data + b"\n" + data
    return b""


# ---- CSV tables ------------------------------------------------------------------------------


def csv_bytes(rows: list[dict], columns: list[str]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode("utf-8", "surrogatepass")


CELLS = st.one_of(MAGNITUDES.map(str), TEXTS, st.just(""), st.just("\x00"),
                  st.integers(-(10**30), 10**30).map(str))


@st.composite
def mutate_rows(draw, rows: list[dict], columns: list[str]) -> bytes:
    """A CSV of `rows` with cells replaced by junk, a column dropped or added, or its bytes
    changed (`mutate_text`)."""
    rows, columns = copy.deepcopy(rows), list(columns)
    action = draw(st.sampled_from(["cells", "cells", "drop-column", "add-column", "bytes",
                                   "no-rows"]))
    if action == "bytes":
        return draw(mutate_text(csv_bytes(rows, columns).decode()))
    if action == "drop-column":
        columns.remove(draw(st.sampled_from(columns)))
    elif action == "add-column":
        columns.append(draw(st.sampled_from(["extra", "", "m", "model", "x" * 300])))
    elif action == "no-rows":
        rows = []
    for _ in range(draw(st.integers(1, 4)) if action == "cells" else 0):
        row = draw(st.sampled_from(rows))
        row[draw(st.sampled_from(columns))] = draw(CELLS)
    return csv_bytes(rows, columns)


# ---- a small TOML writer (tables, inline values) --------------------------------------------


def toml_value(value) -> str:
    depth, inner = 0, value
    while isinstance(inner, list) and len(inner) == 1:
        depth, inner = depth + 1, inner[0]
    if depth > 1:  # deep nesting, written without recursing once per level
        return "[" * depth + toml_value(inner) + "]" * depth
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # TOML's inf, -inf, nan
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}"
                                for k, v in value.items() if v is not None) + " }"
    return json.dumps(value)


def to_toml(doc: dict, prefix: str = "") -> str:
    scalars = [f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in doc.items()
               if not isinstance(v, dict) and v is not None]
    out = "\n".join(scalars) + "\n"
    for key, value in doc.items():
        if isinstance(value, dict):
            name = f"{prefix}.{json.dumps(str(key))}" if prefix else json.dumps(str(key))
            out += f"\n[{name}]\n" + to_toml(value, name)
    return out


def toml_bytes(doc: dict) -> bytes | None:
    """`doc` as TOML, or None when it has no TOML form (a NUL key, a huge int, deep nesting)."""
    try:
        return to_toml(doc).encode()
    except (ValueError, TypeError, RecursionError, UnicodeEncodeError):
        return None


# ---- cases and the runner -------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    kind: str
    argv: tuple[str, ...]  # "{dir}" stands for the case's folder
    files: tuple[tuple[str, bytes], ...] = ()  # written into the folder first
    links: tuple[tuple[str, str], ...] = ()  # (link, target) symbolic links made first
    study: bool = False  # a copy of the small searched study in the folder
    outputs: tuple[str, ...] = ()  # patterns of files exit 0 (or 1) may write or change
    kept: tuple[str, ...] = ()  # patterns of files no exit code may change (a study's own)
    lines_per_row: bool = False  # stderr may hold one line per bad row (evaluate --batch)

    def shown(self) -> str:
        files = ", ".join(f"{name}={data[:80]!r}{'…' if len(data) > 80 else ''}"
                          for name, data in self.files)
        argv = [a if len(a) <= 80 else a[:40] + f"…({len(a)} chars)" for a in self.argv]
        return f"{' '.join(argv)}  [{files}]" if files else " ".join(argv)


@dataclass
class Outcome:
    kind: str
    code: int | None = None
    detail: str = ""
    case: Case | None = field(default=None, repr=False)


class _Hang(BaseException):
    """Raised by the alarm in a case past HANG_S (a BaseException: no `except Exception`
    inside the CLI swallows it)."""


@contextlib.contextmanager
def _alarm(seconds: float):
    def fire(signum, frame):
        raise _Hang()

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@cache
def searched_study() -> Path:
    """A small quick-start study, searched once per process (16 trials), to copy per case."""
    folder = Path(tempfile.mkdtemp(prefix="archscout-fuzz-study-"))
    text = QUICKSTART.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^trials = \d+", "trials = 16", text)
    text = re.sub(r"(?m)^batch_size = \d+", "batch_size = 16", text)
    (folder / STUDY_FILE).write_text(text, encoding="utf-8")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["search", str(folder / STUDY_FILE), "--no-progress"]) == 0
    return folder


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` (links not followed) and a digest of its bytes."""
    found = {}
    for path in folder.rglob("*"):
        if path.is_symlink() or not path.is_file():
            continue
        found[str(path.relative_to(folder))] = hashlib.sha1(path.read_bytes()).hexdigest()
    return found


def run_case(case: Case) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="archscout-fuzz-") as tmp:
        folder = Path(tmp)
        _prepare(case, folder)
        before = snapshot(folder)
        outcome = _run(case, folder)
        if outcome.kind in GOOD and (why := _leftover(case, outcome.code, before,
                                                      snapshot(folder))):
            outcome = Outcome("leftover", outcome.code, why)
    outcome.case = case
    return outcome


def _prepare(case: Case, folder: Path) -> None:
    if case.study:
        shutil.copytree(searched_study(), folder, dirs_exist_ok=True)
    for name, data in case.files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    for link, target in case.links:
        (folder / link).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target.replace("{dir}", str(folder)), folder / link)


def _run(case: Case, folder: Path) -> Outcome:
    argv = [a.replace("{dir}", str(folder)) for a in case.argv]
    err = io.StringIO()
    try:  # in the case's folder: a fuzzed relative output lands there, and is checked there
        with _alarm(HANG_S), contextlib.chdir(folder), \
                contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(argv)
    except _Hang:
        return Outcome("hang", None, f"past {HANG_S} s")
    except BaseException as exc:  # noqa: BLE001 - what escaped main is the finding
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return Outcome("traceback", None, f"{type(exc).__name__}: {str(exc)[:200]} "
                       f"({Path(where.filename).name}:{where.lineno})")
    return _classify(case, code, err.getvalue())


def _classify(case: Case, code, stderr: str) -> Outcome:
    lines = [line for line in stderr.splitlines() if line.strip()]
    if "Traceback (most recent call last)" in stderr:
        return Outcome("traceback", code, stderr[-300:])
    if code == 0:
        return Outcome("ok", 0)
    errors = [line for line in lines if not line.startswith("note: ")]
    one = len(errors) == 1 or (case.lines_per_row and errors)
    if code in (1, 2) and one:
        return Outcome("infeasible" if code == 1 else "clear", code, errors[-1][:300])
    return Outcome("unclear", code, " | ".join(lines)[:300] or "(nothing on stderr)")


def _leftover(case: Case, code: int, before: dict, after: dict) -> str | None:
    changed = sorted(name for name in after.keys() | before.keys()
                     if before.get(name) != after.get(name))
    temporary = [name for name in changed if name.endswith(".tmp")]
    if temporary:
        return f"temporary files left: {temporary[:3]}"
    broken = [name for name in changed if any(fnmatch.fnmatch(name, p) for p in case.kept)]
    if broken:
        return f"files that must be kept were changed: {broken[:3]}"
    allowed = case.outputs if code in (0, 1) else ()
    stray = [name for name in changed if not any(fnmatch.fnmatch(name, p) for p in allowed)]
    return f"files written or changed: {stray[:3]}" if stray else None
