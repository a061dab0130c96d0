"""Study files: every shipped one validates; bad ones fail with one line naming the field."""

from pathlib import Path

import pytest

from search.study.spec import load_spec, spec_from_dict
from search.study.errors import SpecError

STUDIES = sorted((Path(__file__).resolve().parents[3] / "studies").glob("*.toml"))


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
