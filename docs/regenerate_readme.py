"""Rerun every `$ command` of the README and put its real output under it.

A README code block whose first line starts with `$ ` is a transcript: each `$ ` line is run
(in the repository root, through bash, stderr merged) and the lines after it, up to the next
`$ ` line or the block's end, are replaced with what it printed. A block may trim its output:
`# first N lines` on the line after a command keeps only the first N lines (and the marker).
Blocks without a `$ ` first line are left alone. Run after `archscout search
studies/quickstart.toml` so the study the README shows exists.

Usage: python docs/regenerate_readme.py [--check]
  --check  exit 1 when the README would change (print which commands), write nothing
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
TRIM = re.compile(r"^# first (\d+) lines$")


def run(command: str) -> list[str]:
    done = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True, text=True,
                          timeout=900)
    return (done.stdout + done.stderr).rstrip("\n").splitlines()


def _transcript(lines: list[str]) -> list[str]:
    """A transcript block's lines with every command's output rerun."""
    out, i = [], 0
    while i < len(lines):
        command = lines[i][2:]
        out.append(lines[i])
        i += 1
        trim = None
        if i < len(lines) and (m := TRIM.match(lines[i])):
            trim = int(m.group(1))
            out.append(lines[i])
            i += 1
        while i < len(lines) and not lines[i].startswith("$ "):
            i += 1
        printed = run(command)
        out += printed[:trim] if trim is not None else printed
    return out


def regenerate(text: str) -> tuple[str, list[str]]:
    """The README with every transcript rerun, and the commands whose output changed."""
    lines, out, changed, i = text.splitlines(), [], [], 0
    while i < len(lines):
        out.append(lines[i])
        if lines[i].startswith("```") and i + 1 < len(lines) and lines[i + 1].startswith("$ "):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            block = lines[i + 1:end]
            new = _transcript(block)
            if new != block:
                changed += [line for line in block if line.startswith("$ ")]
            out += new
            i = end
            continue
        i += 1
    return "\n".join(out) + "\n", changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report, do not write")
    args = parser.parse_args(argv)
    text, changed = regenerate(README.read_text())
    for command in changed:
        print(f"changed: {command}")
    if args.check:
        return 1 if changed else 0
    README.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
