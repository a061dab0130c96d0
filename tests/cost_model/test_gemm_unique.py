"""`unique_gemm_time_s`: each distinct GEMM evaluated once gives, element for element, exactly
what `gemm_time_s` gives every GEMM (repeats, rates varying by row and candidate, dead GEMMs),
also when the hash it tells rows apart by collides."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cost_model.gemm_unique as gemm_unique
from cost_model.gemm import HOT_DTYPE, GemmRates, gemm_time_s
from cost_model.hardware import get_hardware
from cost_model.precision import get_precision
from cost_model.gemm_unique import unique_gemm_time_s

H200 = get_hardware("h200")


def _rates(rows: int, candidates: int, seed: int) -> GemmRates:
    """Rates with a leading row axis (as `GemmList.rates` gives them): each row BF16 or FP8,
    and per candidate FP8 or BF16 weights."""
    rng = np.random.default_rng(seed)
    bf16, fp8 = (GemmRates.of(H200, get_precision(n)) for n in ("bf16", "fp8"))
    row_mask = rng.random((rows, 1, 1, 1)) < 0.5  # (row, scenario, candidate, concurrency)
    cand_mask = rng.random((1, 1, candidates, 1)) < 0.5
    fp8_cols = GemmRates.select(cand_mask, fp8, bf16)
    return GemmRates.select(row_mask, bf16, fp8_cols)


def _expected(dims, live, rates) -> np.ndarray:
    out = []
    for r, (m, n, k, g) in enumerate(dims):
        row = GemmRates(**{f: v[r] if isinstance(v, np.ndarray) else v
                           for f, v in rates.__dict__.items()})
        shape = live.shape[1:]
        one = [np.where(live[r], np.broadcast_to(np.asarray(x, float), shape), 1.0)
               for x in (m, n, k, g)]
        out.append(np.where(live[r], gemm_time_s(*one, H200, row, HOT_DTYPE), 0.0))
    return np.stack(out)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 4), cands=st.integers(1, 9))
def test_equals_gemm_time_s_exactly(seed, rows, cands):
    rng = np.random.default_rng(seed)
    conc = 5
    dims = []
    for _ in range(rows):  # small value sets: many repeats, as in a sweep
        m = rng.choice([1.0, 2.0, 4.0, 6.5, 64.0, 0.0], size=(1, cands, conc))
        n = rng.choice([128.0, 512.0, 2816.0], size=(1, cands, 1))
        k = rng.choice([256.0, 4096.0], size=(1, cands, 1))
        g = rng.choice([1.0, 8.0, 32.0], size=(1, cands, conc))
        dims.append((m, n, k, g))
    live = np.stack([np.broadcast_to((m > 0) & (g > 0), (1, cands, conc)) for m, _, _, g in dims])
    rates = _rates(rows, cands, seed)
    got = unique_gemm_time_s(dims, live, H200, rates, HOT_DTYPE)
    assert np.array_equal(got, _expected(dims, live, rates))


def test_hash_collisions_are_told_apart(monkeypatch):
    """Every row hashing alike (a collision of every pair) still gives the exact times: the rows
    are checked against the row they were merged with and ranked exactly."""
    dims = [(np.array([[[1.0, 2.0, 2.0, 8.0]]]), np.array([[[512.0]]]), np.array([[[4096.0]]]),
             np.array([[[1.0, 1.0, 4.0, 1.0]]]))]
    live = np.ones((1, 1, 1, 4), dtype=bool)
    rates = _rates(1, 1, 0)
    exact = unique_gemm_time_s(dims, live, H200, rates, HOT_DTYPE)
    monkeypatch.setattr(gemm_unique, "_hashed", lambda cols: np.zeros(len(cols[0]), np.uint64))
    assert np.array_equal(unique_gemm_time_s(dims, live, H200, rates, HOT_DTYPE), exact)
    assert np.array_equal(exact, _expected(dims, live, rates))


@pytest.mark.parametrize("columns", [
    [np.array([3.0, 1.0, 3.0, 2.0, 1.0])],
    [np.array([1.0, 1.0, 2.0]), np.array([5.0, 6.0, 5.0]), np.array([0, 0, 0])],
])
def test_distinct_rows_first_positions_and_inverse(columns):
    first, inverse = gemm_unique._distinct_rows(columns)
    rows = list(zip(*(c.tolist() for c in columns)))
    assert sorted(first.tolist()) == sorted({rows.index(r) for r in rows})
    assert [rows[first[i]] for i in inverse] == rows
