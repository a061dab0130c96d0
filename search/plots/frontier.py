"""Frontier plots: throughput (tokens/s/GPU) against interactivity (tokens/s/user, log x) with the
interactivity window shaded, for a study's Pareto set (one staircase per architecture) or for one
model (`archscout evaluate --plot`). Also what every plot kind shares: the headless backend
(matplotlib's Agg, selected before pyplot is imported), the image format taken from the file's
suffix, and atomic writes. The other kinds (breakdown, roofline, history) are in `plot_kinds`."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen
import numpy as np  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator  # noqa: E402

from cost_model.frontier import pareto_mask  # noqa: E402
from search.atomic import write_atomic  # noqa: E402
from search.plots.errors import PlotError  # noqa: E402
from search.plots.labels import Label, place_labels  # noqa: E402
from search.study.spec import StudySpec  # noqa: E402

DEFAULT_TOP = 8
FIGURE_SIZE_IN = (10.0, 6.0)
DPI = 120
WINDOW_COLOR, WINDOW_ALPHA = "tab:gray", 0.12
GRID_ALPHA = 0.3
TITLE_FONT_SIZE = 10
OUTSIDE_COLOR = "tab:gray"  # operating points beyond the memory limit


# ---- shared by every kind -----------------------------------------------------------------------


def image_format(path: Path, option: str = "-o") -> str:
    """The format named by the file's suffix (png when there is none), checked before drawing."""
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    known = FigureCanvasAgg.get_supported_filetypes()
    if fmt not in known:
        raise PlotError(f"`{option}` ({path}): image format {fmt!r} is not supported; use one of "
                          f"{', '.join(sorted(known))}")
    return fmt


def write_figure(draw: Callable[[], Figure], path: Path, option: str = "-o") -> Path:
    """Check the format, draw, write atomically (nothing is left on any error), close."""
    fmt = image_format(path, option)
    fig = draw()
    try:
        return write_atomic(Path(path), lambda tmp: fig.savefig(tmp, format=fmt), option)
    finally:
        plt.close(fig)


def thousands(ax_axis) -> None:
    ax_axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))


def log_ticks_125(ax_axis) -> None:
    """Log-axis ticks at 1, 2 and 5 per decade, written as plain numbers (20, 50, 1,000)."""
    ax_axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax_axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))


# ---- frontier axes ------------------------------------------------------------------------------


def shade_window(ax, x_lo: float, x_hi: float) -> None:
    ax.axvspan(x_lo, x_hi, color=WINDOW_COLOR, alpha=WINDOW_ALPHA,
               label=f"window [{x_lo:g}, {x_hi:g}] tokens/s/user")


def decorate_frontier(ax, title: str, log_x: bool = True) -> None:
    ax.set_xscale("log" if log_x else "linear")
    if log_x:
        log_ticks_125(ax.xaxis)
    ax.set_xlabel("interactivity (tokens/s/user)")
    ax.set_ylabel("throughput (output tokens/s/GPU)")
    ax.set_ylim(bottom=0)
    thousands(ax.yaxis)
    ax.grid(True, which="both", alpha=GRID_ALPHA)
    ax.set_title(title, fontsize=TITLE_FONT_SIZE)
    ax.legend(fontsize=7, loc="lower left", framealpha=0.9)


def draw_staircase(ax, x, y, label: str, **style):
    """The envelope: a point dominates everything left of and below it, so it holds y_i on
    (x_{i-1}, x_i]; `x` ascending."""
    (line,) = ax.step(x, y, where="pre", linewidth=1.6, label=label, **style)
    ax.plot(x, y, "o", markersize=3, color=line.get_color())
    return line


# ---- a study's Pareto set -----------------------------------------------------------------------


def _staircase(item: dict) -> tuple[list[float], list[float]]:
    """Frontier points sorted by interactivity (throughput then falls), without empty points."""
    points = sorted((p["tokens_per_s_per_user"], p["tokens_per_s_per_gpu"])
                    for p in item["frontier"]
                    if p["tokens_per_s_per_user"] and p["tokens_per_s_per_gpu"])
    return [x for x, _ in points], [y for _, y in points]


def _label(item: dict) -> str:
    """'#1 H…-L… (area 15,830; tp1 ep16 dp16 nvfp4)', or '…; 3 deployments)' when the frontier
    envelopes several (each point names its own in `pareto --json`)."""
    d = item["deployment"]
    deployments = {p["deployment"] for p in item["frontier"]}
    how = (f"{len(deployments)} deployments" if len(deployments) > 1 else
           f"tp{d['tp']}" + (f" ep{d['ep']} dp{d['dp']}" if d["ep"] > 1 or d["dp"] > 1 else "")
           + f" {d['precision']}")
    name, area = item["architecture"]["name"], item["frontier_area"]
    return f"#{item['rank']} {name} (area {area:,.0f}; {how})"


def frontier_figure(spec: StudySpec, doc: dict, top: int = DEFAULT_TOP):
    """The figure of the top `top` items (by frontier area) of a `pareto_document`."""
    items = sorted(doc["pareto"], key=lambda item: item["rank"])[:top]
    fig, ax = plt.subplots(figsize=FIGURE_SIZE_IN, dpi=DPI)
    for item in items:
        draw_staircase(ax, *_staircase(item), label=_label(item))
    w = spec.workload
    shade_window(ax, w.interactivity_min, w.interactivity_max)
    decorate_frontier(ax, f"{spec.name}: throughput (tokens/s/GPU) vs interactivity "
                      f"(tokens/s/user) on {spec.hardware.gpu}, ISL {w.isl_tokens} / OSL "
                      f"{w.osl_tokens}\ntop {len(items)} of {len(doc['pareto'])} Pareto "
                      f"architectures by frontier area (tokens/s/GPU × decades of tokens/s/user "
                      f"in the window)")
    fig.tight_layout()
    return fig


def write_frontier_plot(spec: StudySpec, doc: dict, path: Path, top: int = DEFAULT_TOP) -> Path:
    """Render and write the plot atomically (the format follows the file's suffix)."""
    return write_figure(lambda: frontier_figure(spec, doc, top), path)


# ---- one model (`archscout evaluate --plot`) ----------------------------------------------------


def _model_title(doc: dict, log_x: bool) -> str:
    d, w = doc["deployment"], doc["workload"]
    scale = "decades of " if log_x else ""
    area = (f"; frontier area {doc['frontier_area']:,.0f} tokens/s/GPU × {scale}tokens/s/user"
            if "frontier_area" in doc else "")
    return (f"{doc['model']}: throughput (tokens/s/GPU) vs interactivity (tokens/s/user)\n"
            f"{d['gpus']}× {doc['hardware']}, tp{d['tp']} ep{d['ep']} pp{d['pp']} dp{d['dp']}, "
            f"{d['precision']}, kv {d['kv_precision']}; ISL {w['isl']} / OSL {w['osl']}{area}")


def _mark_points(ax, points: list[dict], style: str, color, label: str | None,
                 **kw) -> list[Label]:
    """Operating points; returns their concurrency names, placed once the layout is final."""
    xy = [(p["tokens_per_s_per_user"], p["tokens_per_s_per_gpu"]) for p in points]
    if label is not None:
        ax.plot(*zip(*xy), style, color=color, label=label, **kw)
    return [Label(f"c={p['concurrency']:,}", at, color) for p, at in zip(points, xy)]


def model_frontier_figure(doc: dict, window: tuple[float, float], log_x: bool = True):
    """The operating points of an `evaluate` document, its frontier staircase and the window;
    dominated points as crosses, points beyond the memory limit hollow; each point's
    concurrency beside it where it overlaps nothing (`search.plots.labels`)."""
    pts = sorted(doc["points"], key=lambda p: p["tokens_per_s_per_user"])
    fits = [p for p in pts if p["fits_memory"]]
    x = np.array([p["tokens_per_s_per_user"] for p in fits])
    y = np.array([p["tokens_per_s_per_gpu"] for p in fits])
    on_front = pareto_mask(x, y)[0] if fits else np.zeros(0, bool)
    fig, ax = plt.subplots(figsize=FIGURE_SIZE_IN, dpi=DPI)
    line = draw_staircase(ax, x[on_front], y[on_front], label=f"frontier of {doc['model']}")
    labels = _mark_points(ax, [p for p, f in zip(fits, on_front) if f], "o", line.get_color(),
                          None)
    dominated = [p for p, f in zip(fits, on_front) if not f]
    if dominated:
        labels += _mark_points(ax, dominated, "x", OUTSIDE_COLOR, "dominated operating point")
    outside = [p for p in pts if not p["fits_memory"]]
    if outside:
        labels += _mark_points(ax, outside, "o", OUTSIDE_COLOR, "beyond the memory limit",
                               mfc="none")
    shade_window(ax, *window)
    decorate_frontier(ax, _model_title(doc, log_x), log_x)
    fig.tight_layout()
    place_labels(fig, ax, labels, [*ax.lines, ax.get_legend()])
    return fig


def write_model_frontier_plot(doc: dict, path: Path, window: tuple[float, float],
                              log_x: bool = True, option: str = "--plot") -> Path:
    return write_figure(lambda: model_frontier_figure(doc, window, log_x), path, option)
