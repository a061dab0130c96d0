"""Bad input, tried systematically (hypothesis): random and mutated study files and model configs
through the loaders and the CLI. Every one either works or fails with exit code 2 (1 for a valid
study with no feasible answer) and one clear line; none crashes with a traceback; a study that
fails validation writes nothing."""

import copy
import json
import math
import os
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from cost_model import ConfigError, architecture_from_hf_config
from search.cli.main import main
from search.study.spec import spec_from_dict
from search.study.errors import SpecError

from tests.data_paths import MODEL_CONFIGS
from tests.search.cli.fuzz_inputs import GOOD, run_case
from tests.search.cli.fuzz_kinds import KINDS

REPO = Path(__file__).resolve().parents[3]
STUDY_DOCS = [tomllib.loads(p.read_text()) for p in sorted((REPO / "studies").glob("*.toml"))]
CONFIG_DOCS = [json.loads(p.read_text()) for p in sorted(MODEL_CONFIGS.glob("*.json"))]
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.integers(-5, 5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


def _paths(doc, prefix=()):
    """Every key path of a nested dict."""
    for key, value in doc.items():
        yield prefix + (key,)
        if isinstance(value, dict):
            yield from _paths(value, prefix + (key,))


@st.composite
def mutated(draw, docs):
    doc = copy.deepcopy(draw(st.sampled_from(docs)))
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["delete", "replace", "add"]))
        if action == "delete":
            parent.pop(path[-1], None)
        elif action == "replace":
            parent[path[-1]] = draw(JUNK)
        else:
            parent[draw(st.text(min_size=1, max_size=8))] = draw(JUNK)
    return doc


def _one_line_error(capsys, code: int) -> None:
    err = capsys.readouterr().err.strip()
    if code:
        assert len(err.splitlines()) == 1, err
        assert "Traceback" not in err


@SETTINGS
@given(doc=mutated(STUDY_DOCS))
def test_mutated_study_dicts_load_or_fail_cleanly(doc):
    try:
        spec_from_dict(doc)
    except SpecError as exc:
        assert "\n" not in str(exc)


@SETTINGS
@given(doc=mutated(CONFIG_DOCS))
def test_mutated_model_configs_load_or_fail_cleanly(doc):
    try:
        architecture_from_hf_config(doc)
    except ConfigError as exc:
        assert "\n" not in str(exc)


def _toml_value(value) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # TOML's inf, -inf, nan
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value) if not isinstance(value, dict) else "{ " + ", ".join(
        f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()) + " }"


def _to_toml(doc: dict, prefix: str = "") -> str:
    """A small TOML writer (tables + inline values) for generated test files."""
    scalars = [f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in doc.items()
               if not isinstance(v, dict) and v is not None]
    tables = [(k, v) for k, v in doc.items() if isinstance(v, dict)]
    out = "\n".join(scalars) + "\n"
    for key, value in tables:
        name = f"{prefix}.{json.dumps(str(key))}" if prefix else json.dumps(str(key))
        out += f"\n[{name}]\n" + _to_toml(value, name)
    return out


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(doc=mutated(STUDY_DOCS))
def test_mutated_study_files_through_the_cli(tmp_path_factory, capsys, doc):
    folder = tmp_path_factory.mktemp("study")
    path = folder / "study.toml"
    try:
        path.write_text(_to_toml(doc))
    except (TypeError, ValueError):
        pytest.skip("not representable as TOML")
    code = main(["search", str(path), "--trials", "16", "--no-progress"])
    assert code in (0, 1, 2)
    _one_line_error(capsys, code)
    if code == 2:
        assert not (folder / "out").exists()  # nothing half-written


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(doc=mutated(CONFIG_DOCS), tp=st.sampled_from([1, 2, 3, 8]))
def test_mutated_configs_through_evaluate(tmp_path_factory, capsys, doc, tp):
    path = tmp_path_factory.mktemp("model") / "config.json"
    path.write_text(json.dumps(doc, allow_nan=True))
    code = main(["evaluate", str(path), "--hardware", "h200", "--tp", str(tp), "--concurrency",
                 "1", "64", "--json"])
    assert code in (0, 1, 2)
    _one_line_error(capsys, code)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200))
def test_random_text_as_a_study_file(tmp_path_factory, capsys, text):
    path = tmp_path_factory.mktemp("junk") / "junk.toml"
    path.write_text(text)
    assert main(["pareto", str(path)]) == 2
    _one_line_error(capsys, 2)


# ---- bad inputs found by hand (issues 13 and 17): each exits 2 with one line, writes nothing ---

QUICKSTART_DOC = tomllib.loads((REPO / "studies" / "quickstart.toml").read_text())
LLAMA = str(MODEL_CONFIGS / "Llama-3.1-8B.json")
INF = float("inf")


def _quickstart_with(dotted: str, value) -> dict:
    doc = copy.deepcopy(QUICKSTART_DOC)
    *parents, key = dotted.split(".")
    table = doc
    for name in parents:
        table = table[name]
    table[key] = value
    return doc


@pytest.mark.parametrize("field, value, fragment", [
    ("constraints.aspect_ratio_min", 300, "`aspect_ratio_min` (300.0) must be <= "),
    ("space.tp", {"value": -1}, "`space.tp`: every option must be an integer >= 1; got -1"),
    ("space.num_layers", {"min": -8, "max": 32, "step": 2}, "`space.num_layers`: every option"),
    ("space.hidden_size", {"value": 0}, "`space.hidden_size`: every option"),
    ("space.tp", 0, "`space.tp`: a dimension is a table, not 0"),
    ("space.num_layers", 0, "`space.num_layers`: a dimension is a table, not 0"),
    ("budget.total_params", INF, "`budget.total_params` (inf): Input should be a finite number"),
    ("workload.interactivity_max", INF, "`workload.interactivity_max` (inf)"),
], ids=["aspect-ratio-band", "tp-negative", "layers-negative", "hidden-zero", "tp-bare-zero",
        "layers-bare-zero", "budget-inf", "window-inf"])
def test_known_bad_studies_exit_2_before_writing(tmp_path, capsys, field, value, fragment):
    path = tmp_path / "study.toml"
    path.write_text(_to_toml(_quickstart_with(field, value)))
    assert main(["search", str(path), "--trials", "16", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["study.toml"]  # no journal, no out/


@pytest.mark.parametrize("argv, fragment", [
    (["--concurrency", "-4"], "`--concurrency` must be whole requests >= 1; got -4"),
    (["--concurrency", "0"], "`--concurrency` must be whole requests >= 1; got 0"),
    (["--concurrency", "1", "64", "0"], "got 0"),
    (["--window", "1000", "10"], "`--window` LO (1000) must be < HI (10)"),
    (["--window", "0", "10"], "`--window` LO (0) must be > 0"),
    (["--window", "nan", "10"], "`--window` must be finite numbers; got nan 10"),
    (["--window", "10", "inf"], "`--window` must be finite numbers; got 10 inf"),
], ids=["concurrency-negative", "concurrency-zero", "concurrency-one-zero", "window-reversed",
        "window-zero", "window-nan", "window-inf"])
def test_known_bad_evaluate_options_exit_2_before_writing(tmp_path, capsys, argv, fragment):
    plot = tmp_path / "frontier.png"
    code = main(["evaluate", LLAMA, "--hardware", "h200", "--plot", str(plot), *argv])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err, err
    assert not any(tmp_path.iterdir())


# ---- every kind of input, mutated (tests/search/cli/fuzz_inputs.py) ---------------------------
# Each kind's cases run through `main(argv)` in-process: exit 0, 1 or 2 with one line, never a
# traceback, a hang or a file left behind. tests/benchmarks/fuzz_tally.py runs more of them and
# prints the tally per kind.


def _kind_settings(examples: int):
    """Bounded, repeatable, and no shrinking (a failing case is reported as drawn: shrinking one
    costs minutes; tests/benchmarks/fuzz_tally.py shows more of them)."""
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=list(HealthCheck))


def _holds(case) -> None:
    before = sorted(os.listdir(REPO))
    outcome = run_case(case)
    assert outcome.kind in GOOD, f"{outcome.kind}: {outcome.detail}\n  case: {case.shown()}"
    assert sorted(os.listdir(REPO)) == before  # nothing written beside the sources
    for name in ("x.json", "x.png"):  # the guard held
        assert not (REPO / "cost_model" / "data" / name).exists()


FUZZ_EXAMPLES = {"study TOML": 12, "CLI flags": 40, "HF config": 25, "hardware file": 40,
                 "evaluate --batch CSV": 20, "calibrate --source CSV": 12,
                 "gemm --shapes CSV": 30, "output paths": 30}


def _fuzz_test(kind: str, marks=()):
    @pytest.mark.parametrize("kind", [pytest.param(kind, marks=marks)])
    @_kind_settings(FUZZ_EXAMPLES[kind])
    @given(case=KINDS[kind])
    def test(kind, case):
        _holds(case)

    return test


test_fuzz_study_toml = _fuzz_test("study TOML")
test_fuzz_cli_flags = _fuzz_test("CLI flags")
test_fuzz_hf_config = _fuzz_test("HF config")
test_fuzz_hardware_file = _fuzz_test("hardware file")
test_fuzz_batch_csv = _fuzz_test("evaluate --batch CSV")
test_fuzz_calibrate_csv = _fuzz_test("calibrate --source CSV")
test_fuzz_shapes_csv = _fuzz_test("gemm --shapes CSV")
test_fuzz_output_paths = _fuzz_test("output paths")
