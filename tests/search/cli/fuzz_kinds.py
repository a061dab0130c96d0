"""The kinds of input the fuzzer mutates (issue 29, item 6), each a hypothesis strategy of
`Case`s (tests/search/cli/fuzz_inputs.py: the mutations, the runner, the outcomes): study TOML,
CLI flags, Hugging Face configs, hardware files, `evaluate --batch` / `calibrate --source` /
`gemm --shapes` CSVs and output paths. `KINDS` names them for tests/search/cli/test_fuzz.py and
tests/benchmarks/fuzz_tally.py."""

from __future__ import annotations

import json
import os
import re
import tomllib

from hypothesis import strategies as st

from tests.data_paths import MODEL_CONFIGS
from tests.search.cli.fuzz_inputs import (
    MAGNITUDES,
    QUICKSTART,
    REPO,
    STUDY_FILE,
    STUDY_OUT,
    TEXTS,
    Case,
    mutate_doc,
    mutate_rows,
    mutate_text,
    toml_bytes,
)

H200_TOML = REPO / "cost_model" / "data" / "hardware" / "h200.toml"
LLAMA = str(MODEL_CONFIGS / "Llama-3.1-8B.json")
CONFIG_DOCS = [json.loads(p.read_text()) for p in sorted(MODEL_CONFIGS.glob("*.json"))]


def _study_text(trials: int = 8, batch: int = 8) -> str:
    text = QUICKSTART.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^trials = \d+", f"trials = {trials}", text)
    return re.sub(r"(?m)^batch_size = \d+", f"batch_size = {batch}", text)


STUDY_DOC = tomllib.loads(_study_text())
SEARCH_ARGV = ("search", "{dir}/s.toml", "--trials", "4", "--no-progress")


@st.composite
def study_tomls(draw) -> Case:
    """A study file mutated as a document or as bytes, searched for 4 trials."""
    if draw(st.booleans()):
        data = toml_bytes(draw(mutate_doc(STUDY_DOC)))
    else:
        data = draw(mutate_text(_study_text()))
    data = data if data is not None else b"name = \x00"
    return Case("study TOML", SEARCH_ARGV, (("s.toml", data),), outputs=("out/*",))


HARDWARE_DOC = tomllib.loads(H200_TOML.read_text())
HARDWARE_COMMANDS = (
    ("hardware", "{dir}/hw.toml"),
    ("gemm", "4096", "4096", "4096", "--hardware", "{dir}/hw.toml", "--dtype", "bf16"),
    ("evaluate", LLAMA, "--hardware", "{dir}/hw.toml", "--concurrency", "1", "64"),
)


@st.composite
def hardware_files(draw) -> Case:
    """A hardware file (h200.toml) mutated, read by `hardware`, `gemm` and `evaluate`."""
    if draw(st.booleans()):
        data = toml_bytes(draw(mutate_doc(HARDWARE_DOC))) or b"\x00"
    else:
        data = draw(mutate_text(H200_TOML.read_text()))
    return Case("hardware file", draw(st.sampled_from(HARDWARE_COMMANDS)), (("hw.toml", data),))


HF_COMMANDS = (
    ("evaluate", "{dir}/config.json", "--hardware", "h200", "--concurrency", "1", "64"),
    ("lint", "{dir}/config.json", "--hardware", "h200"),
    ("loss", "{dir}/config.json", "--training-tokens", "1e12"),
)


@st.composite
def hf_configs(draw) -> Case:
    """A Hugging Face config.json mutated, read by `evaluate`, `lint` and `loss`."""
    doc = draw(st.sampled_from(CONFIG_DOCS))
    if draw(st.booleans()):
        try:
            data = json.dumps(draw(mutate_doc(doc)), allow_nan=True).encode()
        except (ValueError, RecursionError):  # nested past json's own limit
            data = b"[" * 100_000
    else:
        data = draw(mutate_text(json.dumps(doc, indent=1)))
    return Case("HF config", draw(st.sampled_from(HF_COMMANDS)), (("config.json", data),))


BATCH_ROWS = [{"model": LLAMA, "hardware": "h200", "tp": "1", "concurrency": "8"},
              {"model": LLAMA, "hardware": "h200", "tp": "2", "precision": "bf16",
               "isl": "2048", "osl": "256", "concurrency": ""}]
BATCH_COLUMNS = ["model", "hardware", "tp", "precision", "isl", "osl", "concurrency"]


@st.composite
def batch_csvs(draw) -> Case:
    data = draw(mutate_rows(BATCH_ROWS, BATCH_COLUMNS))
    return Case("evaluate --batch CSV", ("evaluate", "--batch", "{dir}/rows.csv"),
                (("rows.csv", data),), lines_per_row=True)


def _gemm_rows() -> list[dict]:
    """A small measured table (ms, as aiconfigurator's): 800 TFLOP/s plus 5 us per kernel."""
    return [{"m": str(m), "n": str(n), "k": "4096",
             "latency": f"{2 * m * n * 4096 / 8e14 * 1e3 + 0.005:.6g}", "dtype": "bfloat16"}
            for m in (1, 8, 64, 256, 1024, 4096) for n in (4096, 8192)]


CALIBRATE_ARGV = ("calibrate", "--hardware", "h200", "--source", "{dir}/table.csv", "--output",
                  "{dir}/fitted", "--part", "gemm")


@st.composite
def calibrate_csvs(draw) -> Case:
    data = draw(mutate_rows(_gemm_rows(), ["m", "n", "k", "latency", "dtype"]))
    return Case("calibrate --source CSV", CALIBRATE_ARGV, (("table.csv", data),),
                outputs=("fitted/*",))


SHAPE_ROWS = [{"m": "1", "n": "4096", "k": "4096", "dtype": "fp8"},
              {"m": "8192", "n": "14336", "k": "4096", "dtype": "bf16"}]


@st.composite
def shapes_csvs(draw) -> Case:
    data = draw(mutate_rows(SHAPE_ROWS, ["m", "n", "k", "dtype"]))
    return Case("gemm --shapes CSV", ("gemm", "--shapes", "{dir}/shapes.csv", "--hardware",
                                      "h200", "--dtype", "bf16"), (("shapes.csv", data),))


# CLI flags: each command's valid argv, and the options whose values are fuzzed. `search`'s
# --trials and --workers take no magnitudes here: a huge count is a long run, not an error
# (a --workers count no machine could run is helper `storage`'s to refuse).
STUDY = f"{{dir}}/{STUDY_FILE}"
FLAG_COMMANDS = {
    "gemm": (("gemm", "4096", "4096", "4096", "--hardware", "h200", "--dtype", "fp8"),
             ("--hardware", "--dtype", "--json")),
    "evaluate": (("evaluate", LLAMA, "--hardware", "h200", "--concurrency", "1", "64"),
                 ("--tp", "--ep", "--pp", "--dp", "--kvp", "--mtp", "--acceptance", "--isl",
                  "--osl", "--precision", "--kv-precision", "--prefix-cache", "--window",
                  "--serving", "--ratio", "--ttft-limit", "--engine", "--concurrency")),
    "loss": (("loss", LLAMA, "--training-tokens", "1e12"), ("--training-tokens", "--json")),
    "lint": (("lint", LLAMA, "--hardware", "h200"), ("--tp", "--hardware", "--json")),
    "hardware": (("hardware", "h200"), ()),
    "show": (("show", STUDY, "3"), ("--json",)),
    "pareto": (("pareto", STUDY), ("--json",)),
    "export": (("export", STUDY, "3", "--format", "vllm", "-o", "{dir}/x.json"),
               ("--format", "--interactivity")),
    "search": (("search", STUDY, "--trials", "20", "--no-progress"), ("--seed", "--json")),
}
FLAG_OUTPUTS = ("*",)  # `export -o`'s value is fuzzed too: any new file on success
STUDY_FILES = ("study.toml", f"{STUDY_OUT}/study.*")  # what only `search` may write


@st.composite
def cli_flags(draw) -> Case:
    """A command's valid argv with a value replaced, a fuzzed option added or an argument
    dropped."""
    name = draw(st.sampled_from(sorted(FLAG_COMMANDS)))
    argv, options = FLAG_COMMANDS[name]
    argv = list(argv)
    action = draw(st.sampled_from(["replace", "add", "drop"] if options else ["replace", "drop"]))
    value = draw(st.one_of(MAGNITUDES.map(str), TEXTS.filter(lambda t: "\x00" not in t)))
    if action == "replace":
        argv[draw(st.integers(1, len(argv) - 1))] = value
    elif action == "add":
        argv += [draw(st.sampled_from(options)), value]
    else:
        del argv[draw(st.integers(1, len(argv) - 1))]
    study = any(STUDY in a for a in argv) or name in ("show", "pareto", "export", "search")
    kept = ("study.toml",) if name == "search" else STUDY_FILES
    return Case("CLI flags", tuple(argv), study=study, outputs=FLAG_OUTPUTS, kept=kept)


# Output paths: what each output option is pointed at. The study's own files and a file outside
# the output folder (reached through a symbolic link) must come through unchanged; "{dir}" is
# the case's folder, which holds the study (study.toml, out/quickstart/).
OUTPUT_COMMANDS = (
    ("export", STUDY, "3", "--format", "json", "-o"),
    ("export", STUDY, "3", "--format", "hf", "-o"),
    ("export", STUDY, "3", "--format", "vllm", "-o"),
    ("pareto", STUDY, "--csv"),
    ("pareto", STUDY, "--parquet"),
    ("dashboard", STUDY, "-o"),
    ("plot", STUDY, "-o"),
    ("evaluate", LLAMA, "--hardware", "h200", "--concurrency", "1", "--plot"),
)
OUTPUT_TARGETS = st.sampled_from([
    STUDY, f"{{dir}}/{STUDY_OUT}/study.journal", f"{{dir}}/{STUDY_OUT}/study.journal.index",
    f"{{dir}}/{STUDY_OUT}/study.journal.size", f"{{dir}}/{STUDY_OUT}/study.pareto.json",
    f"{{dir}}/{STUDY_OUT}/study.journal.lock", f"{{dir}}/{STUDY_OUT}",
    "{dir}/outs/link.json", "{dir}/new/deeper/x.json", "{dir}/x.json", "{dir}/study.toml/x",
    "", "{dir}/.", "{dir}/outs/..", os.devnull, "{dir}/" + "n" * 300, "{dir}/ünï cødé ✓.json",
    "{dir}/trailing/", "{dir}/frontier.png", f"{{dir}}/{STUDY_OUT}/frontier.svg",
    str(REPO / "cost_model" / "data" / "x.json"), str(REPO / "cost_model" / "data" / "x.png"),
    str(REPO / "objectives" / "data"),
])
OUTSIDE = "victim.txt"  # beside the output folder `outs/`, reached through outs/link.json


@st.composite
def output_paths(draw) -> Case:
    command = draw(st.sampled_from(OUTPUT_COMMANDS))
    target = draw(OUTPUT_TARGETS)
    return Case("output paths", (*command, target), files=((OUTSIDE, b"keep me\n"),),
                links=(("outs/link.json", f"{{dir}}/{OUTSIDE}"),), study=True,
                outputs=("*",), kept=(*STUDY_FILES, OUTSIDE))


KINDS = {
    "study TOML": study_tomls(),
    "CLI flags": cli_flags(),
    "HF config": hf_configs(),
    "hardware file": hardware_files(),
    "evaluate --batch CSV": batch_csvs(),
    "calibrate --source CSV": calibrate_csvs(),
    "gemm --shapes CSV": shapes_csvs(),
    "output paths": output_paths(),
}
