"""`evaluate_batch`: a repeated design is copied from the memo, equal to a fresh score and
independent of the stored outcome."""

import optuna

import search.study.evaluation as evaluation
from search.study.space import build_candidate, suggest_params
from search.study.spec import load_spec
from tests.search.study.test_search import REPO


def _candidates(spec, count: int, seed: int = 0):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed))
    return [build_candidate(spec, suggest_params(study.ask(), spec.space)) for _ in range(count)]


def test_repeated_designs_are_copied_not_rescored(monkeypatch):
    spec = load_spec(REPO / "studies" / "quickstart.toml")
    cands = _candidates(spec, 16)
    evaluation._memo.clear()
    first = evaluation.evaluate_batch(spec, cands)
    scored = []
    fresh_score = evaluation.score_batch
    monkeypatch.setattr(evaluation, "score_batch",
                        lambda s, c: scored.append(len([x for x in c if x.valid]))
                        or fresh_score(s, c))
    again = evaluation.evaluate_batch(spec, cands + cands[:4])
    assert sum(scored) == 0  # every valid design came from the memo
    fresh = fresh_score(spec, cands)
    for got, want in zip(again, fresh + fresh[:4]):
        assert (got.values, got.attrs) == (want.values, want.attrs)
        assert {n: v.value for n, v in got.constraints.items()} == \
            {n: v.value for n, v in want.constraints.items()}
    again[0].attrs["frontier_area"] = -1.0  # a caller's change stays its own
    assert evaluation.evaluate_batch(spec, cands[:1])[0].attrs == first[0].attrs


def test_another_study_is_scored_anew():
    spec = load_spec(REPO / "studies" / "quickstart.toml")
    cands = [c for c in _candidates(spec, 8) if c.valid]
    evaluation._memo.clear()
    before = evaluation.evaluate_batch(spec, cands)
    longer = spec.model_copy(update={"workload": spec.workload.model_copy(
        update={"osl_tokens": spec.workload.osl_tokens * 4})})
    after = evaluation.evaluate_batch(longer, cands)
    assert [o.values for o in after] != [o.values for o in before]


def test_a_batch_larger_than_the_memo_keeps_its_hits(monkeypatch):
    """Designs scored earlier and new ones in one batch, more than the memo holds: every outcome
    is returned, then the oldest entries are dropped."""
    spec = load_spec(REPO / "studies" / "quickstart.toml")
    cands = [c for c in _candidates(spec, 12, seed=3) if c.valid]
    evaluation._memo.clear()
    monkeypatch.setattr(evaluation, "MEMO_CANDIDATES", 2)
    evaluation.evaluate_batch(spec, cands[:2])
    outcomes = evaluation.evaluate_batch(spec, cands)
    assert [o.values for o in outcomes] == [o.values for o in evaluation.score_batch(spec, cands)]
    assert len(evaluation._memo) == 2
