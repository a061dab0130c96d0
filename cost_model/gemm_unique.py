"""`gemm_time_s` of many GEMMs, each distinct GEMM computed once.

A step's GEMMs, stacked over its table rows, scenarios, candidates and concurrencies, repeat a
lot: the deployments a study sweeps for one architecture share N and K wherever they shard it
alike, and the tokens per GPU (M) of the concurrency sweep 1, 2, 4, … recur across DP degrees and
scenarios (the 1,078,080 live GEMMs of 128 architectures of `moe-400b-gb300-nvl72` under their
swept deployments hold 225,002 distinct (M, N, K, groups, rates), ~5× fewer). The time of a GEMM
is a function of those alone, so the distinct ones are evaluated and every GEMM takes its
distinct twin's time: element for element the same operations as one `gemm_time_s` call (tests
compare both exactly). The dedupe follows the table's structure rather than hashing every GEMM:
(N, K, rates) vary by row and candidate only, and are ranked on that small shape; M and groups
are arrays the rows share, each ranked once (sorted distinct values, then a search) and each
pair of them coded once; a GEMM is then one integer (shape id × M-groups ids + its M-groups id)
made distinct with a table of flags, no sort (tests/benchmarks/bench_gemm_unique.py on that
study: 2.7-2.9 → 1.6-1.8 ms CPU per architecture, of which the GEMMs themselves take ~0.8).
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from cost_model.gemm import GemmRates, gemm_time_s
from cost_model.hardware import HardwareSpec

# a table of flags up to this many times longer than the codes beats sorting them (the step
# tables of `moe-400b-gb300-nvl72` span 7-20 times their length: ~86 ms a call at 32 against
# ~98 at 8 and ~110 at 4, tests/benchmarks/bench_gemm_unique.py); never over _DENSE_MAX_CODES
# (16 MiB of flags and 64 MiB of ranks)
_DENSE_PER_CODE = 32
_DENSE_MAX_CODES = 1 << 24


def _row_rates(rates: GemmRates, row: int, ndim: int) -> dict[str, np.ndarray]:
    """The array-valued rate fields of table row `row` (fields with a leading row axis, as
    `GemmList.rates` gives them, are indexed; others apply to every row)."""
    out = {}
    for f in fields(GemmRates):
        value = getattr(rates, f.name)
        if isinstance(value, np.ndarray):
            out[f.name] = value[row if value.shape[0] > 1 else 0] if value.ndim > ndim else value
    return out


def _shape_ids(dims: list[tuple], rates: GemmRates, ndim: int) -> tuple[list, dict]:
    """(per table row, an id per distinct (N, K, rates) on the small shape these broadcast
    from; each id's N, K and array-valued rate fields). Unlike M and the groups (MoE experts
    touched), these vary by candidate only (a few hundred per row), so they are ranked
    exactly."""
    tables, shapes = [], []
    for row, (_, n, k, _) in enumerate(dims):
        parts = {"n": n, "k": k, **_row_rates(rates, row, ndim)}
        own = np.broadcast_shapes(*(np.shape(v) for v in parts.values()))
        tables.append(np.stack([np.broadcast_to(np.asarray(v, dtype=np.float64), own).ravel()
                                for v in parts.values()], axis=1))
        shapes.append(own)
    table = np.concatenate(tables)
    first, ids = _distinct_rows(list(table.T))
    bounds = np.cumsum([0] + [len(t) for t in tables])
    per_row = [ids[a:b].reshape(own) for a, b, own in zip(bounds, bounds[1:], shapes)]
    return per_row, {name: table[first, j] for j, name in enumerate(parts)}


def unique_gemm_time_s(dims: list[tuple], live: np.ndarray, hw: HardwareSpec,
                       rates: GemmRates, dtype: type = np.float64) -> np.ndarray:
    """`gemm_time_s` of each table row's (m, n, k, groups) in `dims` (each broadcasting to
    `live.shape[1:]`; `rates` with a leading row axis) where `live` (rows, *shape), 0 elsewhere:
    each distinct GEMM evaluated once."""
    ids, by_id = _shape_ids(dims, rates, live.ndim - 1)
    mg_ids, m_of, g_of = _m_groups_ids(dims)
    dead = len(by_id["n"]) * len(m_of)  # one code past every live GEMM's
    key = np.empty(live.shape, dtype=np.int64)
    for row, mg in enumerate(mg_ids):
        key[row] = ids[row] * len(m_of) + mg
    key[~live] = dead
    codes, inverse = _distinct_codes(key.ravel(), dead)
    shape_id, mg = np.divmod(codes[codes < dead], len(m_of))
    # cast before gathering (what `gemm_time_s` casts to anyway): a pass less over every field
    gathered = {name: values.astype(dtype)[shape_id] for name, values in by_id.items()}
    n, k = gathered.pop("n"), gathered.pop("k")
    own = GemmRates(**{f.name: gathered.get(f.name, getattr(rates, f.name))
                       for f in fields(GemmRates)})
    times = gemm_time_s(m_of.astype(dtype)[mg], n, k, g_of.astype(dtype)[mg], hw, own, dtype)
    return np.append(times, times.dtype.type(0))[inverse].reshape(live.shape)


def _m_groups_ids(dims: list[tuple]) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """(per table row, an id per distinct (M, groups) on their own broadcast shape; each id's M
    and groups). Rows share their M (tokens per GPU) and groups arrays, so each distinct array
    is ranked once and each distinct pair of them coded once."""
    m_which, m_ranks, m_values = _value_ranks([m for m, _, _, _ in dims])
    g_which, g_ranks, g_values = _value_ranks([groups for _, _, _, groups in dims])
    pairs = list(dict.fromkeys(zip(m_which, g_which)))
    codes = [m_ranks[m] * len(g_values) + g_ranks[g] for m, g in pairs]
    distinct, inverse = _distinct_codes(np.concatenate([c.ravel() for c in codes]),
                                        len(m_values) * len(g_values) - 1)
    bounds = np.cumsum([0] + [c.size for c in codes])
    per_pair = {p: inverse[a:b].reshape(c.shape)
                for p, a, b, c in zip(pairs, bounds, bounds[1:], codes)}
    m_id, g_id = np.divmod(distinct, len(g_values))
    return [per_pair[p] for p in zip(m_which, g_which)], m_values[m_id], g_values[g_id]


def _value_ranks(arrays: list) -> tuple[list[int], list[np.ndarray], np.ndarray]:
    """(each of `arrays`' index among the distinct (unequal) ones; each distinct array as the
    rank of its values among all their distinct values, on its own shape; those values)."""
    distinct: list[np.ndarray] = []
    which = []
    for array in arrays:
        array = np.asarray(array, dtype=np.float64)
        same = (i for i, d in enumerate(distinct)
                if d is array or (d.shape == array.shape and np.array_equal(d, array)))
        index = next(same, None)
        if index is None:
            index = len(distinct)
            distinct.append(array)
        which.append(index)
    values = np.unique(np.concatenate([d.ravel() for d in distinct]))
    # a search of the sorted values ranks them ~3x faster than `np.unique`'s inverse (argsort)
    return which, [np.searchsorted(values, d) for d in distinct], values


def _distinct_codes(key: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct values of `key`, integers in 0…`top`, ascending; each element's index
    among them). A table of `top` + 1 flags when that is not much longer than `key` (no sort),
    else one integer sort of the codes packed with their positions (~6x faster than an
    argsort), else `np.unique`."""
    if top < min(_DENSE_PER_CODE * len(key), _DENSE_MAX_CODES):
        seen = np.zeros(top + 1, dtype=bool)
        seen[key] = True
        codes = np.flatnonzero(seen)
        rank = np.empty(top + 1, dtype=np.int32)  # half the pages of int64 to fault in
        rank[codes] = np.arange(len(codes), dtype=np.int32)
        return codes, rank[key]
    bits = max(int(len(key)).bit_length(), 1)
    if int(top).bit_length() + bits > 63:
        values, inverse = np.unique(key, return_inverse=True)
        return values, inverse.ravel()
    packed = np.sort((key << bits) | np.arange(len(key), dtype=np.int64))
    sorted_key = packed >> bits
    new = np.empty(len(key), dtype=bool)
    new[:1] = True
    np.not_equal(sorted_key[1:], sorted_key[:-1], out=new[1:])
    inverse = np.empty(len(key), dtype=np.int64)
    inverse[packed & ((1 << bits) - 1)] = np.cumsum(new) - 1
    return sorted_key[new], inverse


# splitmix64's finalizer multipliers (Steele, Lea & Flood, "Fast splittable pseudorandom number
# generators", OOPSLA 2014; Vigna's constants): a good mix, and collisions are checked anyway
_MIX = (np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def _distinct_rows(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(the first position of each distinct row of `columns`, each row's distinct row). Rows
    are told apart by a 64-bit hash of their bits; the hash's high bits and the row's position
    are packed into one integer and sorted (a plain integer sort: ~6x faster than an argsort),
    then every row is checked against the row it was merged with. Rows merged by a collision
    (~1 batch in 100 at 400,000 distinct GEMMs) are told apart by the whole hash, and if that
    collides too (never seen), ranked exactly."""
    key = _hashed(columns)
    size = len(key)
    bits = max(int(size).bit_length(), 1)
    low = np.uint64((1 << bits) - 1)
    packed = np.sort((key & ~low) | np.arange(size, dtype=np.uint64))
    position = (packed & low).astype(np.int64)
    new = np.empty(size, dtype=bool)
    new[:1] = True
    np.not_equal(packed[1:] & ~low, packed[:-1] & ~low, out=new[1:])
    inverse = np.empty(size, dtype=np.int64)
    inverse[position] = np.cumsum(new) - 1
    first = position[new]
    if _same(columns, first, inverse):
        return first, inverse
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if _same(columns, first, inverse):
        return first, inverse
    _, first, inverse = np.unique(np.stack(columns, axis=1), axis=0, return_index=True,
                                  return_inverse=True)
    return first, inverse.ravel()


def _hashed(columns: list[np.ndarray]) -> np.ndarray:
    """Each row's bits folded into 64 (splitmix64's finalizer after each column, so that every
    bit of the hash depends on every bit of the row)."""
    key = np.zeros(len(columns[0]), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in columns:
            key ^= np.ascontiguousarray(column, dtype=np.float64).view(np.uint64)
            key ^= key >> np.uint64(30)
            key *= _MIX[0]
            key ^= key >> np.uint64(27)
            key *= _MIX[1]
            key ^= key >> np.uint64(31)
    return key


def _same(columns: list[np.ndarray], first: np.ndarray, inverse: np.ndarray) -> bool:
    """Whether every row equals the distinct row it was merged with."""
    return all(np.array_equal(c[first][inverse], c) for c in columns)
