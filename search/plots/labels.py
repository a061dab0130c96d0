"""Names next to points that overlap nothing: each name goes to the first of a few places around
its point whose box (display coordinates, after the final layout) meets no marker, no line, no
other text, no legend and stays inside the axes; a name with no free place is left out (the
legend's color still names its point), and one name stands for points that share it and lie on
top of each other (the same GEMM at c = 1 and in a prefill chunk)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.transforms import Bbox

# where a point's name may go (offset points, alignment), tried in order
LABEL_PLACES = ((6, 0, "left", "center"), (-6, 0, "right", "center"), (0, 6, "center", "bottom"),
                (0, -6, "center", "top"), (5, 5, "left", "bottom"), (-5, -5, "right", "top"),
                (5, -5, "left", "top"), (-5, 5, "right", "bottom"), (0, 16, "center", "bottom"),
                (0, -16, "center", "top"), (14, 10, "left", "bottom"), (-14, -10, "right", "top"),
                (18, 0, "left", "center"), (-18, 0, "right", "center"))
LABEL_FONT_SIZE = 7
LINE_STEP_PX = 2.0  # a line is checked at points this far apart along it


@dataclass(frozen=True)
class Label:
    text: str
    xy: tuple[float, float]  # data coordinates of its point
    color: object


def _marker_boxes(line: Line2D, dpi: float) -> list[Bbox]:
    radius = line.get_markersize() / 2 * dpi / 72
    return [Bbox.from_bounds(x - radius, y - radius, 2 * radius, 2 * radius)
            for x, y in line.get_transform().transform(line.get_xydata())]


def drawn_vertices(line: Line2D) -> np.ndarray:
    """The data vertices of the path `line` draws: its points, with the corners a step
    drawstyle adds (`steps-pre` rises at the start of each interval, `steps-post` at its end,
    `steps-mid` halfway)."""
    xy = np.asarray(line.get_xydata(), dtype=float)
    style = line.get_drawstyle()
    if len(xy) < 2 or not style.startswith("steps"):
        return xy
    a, b = xy[:-1], xy[1:]
    if style == "steps-post":
        corners = [np.column_stack([b[:, 0], a[:, 1]])]
    elif style == "steps-mid":
        mid = (a[:, 0] + b[:, 0]) / 2
        corners = [np.column_stack([mid, a[:, 1]]), np.column_stack([mid, b[:, 1]])]
    else:  # "steps" and "steps-pre"
        corners = [np.column_stack([a[:, 0], b[:, 1]])]
    path = np.stack([a, *corners], axis=1).reshape(-1, 2)
    return np.vstack([path, xy[-1:]])


def _line_points(line: Line2D) -> np.ndarray:
    """Display points along a drawn line, `LINE_STEP_PX` apart."""
    xy = line.get_transform().transform(drawn_vertices(line))
    xy = xy[np.all(np.isfinite(xy), axis=1)]
    pieces = [xy[:1]]
    for a, b in zip(xy[:-1], xy[1:]):
        steps = max(int(np.hypot(*(b - a)) / LINE_STEP_PX), 1)
        pieces.append(a + (b - a) * np.linspace(0, 1, steps + 1)[1:, None])
    return np.concatenate(pieces) if len(xy) else np.zeros((0, 2))


def obstacles(fig, artists) -> tuple[list[Bbox], np.ndarray]:
    """(boxes, line points) of `artists` in display coordinates: markers and texts and legends
    as boxes, drawn lines as points."""
    renderer = fig.canvas.get_renderer()
    boxes, points = [], [np.zeros((0, 2))]
    for artist in artists:
        if artist is None or not artist.get_visible():
            continue
        if isinstance(artist, Line2D):
            if artist.get_marker() not in (None, "None", "", " "):
                boxes += _marker_boxes(artist, fig.dpi)
            if artist.get_linestyle() not in ("None", "", " "):
                points.append(_line_points(artist))
        else:
            boxes.append(artist.get_window_extent(renderer))
    return boxes, np.concatenate(points)


def _free(box: Bbox, inside: Bbox, boxes: list[Bbox], points: np.ndarray) -> bool:
    if not (inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1)):
        return False
    if any(box.overlaps(other) for other in boxes):
        return False
    hit = (points[:, 0] >= box.x0) & (points[:, 0] <= box.x1) & \
        (points[:, 1] >= box.y0) & (points[:, 1] <= box.y1)
    return not hit.any()


def _distinct(ax, labels: list[Label], radius_px: float) -> list[Label]:
    """One label per name among points that lie within a marker of each other."""
    kept: list[tuple[Label, np.ndarray]] = []
    for label in labels:
        at = ax.transData.transform(label.xy)
        if not any(k.text == label.text and np.hypot(*(at - xy)) < radius_px for k, xy in kept):
            kept.append((label, at))
    return [k for k, _ in kept]


def place_labels(fig, ax, labels: list[Label], artists) -> list[Text]:
    """Each label at its first free place (see the module docstring) among `artists`' markers,
    lines, texts and legends; returns the names placed. Call after the final layout."""
    renderer = fig.canvas.get_renderer()
    boxes, points = obstacles(fig, artists)
    inside = ax.get_window_extent(renderer)
    marker_px = max((a.get_markersize() for a in artists if isinstance(a, Line2D)), default=0)
    placed = []
    for label in _distinct(ax, labels, marker_px * fig.dpi / 72):
        for dx, dy, ha, va in LABEL_PLACES:
            note = ax.annotate(label.text, label.xy, textcoords="offset points", xytext=(dx, dy),
                               ha=ha, va=va, fontsize=LABEL_FONT_SIZE, color=label.color)
            box = note.get_window_extent(renderer)
            if _free(box, inside, boxes, points):
                boxes.append(box)
                placed.append(note)
                break
            note.remove()
    return placed
