"""The `archscout` command line: `main(argv) -> int`, testable in-process.

Exit codes: 0 ok; 2 bad input (one line on stderr naming the field, the rule and the value; a
traceback only with --debug); 1 a valid request with no feasible answer; 130 interrupted (Ctrl-C:
finished trials are kept, the same command resumes).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
import traceback

from constraints.errors import ConstraintError
from cost_model.errors import ConfigError, CostModelError
from search import (
    calibrate_command,
    cost_commands,
    evaluate_command,
    inspect_commands,
    lint_command,
    loss_command,
    study_commands,
)
from search.runner import NoFeasibleError
from search.spec import SEED_MAX

EXIT_OK, EXIT_INFEASIBLE, EXIT_BAD_INPUT = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a Ctrl-C
# Every package's error base: bad input, reported as one line with EXIT_BAD_INPUT.
BAD_INPUT_ERRORS = (CostModelError, ConstraintError)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one clear line instead of usage + message
        raise CostModelError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="archscout", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--version", action="version", version=f"archscout {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    cost_commands.add_parsers(sub)
    evaluate_command.add_parser(sub)
    study_commands.add_parsers(sub)
    lint_command.add_parser(sub)
    loss_command.add_parser(sub)
    calibrate_command.add_parser(sub)
    inspect_commands.add_parsers(sub)
    return parser


def package_version() -> str:
    try:
        return importlib.metadata.version("archscout")
    except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


def check_shared_options(args: argparse.Namespace) -> None:
    """Options several commands share, checked once: a sampler seed numpy accepts."""
    seed = getattr(args, "seed", None)
    if seed is not None and not 0 <= seed <= SEED_MAX:
        raise ConfigError(f"`--seed` must be an integer in [0, {SEED_MAX}]; got {seed}")


def parse(argv: list[str]) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code of `--help` / `--version` (argparse printed them)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # only --help and --version exit: errors raise CostModelError
        return int(exc.code or 0)
    check_shared_options(args)
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    try:
        args = parse(argv)
        return args if isinstance(args, int) else args.func(args)
    except KeyboardInterrupt:  # the journal keeps every finished batch
        end_line = "\n" if sys.stderr.isatty() else ""  # after a progress bar's last line
        print(f"{end_line}archscout: interrupted; finished trials are saved, run the same command "
              "again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader (e.g. `| head`) closed stdout: not an error of ours
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return EXIT_OK
    except (evaluate_command.NoFitError, NoFeasibleError) as exc:
        print(f"archscout: {exc}", file=sys.stderr)
        return EXIT_INFEASIBLE
    except BAD_INPUT_ERRORS as exc:
        if debug:
            traceback.print_exc()
        print(f"archscout: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
