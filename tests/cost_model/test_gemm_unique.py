"""`unique_gemm_time_s`: each distinct GEMM evaluated once gives, element for element, exactly
what `gemm_time_s` gives every GEMM (repeats, rows sharing their M and groups arrays, rates
varying by row and candidate, dead GEMMs, every GPU and format of the catalog), also when the hash
it tells shapes apart by collides, and whichever way its integer codes are made distinct."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cost_model.gemm_unique as gemm_unique
from cost_model.errors import ConfigError
from cost_model.gemm import HOT_DTYPE, GemmRates, gemm_time_s
from cost_model.hardware import catalog_names, get_hardware
from cost_model.precision import PRECISIONS, get_precision
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


def _expected(dims, live, rates, hw=H200, dtype=HOT_DTYPE) -> np.ndarray:
    """Plain per-row evaluation: every GEMM of each row, dead ones at 1 (then 0 s)."""
    out = []
    for r, (m, n, k, g) in enumerate(dims):
        row = GemmRates(**{f: v[r] if isinstance(v, np.ndarray) else v
                           for f, v in rates.__dict__.items()})
        shape = live.shape[1:]
        one = [np.where(live[r], np.broadcast_to(np.asarray(x, float), shape), 1.0)
               for x in (m, n, k, g)]
        out.append(np.where(live[r], gemm_time_s(*one, hw, row, dtype), 0.0))
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


def _formats(hw) -> list[GemmRates]:
    """The rates of every format `hw` runs."""
    out = []
    for name in PRECISIONS:
        try:
            out.append(GemmRates.of(hw, get_precision(name)))
        except ConfigError:  # a format this GPU has no tensor-core rate for
            continue
    return out


def _catalog_table(rng, rows, scen, cands, conc, formats):
    """A random step table as `GemmList.times_s` builds it: M (scenario, candidate,
    concurrency) shared by rows as one object, as an equal copy or their own; groups 1 or an
    array of the same shape; N, K per candidate; rates per row and candidate from `formats`;
    values from small pools (repeats), dead GEMMs at 0 or -0.0."""
    shape = (scen, cands, conc)
    pool_m = [1.0, 2.0, 3.0, 6.5, 64.0, 100.25, 4096.0, 0.0, -0.0]
    shared_m = rng.choice(pool_m, size=shape)
    dims = []
    for _ in range(rows):
        kind = rng.integers(3)
        m = shared_m if kind == 0 else shared_m.copy() if kind == 1 else rng.choice(pool_m, shape)
        g = 1.0 if rng.random() < 0.5 else rng.choice([0.0, 1.0, 2.5, 8.0, 32.0], size=shape)
        n = rng.choice([128.0, 512.0, 2816.0, 7168.0], size=(1, cands, 1))
        k = rng.choice([256.0, 4096.0, 7168.0], size=(1, cands, 1))
        dims.append((m, n, k, g))
    live = np.stack([np.broadcast_to((m > 0) & (np.asarray(g) > 0), shape)
                     for m, _, _, g in dims])
    pick = rng.integers(len(formats), size=(rows, 1, cands, 1))
    rates = formats[0]
    for i, other in enumerate(formats[1:], 1):
        rates = GemmRates.select(pick == i, other, rates)
    return dims, live, rates


@pytest.mark.parametrize("gpu", catalog_names())
@pytest.mark.parametrize("dtype", [np.float64, HOT_DTYPE], ids=["float64", "hot"])
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 6), scen=st.integers(1, 3),
       cands=st.integers(1, 12), conc=st.integers(1, 6))
def test_catalog_tables_equal_per_row_evaluation(gpu, dtype, seed, rows, scen, cands, conc):
    hw = get_hardware(gpu)
    rng = np.random.default_rng(seed)
    dims, live, rates = _catalog_table(rng, rows, scen, cands, conc, _formats(hw))
    got = unique_gemm_time_s(dims, live, hw, rates, dtype)
    expected = _expected(dims, live, rates, hw, dtype)
    assert got.dtype == expected.dtype
    assert np.array_equal(got, expected)


def test_no_live_gemm_gives_zeros():
    dims = [(np.zeros((1, 2, 3)), np.array([[[512.0], [128.0]]]), np.array([[[4096.0]] * 2]),
             1.0)]
    live = np.zeros((1, 1, 2, 3), dtype=bool)
    got = unique_gemm_time_s(dims, live, H200, _rates(1, 2, 0), HOT_DTYPE)
    assert got.shape == live.shape and not got.any()


@pytest.mark.parametrize("dense_per_code", [0, 32], ids=["sorted", "flags"])
@pytest.mark.parametrize("top", [5, 4000, 2**60], ids=["narrow", "wide", "huge"])
def test_distinct_codes_match_np_unique(monkeypatch, dense_per_code, top):
    """Each way of making codes distinct (a table of flags, a packed sort, `np.unique` when
    codes and positions overflow 63 bits) gives `np.unique`'s values and inverse."""
    monkeypatch.setattr(gemm_unique, "_DENSE_PER_CODE", dense_per_code)
    rng = np.random.default_rng(top)
    key = rng.choice(rng.integers(0, top + 1, size=7), size=200)
    key[0] = top
    codes, inverse = gemm_unique._distinct_codes(key, top)
    values, expected_inverse = np.unique(key, return_inverse=True)
    assert np.array_equal(codes, values)
    assert np.array_equal(inverse, expected_inverse)


def test_value_ranks_rank_equal_arrays_once():
    a = np.array([[2.0, 0.5], [2.0, 7.0]])
    which, ranks, values = gemm_unique._value_ranks([a, 3.0, a.copy(), a, np.array([7.0, 3.0])])
    assert which == [0, 1, 0, 0, 2]
    assert values.tolist() == [0.5, 2.0, 3.0, 7.0]
    assert ranks[0].tolist() == [[1, 0], [1, 3]] and ranks[1] == 2
    assert ranks[2].tolist() == [3, 2]
