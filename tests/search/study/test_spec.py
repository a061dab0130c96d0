"""Study files: every shipped one validates; bad ones fail with one line naming the field."""

import shutil
from pathlib import Path

import pytest

from search.study.spec import load_spec, spec_from_dict
from search.study.errors import SpecError

REPO = Path(__file__).resolve().parents[3]
STUDIES = sorted((REPO / "studies").glob("*.toml"))
QUICKSTART = REPO / "studies" / "quickstart.toml"
H200 = REPO / "cost_model" / "data" / "hardware" / "h200.toml"


def _base() -> dict:
    return {
        "name": "t", "trials": 10,
        "budget": {"training_tokens": 1e12},
        "hardware": {"gpu": "h200"},
        "workload": {"isl_tokens": 128, "osl_tokens": 128},
        "space": {"hidden_size": {"min": 1024, "max": 2048, "step": 128},
                  "num_layers": {"choices": [8, 16]}, "intermediate_size": {"value": 4096}},
    }


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_shipped_studies_validate(path):
    spec = load_spec(path)
    assert spec.name == path.stem
    assert spec.trials > 0


def test_minimal_spec_has_defaults():
    spec = spec_from_dict(_base())
    assert spec.sampler == "nsga2"
    assert spec.objectives.directions == ["maximize", "minimize"]
    assert spec.space.tp.options == [1]


def _error(mutate) -> str:
    doc = _base()
    mutate(doc)
    with pytest.raises(SpecError) as err:
        spec_from_dict(doc)
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("mutate, fragment", [
    (lambda d: d.update(colour="red"), "`colour` is not a known key"),
    (lambda d: d["space"].update(layers={"value": 3}), "`space.layers` is not a known key"),
    (lambda d: d["space"]["hidden_size"].update(min=4096), "`min` (4096) must be <= `max` (2048)"),
    (lambda d: d["space"]["hidden_size"].update(step=100), "multiple of `step` (100)"),
    (lambda d: d["space"].update(tp={"value": 2, "choices": [1]}), "exactly one of"),
    (lambda d: d.pop("budget"), "`budget` is required"),
    (lambda d: d["hardware"].update(gpu="tpu-v5"), "`hardware` 'tpu-v5' is unknown"),
    (lambda d: d["space"].update(precision={"choices": ["fp8", "int3"]}), "`space.precision`"),
    (lambda d: d.update(trials=0), "`trials`"),
    (lambda d: d.update(name="bad name!"), "`name`"),
    (lambda d: d.update(objectives={"names": ["speed"]}), "`speed` is not an objective"),
    (lambda d: d.update(constraints={"hard": ["vibes"]}), "`vibes` is not a constraint"),
    (lambda d: d["workload"].update(interactivity_min=5000.0), "`interactivity_min` (5000.0)"),
], ids=["unknown-key", "unknown-nested", "min-gt-max", "bad-step", "two-forms", "missing",
        "unknown-gpu", "unknown-precision", "zero-trials", "bad-name", "unknown-objective",
        "unknown-constraint", "empty-window"])
def test_bad_spec_names_the_field(mutate, fragment):
    assert fragment in _error(mutate)


INF = float("inf")


@pytest.mark.parametrize("mutate, fragment", [
    # issue 13: these passed validation and failed mid-search (or ran a whole search)
    (lambda d: d.update(constraints={"aspect_ratio_min": 300, "aspect_ratio_max": 256}),
     "`aspect_ratio_min` (300.0) must be <= `aspect_ratio_max` (256.0)"),
    (lambda d: d["space"].update(tp={"value": -1}), "`space.tp`: every option must be an integer "
                                                    ">= 1; got -1"),
    (lambda d: d["space"].update(num_layers={"min": -8, "max": 8, "step": 2}),
     "`space.num_layers`: every option must be an integer >= 1; got `min` = -8"),
    (lambda d: d["space"].update(hidden_size={"value": 0}), "`space.hidden_size`: every option "
                                                            "must be an integer >= 1; got 0"),
    (lambda d: d["space"].update(num_experts={"choices": [0, -4]}),
     "`space.num_experts`: every option must be an integer >= 0; got -4"),
    (lambda d: d["space"].update(num_layers={"value": 10**9}), "`space.num_layers`: every option "
                                                                "must be an integer <= 100000"),
    (lambda d: d["space"].update(hidden_size={"value": "wide"}), "`space.hidden_size`: every "
                                                                 "option must be an integer"),
    (lambda d: d["space"].update(precision={"value": 8}), "`space.precision`: every option must "
                                                          "be a format name"),
    # issue 17: a bare number is not a dimension; say what is
    (lambda d: d["space"].update(tp=0), "`space.tp`: a dimension is a table, not 0; write "
                                        "`{ value = 0 }`, `{ choices = [...] }` or `{ min"),
    (lambda d: d["space"].update(num_layers=0), "`space.num_layers`: a dimension is a table, "
                                                "not 0"),
    (lambda d: d["space"].update(num_layers=[8, 16]),
     "`space.num_layers`: a dimension is a table, not [8, 16]; write `{ choices = [8, 16] }`"),
    (lambda d: d["budget"].update(total_params=INF), "`budget.total_params` (inf): Input should be "
                                                     "a finite number"),
    (lambda d: d["budget"].update(training_tokens=INF), "`budget.training_tokens` (inf)"),
    (lambda d: d["workload"].update(interactivity_max=INF), "`workload.interactivity_max` (inf)"),
    (lambda d: d["workload"].update(interactivity_min=float("nan")),
     "`workload.interactivity_min` (nan)"),
    (lambda d: d["space"].update(intermediate_size={"value": 0}), "`space`: `intermediate_size` "
                                                                  "must have an option > 0"),
    (lambda d: d.update(trials=True), "`trials` (True): Input should be a valid integer"),
    (lambda d: d["workload"].update(isl_tokens=1e3), "`workload.isl_tokens` (1000.0)"),
    (lambda d: d["budget"].update(total_params=False), "`budget.total_params` (False)"),
    (lambda d: d.update(seed=-1), "`seed` (-1)"),
    (lambda d: d.update(seed=2**40), "`seed` (1099511627776)"),
], ids=["aspect-ratio-min-gt-max", "tp-negative", "layers-range-negative", "hidden-zero",
        "experts-negative-choice", "layers-huge", "hidden-string", "precision-number",
        "tp-bare-zero", "layers-bare-zero", "layers-bare-list", "budget-inf", "tokens-inf",
        "window-inf", "window-nan", "dense-without-ffn", "trials-bool", "tokens-float",
        "budget-bool", "seed-negative", "seed-huge"])
def test_values_no_search_can_use_are_rejected_at_load(mutate, fragment):
    assert fragment in _error(mutate)


def test_a_huge_range_is_not_enumerated():
    doc = _base()
    doc["space"]["hidden_size"] = {"min": 1, "max": 10**12}  # rejected by its bound, not by memory
    with pytest.raises(SpecError, match="<= 1048576"):
        spec_from_dict(doc)
    doc["space"]["hidden_size"] = {"min": 128, "max": 1048576}
    assert len(spec_from_dict(doc).space.hidden_size.options) == 1048576 - 127


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(bad)


# ---- issue 29: one schema, bounded, with cross-field rules --------------------------------------


@pytest.mark.parametrize("name", [".", "..", "a/b", "../up", "-x", ".hidden", "a b", "ümlaut",
                                  "x" * 81, "", "a\\b"],
                         ids=["dot", "dot-dot", "slash", "parent", "dash", "hidden", "space",
                              "non-ascii", "too-long", "empty", "backslash"])
def test_study_names_are_file_name_safe(name):
    message = _error(lambda d: d.update(name=name))
    assert message.startswith("study: `name` must be file-name-safe: 1 to 80 letters"), message
    assert len(message) < 300


@pytest.mark.parametrize("name", ["a", "_x", "quickstart", "moe-400b.v2", "9" * 80])
def test_file_name_safe_names_pass(name):
    doc = _base()
    doc["name"] = name
    assert spec_from_dict(doc).name == name


@pytest.mark.parametrize("mutate, fragment", [
    (lambda d: d["space"].update(hiden_size={"value": 3}),
     "`space.hiden_size` is not a known key (did you mean `hidden_size`?)"),
    (lambda d: d["hardware"].update(max_gpu=8),
     "`hardware.max_gpu` is not a known key (did you mean `max_gpus`?)"),
    (lambda d: d["space"]["num_layers"].update(choice=[1]),
     "`space.num_layers.choice` is not a known key (did you mean `choices`?)"),
    (lambda d: d.update(budgett={}), "`budgett` is not a known key (did you mean `budget`?)"),
    (lambda d: d["workload"].update(zzz=1), "`workload.zzz` is not a known key (known: "
                                             "adp_balance_timeout_steps, interactivity_max,"),
], ids=["space", "hardware", "dimension", "top-level", "none-close"])
def test_unknown_keys_name_the_nearest_known_one(mutate, fragment):
    assert fragment in _error(mutate)


@pytest.mark.parametrize("mutate, fragment", [
    (lambda d: d["budget"].update(training_tokens=1e30),
     "`budget.training_tokens` (1e+30): Input should be less than or equal to 1000000000000000"),
    (lambda d: d["budget"].update(total_params=1e30), "`budget.total_params` (1e+30)"),
    (lambda d: d["budget"].update(total_params=8e9, active_params=9e9),
     "`budget.active_params` (9e+09) must be <= `budget.total_params` (8e+09)"),
    (lambda d: d["workload"].update(interactivity_max=1e9),
     "`workload.interactivity_max` (1000000000.0)"),
    (lambda d: d["objectives"].update(ttft_concurrency=10**9) if "objectives" in d else
     d.update(objectives={"ttft_concurrency": 10**9}), "`objectives.ttft_concurrency`"),
    (lambda d: d["space"].update(tp={"choices": [1, 16]}),
     "`space.tp` option 16 exceeds `hardware.max_gpus` (8): no deployment could use it"),
    (lambda d: d["space"].update(ep={"value": 64}), "`space.ep` option 64 exceeds"),
    (lambda d: d["space"].update(tp={"value": 4}, pp={"value": 4}),
     "the smallest deployment of the space (tp·pp·dp·kvp = 16 GPUs) exceeds "
     "`hardware.max_gpus` (8)"),
    (lambda d: d["space"].update(num_experts={"choices": [0, 8]},
                                 experts_per_token={"choices": [2, 16]},
                                 moe_intermediate_size={"value": 1024}),
     "`space.experts_per_token` option 16 exceeds every `space.num_experts` option (at most 8)"),
    (lambda d: d["space"].update(precision={"value": "x" * 500}),
     "String should have at most 64 characters"),
    (lambda d: d["space"].update(num_layers=list(range(10_000))), "a dimension is a table, not"),
    (lambda d: d.update(description="x" * 20_000), "`description`"),
], ids=["training-tokens", "total-params", "active-over-total", "interactivity", "ttft-c",
        "tp-over-gpus", "ep-over-gpus", "smallest-deployment", "top-k-over-experts",
        "long-format-name", "huge-bare-list", "long-description"])
def test_values_past_what_physics_and_released_models_allow(mutate, fragment):
    message = _error(mutate)
    assert fragment in message and len(message) < 400, message


def test_a_relative_hardware_path_is_read_against_the_study_file(tmp_path, monkeypatch):
    (tmp_path / "hw").mkdir()
    shutil.copy(H200, tmp_path / "hw" / "mine.toml")
    (tmp_path / "study.toml").write_text(QUICKSTART.read_text().replace(
        'gpu = "h200"', 'gpu = "hw/mine.toml"'))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not where the study is
    spec = load_spec(tmp_path / "study.toml")
    assert spec.hardware.gpu == str(tmp_path / "hw" / "mine.toml")
    assert spec_from_dict(spec.model_dump(mode="json")) == spec  # the record reads back


@pytest.mark.parametrize("data, fragment", [
    (b'name = "q"\x00\n', "not valid TOML: "),
    (b'name = "\xff"\n', "not valid TOML: not UTF-8 text (byte 0xff at offset 8)"),
    (b"a = " + b"[" * 50_000 + b"]" * 50_000, "not valid TOML: nested too deeply"),
    (b"[a]\n" * 2, "not valid TOML: "),
], ids=["nul", "binary", "deep", "repeated-table"])
def test_unreadable_study_files_are_one_line(tmp_path, data, fragment):
    path = tmp_path / "s.toml"
    path.write_bytes(data)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_a_deeply_nested_document_is_one_line():
    doc = _base()
    deep = 1
    for _ in range(100_000):
        deep = [deep]
    doc["space"]["num_layers"] = {"choices": deep}
    with pytest.raises(SpecError) as err:
        spec_from_dict(doc)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("key", ["[", "list[int]", "int", "a\nb", "x" * 500])
def test_unknown_keys_that_look_like_anything_are_named(key):
    message = _error(lambda d: d["space"].update({key: 1}))
    assert message.startswith("study: `space.") and "is not a known key" in message
    assert len(message) < 1000
