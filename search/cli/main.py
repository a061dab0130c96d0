"""The `archscout` command line: `main(argv) -> int`, testable in-process.

Exit codes: 0 ok; 2 bad input (one line on stderr naming the field, the rule and the value; a
traceback only with --debug); 1 a valid request with no feasible answer; 130 interrupted (Ctrl-C:
finished trials are kept, the same command resumes).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import re
import sys
import traceback

from search.cli.errors import CommandError
from search.errors import EXIT_BAD_INPUT, InfeasibleError, SearchError

EXIT_OK = 0
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a Ctrl-C
PATH_SHOWN_MAX = 120  # characters of a path an error line shows (names can be 4096 long)
# Every command, the module (under `search.cli`) whose add_parser / add_parsers registers it, and
# its help line. Modules are imported only when their command runs (or its help is shown): the
# gemm and evaluate paths never load optuna, matplotlib, scipy or the calibration code. A test
# checks that each module registers exactly its commands here, with the same help.
COMMANDS = (
    ("hardware", "cost", "the hardware catalog, or one entry with its sources"),
    ("gemm", "cost", "predicted time of one GEMM, or of every row of a CSV"),
    ("evaluate", "evaluate", ("cost model on one architecture: points, frontier, area "
                                      "(or every row of a CSV with --batch)")),
    ("search", "study", "run (or resume) a study and print its Pareto set"),
    ("pareto", "study", "the Pareto-optimal architectures, ranked by frontier area"),
    ("lint", "lint", ("the seven hardware guidelines on a model: what each broken one "
                              "costs and the nearest compliant alternative")),
    ("loss", "loss", ("the accuracy proxy of one architecture: loss, band, ranked loss, "
                              "each term and the flags")),
    ("calibrate", "calibrate", "fit the efficiency layer to measured kernels, per serving engine"),
    ("show", "inspect", ("one trial: shape, deployment, frontier, time breakdown, "
                                  "constraints")),
    ("export", "inspect", ("one trial as a Hugging Face config.json, our JSON record "
                                    "or vLLM serving arguments")),
    ("plot", "inspect", ("plot the study: Pareto frontiers, one trial's time breakdown "
                                  "or GEMM roofline, or hypervolume over trials")),
    ("dashboard", "dashboard", ("a feasible-only view of a study for optuna-dashboard "
                                "(and serve it)")),
    ("compare", "compare", ("measured vs predicted TPOT, TTFT and tokens/s/GPU from the "
                            "engines' benchmark outputs")),
)
COMMAND_MODULES = tuple(dict.fromkeys(module for _, module, _ in COMMANDS))
# Errors of layers 0 and 1 a command may not have imported, by (module, class): an error whose
# module was never imported cannot have been raised, so these are looked up in sys.modules at the
# time. Layer 2's errors all derive from `search.errors.SearchError`, which carries its exit code.
BAD_INPUT_ERRORS = (("cost_model.errors", "CostModelError"), ("constraints.errors",
                                                               "ConstraintError"))


def loaded_errors(names: tuple[tuple[str, str], ...]) -> tuple[type, ...]:
    """The error classes of `names` whose modules are imported (none raised otherwise)."""
    return tuple(getattr(sys.modules[module], cls) for module, cls in names
                 if module in sys.modules)


def __getattr__(name: str):
    """`main.cost` etc.: the command modules, imported on first use."""
    if name in COMMAND_MODULES:
        return importlib.import_module(f"search.cli.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one clear line instead of usage + message
        raise CommandError(command_message(self.prog, message))


def command_message(prog: str, message: str) -> str:
    """argparse's `message` about `prog` ("archscout search") as main prints it after
    "archscout: error: ": the command named once and the option in backticks ("search:
    `--trials`: must be …")."""
    command = prog.removeprefix("archscout").strip()
    message = re.sub(r"^argument ([^:\s/]+)(?:/[^:\s]+)?: ", r"`\1`: ", message)  # the field, named
    return f"{command}: {message}" if command else message


class _Registrar:
    """Stands in for the subparsers action while a command module registers its commands:
    `add_parser(name, …)` hands back the placeholder parser of that name."""

    def __init__(self, parsers: dict[str, _CommandParser]):
        self.parsers = parsers
        self.registered: dict[str, dict] = {}  # name -> add_parser keywords, for the table test

    def add_parser(self, name: str, **kwargs) -> _CommandParser:
        self.registered[name] = kwargs
        parser = self.parsers[name]
        parser.description = kwargs.get("description", parser.description)
        return parser


class _CommandParser(_Parser):
    """A command's parser that imports its module and lets it add the arguments only when
    the command is parsed or its help is shown."""

    module: str  # set by build_parser
    siblings: dict[str, _CommandParser]  # every command parser of the same module
    _loaded = False

    def load(self) -> None:
        if self._loaded:
            return
        for parser in self.siblings.values():
            parser._loaded = True
        command_module = importlib.import_module(f"search.cli.{self.module}")
        register = getattr(command_module, "add_parsers", None) or command_module.add_parser
        register(_Registrar(self.siblings))

    def parse_known_args(self, args=None, namespace=None):
        self.load()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self.load()
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="archscout", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--version", action="version", version=f"archscout {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_CommandParser)
    by_module: dict[str, dict[str, _CommandParser]] = {}
    for name, module, text in COMMANDS:
        command = sub.add_parser(name, help=text)
        siblings = by_module.setdefault(module, {})
        siblings[name] = command
        command.module, command.siblings = module, siblings
    return parser


def package_version() -> str:
    try:
        return importlib.metadata.version("archscout")
    except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


def check_shared_options(args: argparse.Namespace) -> None:
    """Options several commands share, checked once: a sampler seed numpy accepts."""
    seed = getattr(args, "seed", None)
    if seed is None:
        return
    from search.study.spec import SEED_MAX  # only the study commands take a seed

    if not 0 <= seed <= SEED_MAX:
        raise CommandError(f"`--seed` must be an integer in [0, {SEED_MAX}]; got {seed}")


def parse(argv: list[str]) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code of `--help` / `--version` (argparse printed them)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # only --help and --version exit: errors raise CommandError
        return int(exc.code or 0)
    check_shared_options(args)
    return args


def run(args: argparse.Namespace) -> int:
    """The parsed command; one that writes files runs with what it may not overwrite protected
    (`search.cli.guard`: the study's own files, the package's data)."""
    from search.cli.guard import guarded, has_outputs

    if not has_outputs(args):
        return args.func(args)
    with guarded(args):
        return args.func(args)


def path_message(exc: OSError) -> str:
    """An OSError no command turned into its own error, as one line naming the path."""
    name = exc.filename if exc.filename is not None else "a file"
    shown = str(name) if len(str(name)) <= PATH_SHOWN_MAX else f"{str(name)[:PATH_SHOWN_MAX]}…"
    return f"{shown!r} cannot be used: {exc.strerror or exc}"


def one_line(message: str) -> str:
    """`message` as one line: a control character a user's value brought in (a newline in a
    path, an escape) is written as its escape (`\\n`), never acted on."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    try:
        args = parse(argv)
        return args if isinstance(args, int) else run(args)
    except KeyboardInterrupt:  # the journal keeps every finished batch
        end_line = "\n" if sys.stderr.isatty() else ""  # after a progress bar's last line
        print(f"{end_line}archscout: interrupted; finished trials are saved, run the same command "
              "again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader (e.g. `| head`) closed stdout: not an error of ours
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return EXIT_OK
    except InfeasibleError as exc:
        print(f"archscout: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except (SearchError, *loaded_errors(BAD_INPUT_ERRORS)) as exc:
        if debug:
            traceback.print_exc()
        print(f"archscout: error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:  # a path the system refuses (too long, not a folder, no permission)
        if debug:
            traceback.print_exc()
        print(f"archscout: error: {one_line(path_message(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
