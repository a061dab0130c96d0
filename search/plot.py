"""The frontier plot of a study's Pareto set: throughput (tokens/s/GPU) against interactivity
(tokens/s/user, log x), one staircase per architecture, the study's interactivity window shaded.
Headless: matplotlib's Agg backend, selected before pyplot is imported."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from search.export import ExportError, write_atomic  # noqa: E402
from search.spec import StudySpec  # noqa: E402

DEFAULT_TOP = 8
FIGURE_SIZE_IN = (10.0, 6.0)
DPI = 120
WINDOW_COLOR, WINDOW_ALPHA = "tab:gray", 0.12


def _staircase(item: dict) -> tuple[list[float], list[float]]:
    """Frontier points sorted by interactivity (throughput then falls), without empty points."""
    points = sorted((p["tokens_per_s_per_user"], p["tokens_per_s_per_gpu"])
                    for p in item["frontier"]
                    if p["tokens_per_s_per_user"] and p["tokens_per_s_per_gpu"])
    return [x for x, _ in points], [y for _, y in points]


def _label(item: dict) -> str:
    d = item["deployment"]
    return (f"#{item['rank']} {item['architecture']['name']} "
            f"(area {item['frontier_area']:,.0f}; tp{d['tp']} {d['precision']})")


def _draw_item(ax, item: dict) -> None:
    x, y = _staircase(item)
    # a point dominates everything left of and below it: the envelope holds y_i on (x_{i-1}, x_i]
    (line,) = ax.step(x, y, where="pre", linewidth=1.6, label=_label(item))
    ax.plot(x, y, "o", markersize=3, color=line.get_color())


def _decorate(ax, spec: StudySpec, shown: int, total: int) -> None:
    w = spec.workload
    ax.axvspan(w.interactivity_min, w.interactivity_max, color=WINDOW_COLOR, alpha=WINDOW_ALPHA,
               label=f"window [{w.interactivity_min:g}, {w.interactivity_max:g}] tokens/s/user")
    ax.set_xscale("log")
    ax.set_xlabel("interactivity (tokens/s/user)")
    ax.set_ylabel("throughput (output tokens/s/GPU)")
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.0f}"))
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(f"{spec.name}: {spec.hardware.gpu}, ISL {w.isl_tokens} / OSL {w.osl_tokens}; "
                 f"top {shown} of {total} Pareto architectures by frontier area", fontsize=10)
    ax.legend(fontsize=7, loc="lower left", framealpha=0.9)


def frontier_figure(spec: StudySpec, doc: dict, top: int = DEFAULT_TOP):
    """The figure of the top `top` items (by frontier area) of a `pareto_document`."""
    items = sorted(doc["pareto"], key=lambda item: item["rank"])[:top]
    fig, ax = plt.subplots(figsize=FIGURE_SIZE_IN, dpi=DPI)
    for item in items:
        _draw_item(ax, item)
    _decorate(ax, spec, len(items), len(doc["pareto"]))
    fig.tight_layout()
    return fig


def _image_format(path: Path) -> str:
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    known = FigureCanvasAgg.get_supported_filetypes()
    if fmt not in known:
        raise ExportError(f"`-o` ({path}): image format {fmt!r} is not supported; use one of "
                          f"{', '.join(sorted(known))}")
    return fmt


def write_frontier_plot(spec: StudySpec, doc: dict, path: Path, top: int = DEFAULT_TOP) -> Path:
    """Render and write the plot atomically (the format follows the file's suffix)."""
    fmt = _image_format(path)
    fig = frontier_figure(spec, doc, top)
    try:
        return write_atomic(path, lambda tmp: fig.savefig(tmp, format=fmt))
    finally:
        plt.close(fig)
