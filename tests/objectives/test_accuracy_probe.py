"""Adversarial test of the accuracy proxy (issue 11): the degenerate archetypes never rank better
than a standard shape of the same compute and no more parameters; each shipped study's loss-only
optimum (searched inside its space and budget) is not degenerate; and the hard flags fire where
the data end, not on every candidate of every shipped study."""

import numpy as np
import pytest

from cost_model import ConfigError
from objectives.accuracy import predict_loss
from search.study.space import build_architecture
from tests.objectives.probe import (
    ARCHETYPES,
    STUDIES,
    _options,
    degeneracies,
    load_studies,
    loss_only_optimum,
    ranked,
)
from objectives import architecture_from_shape

SPECS = load_studies()
STUDY_IDS = [path.stem for path in STUDIES]


@pytest.mark.parametrize("archetype", ARCHETYPES, ids=[a.name for a in ARCHETYPES])
def test_degenerate_archetype_never_ranks_better(archetype):
    # the probe is degenerate by the list
    assert degeneracies(architecture_from_shape(archetype.degenerate))
    assert not degeneracies(architecture_from_shape(archetype.standard))
    assert ranked(archetype.degenerate, archetype.tokens) > ranked(
        archetype.standard, archetype.tokens
    )


@pytest.mark.parametrize("archetype", ARCHETYPES, ids=[a.name for a in ARCHETYPES])
def test_degenerate_archetype_raises_a_hard_flag(archetype):
    assert predict_loss(architecture_from_shape(archetype.degenerate), archetype.tokens).hard_flags
    standard = architecture_from_shape(archetype.standard)
    assert not predict_loss(standard, archetype.tokens).hard_flags


@pytest.mark.parametrize("spec", SPECS, ids=STUDY_IDS)
def test_loss_only_optimum_is_not_degenerate(spec):
    _, best, arch = loss_only_optimum(spec, samples=600, rounds=2)
    assert np.isfinite(best), "no candidate inside the study's budget"
    assert degeneracies(arch) == [], arch.name


@pytest.mark.parametrize("spec", SPECS, ids=STUDY_IDS)
def test_hard_flags_do_not_fire_on_every_candidate(spec):
    """Before issue 11 a D > 5e11 hard flag fired on every candidate of every shipped study."""
    rng, options = np.random.default_rng(1), _options(spec)
    context = spec.workload.isl_tokens + spec.workload.osl_tokens
    flagged, tokens_flagged, scored = 0, 0, 0
    while scored < 150:
        params = {name: values[rng.integers(len(values))] for name, values in options.items()}
        try:
            arch = build_architecture(params, context)
        except ConfigError:  # invalid shapes are not models
            continue
        proxy, scored = (
            predict_loss(arch, spec.budget.training_tokens, spec.budget.training_precision),
            scored + 1,
        )
        flagged += bool(proxy.hard_flags)
        tokens_flagged += any("tokens per param" in flag for flag in proxy.hard_flags)
    assert flagged < scored and tokens_flagged == 0
