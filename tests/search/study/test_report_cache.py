"""The Pareto document a search keeps beside its journal (`search.study.report`'s cache):
`pareto` reads it only while it is exactly what the trials give, recomputed from all trials."""

import json
import shutil
from pathlib import Path

import pytest

from search.cli.main import main
from search.cli.study import load_study, open_for_reading
from search.study.record import recorded_spec
from search.study.report import CACHE_NAME, pareto_document, read_cached_document
from search.study.runner import run_study
from search.study.spec import load_spec
from search.study.storage import default_journal_path, open_default

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def study_file(tmp_path) -> Path:
    target = tmp_path / "quickstart.toml"
    text = (REPO / "studies" / "quickstart.toml").read_text()
    target.write_text(text.replace("batch_size = 64", "batch_size = 16"))
    return target


def _recomputed(study_file: Path) -> str:
    """`pareto --json`'s document computed from every stored trial, as JSON text."""
    spec = load_spec(study_file)
    study = load_study(spec, open_for_reading(study_file, spec, None))
    return json.dumps(pareto_document(recorded_spec(study, spec), study))


def _pareto_json(study_file: Path, capsys) -> dict:
    capsys.readouterr()
    assert main(["pareto", str(study_file), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _cached(study_file: Path) -> dict | None:
    spec = load_spec(study_file)
    return read_cached_document(default_journal_path(study_file, spec.name), spec)


def _search(study_file: Path, trials: int, capsys) -> None:
    assert main(["search", str(study_file), "--trials", str(trials), "--no-progress"]) == 0
    capsys.readouterr()


def test_the_cached_document_is_the_recomputed_one_after_a_search_and_a_resume(study_file,
                                                                              capsys):
    _search(study_file, 32, capsys)
    assert json.dumps(_cached(study_file)) == _recomputed(study_file)
    first = _pareto_json(study_file, capsys)
    _search(study_file, 64, capsys)  # a resume: the document of all 64 trials replaces it
    assert json.dumps(_cached(study_file)) == _recomputed(study_file)
    again = _pareto_json(study_file, capsys)
    assert first["trials"] == 32 and again["trials"] == 64
    assert again == json.loads(json.dumps(json.loads(_recomputed(study_file))))


def test_a_run_killed_after_the_cache_makes_pareto_recompute(study_file, capsys):
    """Trials appended after the cache was written (a run killed before its end, or run
    through the API) change the journal: the cache is not used, `pareto` recomputes."""
    _search(study_file, 32, capsys)
    stale = _cached(study_file)
    spec = load_spec(study_file)
    handle = open_default(default_journal_path(study_file, spec.name), shared=False)
    run_study(spec, handle, 48, 0, show_progress=False)  # no final table: as if killed
    handle.close()
    assert _cached(study_file) is None
    doc = _pareto_json(study_file, capsys)
    assert doc["trials"] == 48 != stale["trials"]
    assert json.dumps(doc, sort_keys=True) == json.dumps(json.loads(_recomputed(study_file)),
                                                         sort_keys=True)


def test_an_edited_study_file_or_a_foreign_cache_is_not_used(study_file, capsys, tmp_path):
    _search(study_file, 32, capsys)
    spec = load_spec(study_file)
    journal = default_journal_path(study_file, spec.name)
    cache = journal.with_name(CACHE_NAME)
    text = study_file.read_text()
    study_file.write_text(text.replace("interactivity_max = 2000.0", "interactivity_max = 1000.0"))
    assert _cached(study_file) is None  # another spec: recomputed (with the stored spec's note)
    study_file.write_text(text)
    assert _cached(study_file) is not None
    shutil.copy(cache, tmp_path / "saved")
    cache.write_text("{not json")
    assert _cached(study_file) is None
    cache.write_text(json.dumps({"key": {}, "document": {"pareto": []}}))
    assert _cached(study_file) is None
    assert _pareto_json(study_file, capsys)["trials"] == 32
