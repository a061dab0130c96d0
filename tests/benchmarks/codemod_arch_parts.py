"""Codemod of issue 27 item 3: rewrite reads of `Architecture` / `ArchArrays` attributes that moved
into a part (`arch.num_experts` -> `arch.ffn.num_experts`, `a.experts` -> `a.ffn.experts`).

Type-driven, so that a `num_kv_heads` of a search space or a `head_dim` of a config dict is left
alone: it runs mypy over the given paths, takes every `"Architecture" has no attribute "X"` (or
`ArchArrays`, in a union too) whose X moved into a part, and inserts the part before X at the
exact column mypy reports; repeated until mypy reports none (a line may hold several). What the
moves are is read from the classes themselves (each part's fields and properties), so the script
needs no edit when a part gains a field. Reads whose receiver mypy cannot type (an untyped
parameter) are rewritten by `--untyped` when the receiver is named `arch`, `a`, `self.a` or
`x.arch` (`--scan` lists them); a read by name (getattr) goes through
`cost_model.architecture.field_value`.

    python tests/benchmarks/codemod_arch_parts.py [--dry-run] [PATH ...]   # typed reads
    python tests/benchmarks/codemod_arch_parts.py --untyped [PATH ...]     # then untyped ones

(default paths: cost_model constraints objectives search tests; run from the repository root.)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from cost_model import ArchArrays, Architecture

DEFAULT_PATHS = ("cost_model", "constraints", "objectives", "search", "tests")
_ERROR = re.compile(r'^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+):'
                    r'(?P<end_line>\d+):(?P<end_col>\d+):'
                    r' error: (?:Item )?"(?P<cls>\w+)"(?: of "[^"]+")? has no attribute '
                    r'"(?P<attr>\w+)"')


def _names(cls: Any) -> set[str]:
    """A class's fields (pydantic or dataclass) and properties."""
    names = set(cls.model_fields) if issubclass(cls, BaseModel) else {f.name for f in fields(cls)}
    return names | {n for n, v in vars(cls).items() if isinstance(v, property)}


def _parts(cls: Any) -> dict[str, Any]:
    """The part classes by attribute name: pydantic sub-models, or dataclass fields."""
    if issubclass(cls, BaseModel):
        return {n: i.annotation for n, i in cls.model_fields.items()
                if isinstance(i.annotation, type) and issubclass(i.annotation, BaseModel)}
    module = sys.modules[cls.__module__]
    return {f.name: getattr(module, f.type) for f in fields(cls)
            if isinstance(f.type, str) and is_dataclass(getattr(module, f.type, None))}


def moves() -> dict[str, dict[str, str]]:
    """Class name -> moved attribute -> its new path ("ffn.num_experts")."""
    out: dict[str, dict[str, str]] = {}
    for cls in (Architecture, ArchArrays):
        own = _names(cls)
        out[cls.__name__] = {member: f"{name}.{member}" for name, part in _parts(cls).items()
                             for member in _names(part) - own}
    return out


def run_mypy(paths: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "mypy", "--follow-imports=silent", "--show-column-numbers",
           "--show-error-end", "--no-error-summary", "--hide-error-context", *paths]
    return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()


def edits_from(lines: list[str], table: dict[str, dict[str, str]]):
    """(path, line) -> {end column: (attr, new path)} from mypy's errors."""
    out: dict[tuple[str, int], dict[int, tuple[str, str]]] = defaultdict(dict)
    for line in lines:
        m = _ERROR.match(line)
        if m and m["attr"] in table.get(m["cls"], {}):
            key = (m["path"], int(m["end_line"]))
            out[key][int(m["end_col"])] = (m["attr"], table[m["cls"]][m["attr"]])
    return out


def apply(edits, dry_run: bool) -> int:
    done = 0
    by_file: dict[str, dict[int, dict[int, tuple[str, str]]]] = defaultdict(dict)
    for (path, line), cols in edits.items():
        by_file[path][line] = cols
    for path, per_line in by_file.items():
        text = Path(path).read_text().split("\n")
        for number, cols in per_line.items():
            src = text[number - 1]
            for end, (attr, new) in sorted(cols.items(), reverse=True):
                start = end - len(attr)
                if src[start:end] != attr or src[start - 1] != ".":
                    print(f"{path}:{number}: skipped (no `.{attr}` at column {end})",
                          file=sys.stderr)
                    continue
                src = src[:start] + new + src[end:]
                done += 1
            text[number - 1] = src
        if not dry_run:
            Path(path).write_text("\n".join(text))
    return done


def scan(paths: list[str], table: dict[str, dict[str, str]], rewrite: bool) -> None:
    """Reads of a moved name after `arch.` / `a.` / `self.a.` / `x.arch.` without a part, which
    mypy cannot see (an untyped receiver): listed, or with `rewrite` rewritten (a name that
    moved in both classes moved to the same part, so the receiver's class does not matter)."""
    paths_of = {**table["ArchArrays"], **table["Architecture"]}
    assert all(table["ArchArrays"].get(n, p) == p for n, p in table["Architecture"].items())
    moved = sorted(paths_of, key=len, reverse=True)
    pattern = re.compile(r"\b(arch|a|self\.a|self\.arch|\w+\.arch)\.(" + "|".join(moved)
                         + r")\b(?!\()")
    for root in paths:
        for file in sorted(Path(root).rglob("*.py")) if Path(root).is_dir() else [Path(root)]:
            if file.resolve() == Path(__file__).resolve():
                continue
            text = file.read_text()
            lines = text.splitlines()
            for number, line in enumerate(lines, 1):
                if pattern.search(line):
                    print(f"{file}:{number}: {line.strip()}")
            if rewrite:
                new = pattern.sub(lambda m: f"{m[1]}.{paths_of[m[2]]}", text)
                if new != text:
                    file.write_text(new)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", default=list(DEFAULT_PATHS))
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--scan", action="store_true", help="list reads mypy cannot type")
    parser.add_argument("--untyped", action="store_true",
                        help="rewrite the reads --scan lists (after the typed rounds)")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    table = moves()
    if args.scan or args.untyped:
        scan(args.paths, table, rewrite=args.untyped)
        return
    total = 0
    for round_number in range(1, args.rounds + 1):
        edits = edits_from(run_mypy(args.paths), table)
        done = apply(edits, args.dry_run)
        total += done
        print(f"round {round_number}: {done} reads rewritten")
        if not done or args.dry_run:
            break
    print(f"{total} reads rewritten in all")


if __name__ == "__main__":
    main()
