"""Regenerate the engines' argument tables (`vllm.json`, `sglang.json`) that the export tests
check every exported flag and value against.

Each table is read from the engine's own argument definitions, not written by hand: the script
imports the engine, builds the parser its serve command builds (vLLM: `EngineArgs.add_cli_args`,
what `vllm serve` adds its engine flags with; SGLang: `ServerArgs.add_cli_args`, what
`python -m sglang.launch_server` parses) and writes, per flag, its value type, its choices (the
parser's, else the `Literal` type of the engine's own config field behind the flag) and, for the
flags that take a JSON object, the fields of the config dataclass the engine builds from it.

    python tests/data/engine_args/regenerate.py vllm SITE_DIR     # SITE_DIR holds `vllm/`
    python tests/data/engine_args/regenerate.py sglang SITE_DIR

SITE_DIR is where the engine's wheel was unpacked (`pip install --no-deps --target SITE_DIR
vllm==0.33.0`); its import-time dependencies must be importable too (only the parser is built:
no GPU is needed). vLLM picks a platform at import; the script names the CPU platform so that the
arguments can be built on a machine without a GPU (the definitions do not depend on it).
The version written into the table is the installed distribution's.

TensorRT-LLM (`trtllm.json`) cannot be built this way here: its PyPI package is a stub that
downloads the wheel from NVIDIA's own index. That table is transcribed from the source
(tensorrt_llm/commands/serve.py's click options, tensorrt_llm/llmapi/llm_args.py's pydantic
fields) at the commit it names; this script leaves it alone.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import dataclasses
import importlib.metadata
import inspect
import json
import sys
import textwrap
import types
import typing
from pathlib import Path

HERE = Path(__file__).resolve().parent
JSON_TYPES = {dict, list}


def literal_values(hint) -> list | None:
    """The values of a Literal type (nested Literals and `X | None` unions flattened)."""
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        out = []
        for arg in typing.get_args(hint):
            out += literal_values(arg) if typing.get_origin(arg) is not None else [arg]
        return out
    if origin in (typing.Union, types.UnionType):  # `Literal[…] | str`: the named values
        values = [literal_values(a) for a in typing.get_args(hint) if a is not type(None)]
        named = [x for v in values if v is not None for x in v]
        return named or None
    return None


def type_name(hint) -> str:
    """int, float, str, bool or json (a dict, list or config object) of a field's type."""
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType) and args:
        names = {type_name(a) for a in args}
        return "json" if "json" in names else sorted(names)[0]
    if origin is typing.Literal:
        return type(typing.get_args(hint)[0]).__name__
    if origin in JSON_TYPES or any(hint is t for t in JSON_TYPES) or dataclasses.is_dataclass(hint):
        return "json"
    return hint.__name__ if any(hint is t for t in (int, float, str, bool)) else "str"


class _Names(dict):
    """Names an annotation uses: the module's, then builtins, then a Literal alias of that name
    elsewhere in the engine (a name imported only for type checkers), else Any."""

    def __init__(self, module_globals: dict):
        super().__init__()
        self.module_globals = module_globals

    def __missing__(self, key):
        value = self.module_globals.get(key, getattr(builtins, key, None))
        if value is None or value is str:  # `X = str` outside TYPE_CHECKING: the checker's view
            literal = imported_literal(key)
            return literal if literal is not typing.Any or value is None else value
        return value


def imported_literal(name: str):
    """A `Literal` type alias called `name` in any imported module of the engine (an alias the
    annotation's module imports only for type checkers, e.g. vLLM's QuantizationMethods), else
    Any."""
    for module in list(sys.modules.values()):
        value = getattr(module, name, None)
        if value is not None and typing.get_origin(value) is typing.Literal:
            return value
    return typing.Any


def source_annotations(klass) -> dict[str, str]:
    """The annotations of `klass` as written in its source (what a type checker reads: an
    alias bound to `str` at run time is still the Literal there)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    return {node.target.id: ast.unparse(node.annotation) for node in body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}


def resolve_hints(cls) -> dict:
    """Each dataclass field's annotation, as written in the source, evaluated in its module
    (names seen only by type checkers resolved per `_Names`)."""
    hints = {}
    for klass in reversed(cls.__mro__):
        module = sys.modules.get(klass.__module__)
        names = _Names(vars(module) if module else {})
        written = {**getattr(klass, "__annotations__", {}), **source_annotations(klass)}
        for name, annotation in written.items():
            try:
                hints[name] = eval(annotation, {}, names) if isinstance(annotation, str) \
                    else annotation
            except Exception:  # an annotation that does not evaluate: no choices from it
                hints[name] = typing.Any
    return hints


def field_table(cls) -> dict:
    """The fields of a config dataclass: type and choices (what a JSON argument may hold)."""
    hints = resolve_hints(cls)
    table = {}
    for f in dataclasses.fields(cls):
        hint = hints.get(f.name, str)
        entry = {"type": type_name(hint)}
        if (values := literal_values(hint)) is not None:
            entry["choices"] = values
        table[f.name] = entry
    return table


def action_table(parser: argparse.ArgumentParser, hints: dict) -> dict:
    """Every optional flag of `parser`: its type (bool for flags that take no value), choices
    (the parser's, else the Literal type of the field it sets) and its aliases."""
    flags = {}
    for action in parser._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs or action.dest == "help":
            continue
        hint = hints.get(action.dest)
        takes_value = action.nargs != 0
        entry = {"dest": action.dest,
                 "type": (type_name(hint) if hint is not None else "str") if takes_value
                 else "bool"}
        if isinstance(action.type, type) and action.type in (int, float) and takes_value:
            entry["type"] = action.type.__name__
        choices = list(action.choices) if action.choices else (
            literal_values(hint) if hint is not None and takes_value else None)
        if choices:
            entry["choices"] = [c if isinstance(c, (int, float, str)) else str(c)
                                for c in choices]
        for flag in action.option_strings:
            if flag.startswith("--"):
                flags[flag] = entry
    return flags


def vllm_table() -> dict:
    import vllm.platforms as platforms
    from vllm.platforms.cpu import CpuPlatform

    platforms._current_platform = CpuPlatform()  # no GPU here; argument definitions are alike
    import vllm.model_executor.layers.quantization  # noqa: F401 - QuantizationMethods
    import vllm.model_executor.model_loader  # noqa: F401 - LoadFormats
    from vllm.config import KVTransferConfig, SpeculativeConfig
    from vllm.engine.arg_utils import EngineArgs
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    hints = resolve_hints(EngineArgs)
    return {"engine": "vllm", "distribution": "vllm",
            "version": importlib.metadata.version("vllm"),
            "source": "vllm/entrypoints/common/cli_args.py make_arg_parser (the parser of "
                      "`vllm serve`: its frontend flags and EngineArgs.add_cli_args, "
                      "vllm/engine/arg_utils.py); value choices from the Literal types of the "
                      "EngineArgs fields (vllm/config/*.py); a `Literal[…] | str` field "
                      "lists its named values",
            "flags": action_table(parser, hints),
            "json_fields": {"--speculative-config": field_table(SpeculativeConfig),
                            "--kv-transfer-config": field_table(KVTransferConfig)}}


def sglang_table() -> dict:
    from sglang.srt.server_args import ServerArgs

    from sglang.srt.speculative import spec_info

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    flags = action_table(parser, resolve_hints(ServerArgs))
    # `--speculative-algorithm` takes a free string that SpeculativeAlgorithm.from_string
    # resolves: the enum's builtins (NONE is the unset value) and its reserved aliases (NEXTN)
    builtins_ = [m.name for m in spec_info.SpeculativeAlgorithm if m.name != "NONE"]
    flags["--speculative-algorithm"]["choices"] = builtins_ + sorted(spec_info._RESERVED_ALIASES)
    return {"engine": "sglang", "distribution": "sglang",
            "version": importlib.metadata.version("sglang"),
            "source": "python/sglang/srt/server_args.py ServerArgs.add_cli_args (what "
                      "`python -m sglang.launch_server` parses; fields in "
                      "python/sglang/srt/arg_groups/fields/*.py); --speculative-algorithm's "
                      "names from python/sglang/srt/speculative/spec_info.py",
            "flags": flags, "json_fields": {}}


READERS = {"vllm": vllm_table, "sglang": sglang_table}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", choices=sorted(READERS))
    parser.add_argument("site", type=Path, help="folder holding the engine's unpacked wheel")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.site.resolve()))
    table = READERS[args.engine]()
    out = HERE / f"{args.engine}.json"
    out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"{out}: {args.engine} {table['version']}, {len(table['flags'])} flags")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
