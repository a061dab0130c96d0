"""The `archscout` command line: `main(argv) -> int`, testable in-process.

Exit codes: 0 ok; 2 bad input (one line on stderr naming the field, the rule and the value; a
traceback only with --debug); 1 a valid request with no feasible answer.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from cost_model.errors import CostModelError
from search import (
    calibrate_command,
    cost_commands,
    evaluate_command,
    inspect_commands,
    lint_command,
    study_commands,
)
from search.runner import NoFeasibleError

EXIT_OK, EXIT_INFEASIBLE, EXIT_BAD_INPUT = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one clear line instead of usage + message
        raise CostModelError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="archscout", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    cost_commands.add_parsers(sub)
    evaluate_command.add_parser(sub)
    study_commands.add_parsers(sub)
    lint_command.add_parser(sub)
    calibrate_command.add_parser(sub)
    inspect_commands.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except BrokenPipeError:  # the reader (e.g. `| head`) closed stdout: not an error of ours
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return EXIT_OK
    except (evaluate_command.NoFitError, NoFeasibleError) as exc:
        print(f"archscout: {exc}", file=sys.stderr)
        return EXIT_INFEASIBLE
    except CostModelError as exc:
        if debug:
            traceback.print_exc()
        print(f"archscout: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
