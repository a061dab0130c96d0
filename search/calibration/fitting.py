"""What every calibration fit shares: robust least squares on log time, the data it refuses, the
error summary and the coefficient bookkeeping.

A fit refuses too little data: fewer rows (and fewer distinct measured points) than it has free
coefficients plus MIN_EXTRA_ROWS (the residual degrees of freedom its error is measured on), or
rows whose times are all equal (nothing to fit a shape to). The error names the count.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from cost_model.efficiency import Efficiency
from search.calibration.errors import CalibrationError

FIT_SAMPLE_POINTS = 12_000  # rows a fit uses (seeded sample); errors are reported on all rows
LOSS_SCALE = 0.1  # soft-L1 on log time: residuals beyond ~10% count linearly, not squared
MIN_EXTRA_ROWS = 20  # a fit needs this many rows beyond its coefficients (module docstring)


def check_fit_rows(what: str, times_s: np.ndarray, keys: Sequence[np.ndarray],
                   coefficients: int) -> None:
    """Refuse a fit of `coefficients` free coefficients on these rows (module docstring):
    `keys` are the columns that make a measured point distinct (its shape)."""
    needed = coefficients + MIN_EXTRA_ROWS
    rows = len(times_s)
    rule = f"a fit of {coefficients} coefficients needs at least {needed} (coefficients + " \
        f"{MIN_EXTRA_ROWS})"
    if rows < needed:
        raise CalibrationError(f"{what} has {rows} rows; {rule}")
    distinct = len({tuple(row) for row in np.column_stack(keys).tolist()}) if keys else rows
    if distinct < needed:
        raise CalibrationError(f"{what} has {rows} rows but {distinct} distinct measured points; "
                               f"{rule}")
    if np.ptp(times_s) <= 0:
        raise CalibrationError(f"{what} has {rows} rows all measured at {times_s[0]:.6g} s; a fit "
                               "needs times that vary")


def fastest_per_key(keys: Sequence[np.ndarray], time_s: np.ndarray) -> np.ndarray:
    """Indices of one row per distinct key (a row of the columns `keys`): the fastest measured
    of it, the kernel an engine dispatches to where its table times several on one shape."""
    order = np.lexsort((time_s, *reversed(list(keys))))
    changed = np.zeros(len(order), bool)
    changed[:1] = True
    for column in keys:
        ordered = np.asarray(column)[order]
        changed[1:] |= ordered[1:] != ordered[:-1]
    return order[changed]


def fit_log_time(tables: dict, predicted: Callable[[Any, dict[str, float]], np.ndarray],
                 spec: dict[str, tuple[float, float, float]], sample_points: int | None = None,
                 seed: int = 0) -> dict[str, float]:
    """Coefficients (the names of `spec`: (low, high, start)) minimizing the soft-L1 misfit of
    log time over every table at once; with `sample_points`, each table is subsampled to the
    same number of rows (at most that many) so the tables weigh the same."""
    from scipy.optimize import least_squares  # only calibration needs scipy

    names = list(spec)
    bounds = np.array([spec[n] for n in names])
    samples = tables
    if sample_points is not None:
        rng = np.random.default_rng(seed)
        size = min(sample_points, *(len(d) for d in tables.values()))
        samples = {key: d.subset(rng.permutation(len(d))[:size]) for key, d in tables.items()}

    def residuals(x: np.ndarray) -> np.ndarray:
        trial = dict(zip(names, x.tolist()))
        return np.concatenate([np.log(predicted(d, trial)) - np.log(d.time_s)
                               for d in samples.values()])

    start = np.clip(bounds[:, 2], bounds[:, 0], bounds[:, 1])
    fit = least_squares(residuals, start, bounds=(bounds[:, 0], bounds[:, 1]),
                        loss="soft_l1", f_scale=LOSS_SCALE, x_scale="jac")
    return dict(zip(names, fit.x.tolist()))


def fitted_source(source: str, points: dict[str, int],
                  errors: dict[str, tuple[float, float]]) -> str:
    """The `source` of fitted coefficients: the table, and rows and errors per part."""
    parts = [f"{key} {points[key]} rows |error| median {med:.1%}, p90 {p90:.1%}"
             for key, (med, p90) in errors.items()]
    return f"fitted by archscout calibrate to {source} ({'; '.join(parts)})"


def abs_error_quantiles(predicted: np.ndarray, measured: np.ndarray) -> tuple[float, float]:
    """(median, 90th percentile) of |predicted / measured − 1|."""
    error = np.abs(predicted / measured - 1.0)
    return float(np.median(error)), float(np.quantile(error, 0.9))


def replace_coefficients(eff: Efficiency, coefficients: dict[str, float],
                         fields: dict[str, tuple[str, float]]) -> Efficiency:
    """`eff` with `coefficients` (TOML units) set; `fields`: name -> (Efficiency field, TOML
    units per SI unit)."""
    return eff.model_copy(update={field: coefficients[name] / scale
                                  for name, (field, scale) in fields.items()})


def coefficients_in(eff: Efficiency, fields: dict[str, tuple[str, float]]) -> dict[str, float]:
    """`eff`'s values of `fields` in TOML units (the inverse of `replace_coefficients`)."""
    return {name: getattr(eff, field) * scale for name, (field, scale) in fields.items()}
