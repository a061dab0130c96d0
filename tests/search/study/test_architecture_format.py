"""Every shipped study's designs keep one flat dict of field names (issue 27 item 3): a design
dumps to the pre-part field names, reads back from them (and from our JSON record) as the same
model with the same `design_key`, whatever parts `Architecture` is made of."""

import json
import random
from pathlib import Path

import pytest

from cost_model import (
    Architecture, architecture_from_json_dict, architecture_to_json_dict, make_architecture,
)
from search.study.space import Space, build_candidate, complete_params
from search.study.spec import load_spec

REPO = Path(__file__).resolve().parents[3]
STUDIES = sorted((REPO / "studies").glob("*.toml"))
DRAWS = 24  # random parameter sets per study (seeded), besides the first options


def _designs(path: Path) -> list[Architecture]:
    spec = load_spec(path)
    rng = random.Random(path.stem)
    drawn = [{name: rng.choice(list(getattr(spec.space, name).options))
              for name in Space.model_fields} for _ in range(DRAWS)]
    params = [complete_params(spec, {}), *drawn]
    return [c.arch for c in (build_candidate(spec, p) for p in params) if c.arch is not None]


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_every_studys_designs_round_trip_through_the_flat_dict(path):
    designs = _designs(path)
    assert designs, "no valid design drawn"
    for arch in designs:
        flat = arch.model_dump()
        assert not {"attention", "ffn", "mixer"} & set(flat)
        again = make_architecture(**flat)
        assert again == arch and again.model_dump() == flat
        assert again.design_key == arch.design_key
        record = json.loads(json.dumps(architecture_to_json_dict(arch)))
        assert architecture_from_json_dict(record) == arch
