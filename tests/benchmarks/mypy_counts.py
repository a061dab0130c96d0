"""mypy error count per package (issue 27 item 5: mypy clean on cost_model/, constraints/ and
objectives/), each package checked on its own with `--follow-imports=silent` (errors in the
modules it imports are not counted against it) under the `[tool.mypy]` section of pyproject.toml.

Usage: python tests/benchmarks/mypy_counts.py [PACKAGE ...]   (default: the four packages)
Prints one line per package, `package  errors  files`, and the total; exit code 1 when any
package has an error (0 otherwise), so the line can also serve as a check.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cost_model", "constraints", "objectives", "search")
SUMMARY = re.compile(r"Found (\d+) errors? in (\d+) files?")


def count(package: str) -> tuple[int, int]:
    """(errors, files with an error) of `mypy package --follow-imports=silent`."""
    run = subprocess.run([sys.executable, "-m", "mypy", package, "--follow-imports=silent"],
                         cwd=ROOT, capture_output=True, text=True)
    found = SUMMARY.search(run.stdout)
    if found:
        return int(found.group(1)), int(found.group(2))
    if run.returncode == 0:
        return 0, 0
    raise SystemExit(f"mypy failed on {package}: {(run.stderr or run.stdout).strip()[-500:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", default=list(PACKAGES))
    args = parser.parse_args(argv)
    total = 0
    for package in args.packages:
        errors, files = count(package)
        total += errors
        print(f"{package:12s} {errors:4d} errors in {files} files")
    print(f"{'total':12s} {total:4d}")
    return 1 if total else 0


if __name__ == "__main__":
    raise SystemExit(main())
