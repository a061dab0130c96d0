"""The reserved sources stay unread (issue 28 item 1): no calibration or comparison row cites one
of them for a result, by arXiv id or title, and the list holds the nine the issue names."""

import pytest

from objectives.accuracy_fit import METRICS, SIGN_METRICS, read_rows, shipped_calibration_set
from objectives.accuracy_sources import RESERVED_SOURCES, reserved_citations
from tests.data_paths import TEST_DATA

ROWS = [*read_rows(shipped_calibration_set(), unverified=True),
        *read_rows(TEST_DATA / "accuracy" / "comparisons.csv", METRICS + SIGN_METRICS,
                   unverified=True)]  # fmt: skip


def test_the_reserved_list_is_the_issues():
    assert set(RESERVED_SOURCES) == {"2405.21060", "2406.06484", "2412.06464", "2406.07522",
                                     "2403.19887", "2002.05202", "2507.20534", "2409.02060",
                                     "2101.03961"}  # fmt: skip


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_no_row_cites_a_reserved_source(row):
    assert row.source_id not in RESERVED_SOURCES
    assert reserved_citations(f"{row.source} {row.source_id}") == []


def test_the_check_catches_a_reserved_citation():
    assert reserved_citations("Muennighoff et al. 2024, OLMoE: Open Mixture-of-Experts Language "
                              "Models") == ["2409.02060"]  # fmt: skip
    assert reserved_citations("arXiv 2405.21060 Table 3") == ["2405.21060"]
    # a mixer's name is a definition, not a result: "Gated DeltaNet" stands in for a linear mixer
    assert reserved_citations("Gated DeltaNet stands for the gated linear-attention family") == []
