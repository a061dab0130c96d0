"""Study files: every shipped one validates; bad ones fail with one line naming the field."""

from pathlib import Path

import pytest

from search.spec import SpecError, load_spec, spec_from_dict

STUDIES = sorted((Path(__file__).resolve().parents[2] / "studies").glob("*.toml"))


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


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(bad)
