"""`gemm_time_s` of many GEMMs, each distinct GEMM computed once.

A step's GEMMs, stacked over its table rows, scenarios, candidates and concurrencies, repeat a
lot: the deployments a study sweeps for one architecture share N and K wherever they shard it
alike, and the tokens per GPU (M) of the concurrency sweep 1, 2, 4, … recur across DP degrees and
scenarios (409,600 GEMMs of 32 architectures of `moe-400b-gb300-nvl72` under their 20 valid
deployments each held 48,683 distinct (M, N, K, groups), ~8× fewer). The time of a GEMM is a
function of its (M, N, K, groups) and its rates alone, so the distinct ones are found
(`np.unique` over those plus a code of the rates) and evaluated, and every GEMM takes its
distinct twin's time: element for element the same operations as one `gemm_time_s` call
(tests compare both exactly).
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from cost_model.gemm import GemmRates, gemm_time_s
from cost_model.hardware import HardwareSpec


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
    shape = live.shape[1:]
    ids, by_id = _shape_ids(dims, rates, len(shape))
    on = live.ravel()
    full = lambda x: np.broadcast_to(np.asarray(x, dtype=np.float64), shape).ravel()  # noqa: E731
    m_all = np.concatenate([full(m) for m, _, _, _ in dims])[on]
    groups_all = np.concatenate([full(groups) for _, _, _, groups in dims])[on]
    id_all = np.concatenate([np.broadcast_to(i, shape).ravel() for i in ids])[on]
    first, inverse = _distinct_rows([m_all, groups_all, id_all])
    shape_id = id_all[first]
    own = GemmRates(**{f.name: by_id[f.name][shape_id] if f.name in by_id
                       else getattr(rates, f.name) for f in fields(GemmRates)})
    times = gemm_time_s(m_all[first], by_id["n"][shape_id], by_id["k"][shape_id],
                        groups_all[first], hw, own, dtype)
    out = np.zeros(live.size, dtype=times.dtype)
    out[on] = times[inverse]
    return out.reshape(live.shape)


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
