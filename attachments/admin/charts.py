"""Chart geometry for the dashboard: numbers in, rectangles out; templates draw the SVG.

No markup is built here: the template renders every label, so Django's
autoescaping covers it like any other text on the page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

STATUS_COLORS = {
    "pending": "#9aa5b1",
    "processing": "#3b82f6",
    "ready": "#16a34a",
    "rejected": "#dc2626",
    "failed": "#f59e0b",
}


@dataclass
class Rect:
    x: float
    y: float
    width: float
    height: float
    color: str
    title: str


@dataclass
class Label:
    x: float
    y: float
    text: str


@dataclass
class Chart:
    width: int
    height: int
    rects: list[Rect] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    gridlines: list[Label] = field(default_factory=list)  # y position + value text
    legend: list[tuple[str, str]] = field(default_factory=list)  # (name, color)
    plot_left: float = 0
    plot_right: float = 0
    plot_bottom: float = 0


def _nice_max(value: int) -> int:
    """Round an axis maximum up to 1, 2 or 5 × a power of ten."""
    if value <= 0:
        return 1
    magnitude = 1
    while magnitude * 10 <= value:
        magnitude *= 10
    for step in (1, 2, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def stacked_bars(
    buckets: list[tuple[datetime, dict[str, int]]], *, label_format: str, width: int = 760, height: int = 240
) -> Chart:
    """One stacked bar per bucket, one segment per status."""
    left, right, top, bottom = 44, 10, 10, 28
    chart = Chart(width=width, height=height, plot_left=left, plot_right=width - right, plot_bottom=height - bottom)
    chart.legend = list(STATUS_COLORS.items())
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = _nice_max(max((sum(c.values()) for _, c in buckets), default=0))
    for i in range(5):
        value = peak * i / 4
        y = top + plot_h - plot_h * i / 4
        chart.gridlines.append(Label(x=left - 6, y=round(y, 1), text=f"{value:g}"))
    n = max(1, len(buckets))
    slot = plot_w / n
    bar_w = max(1.0, slot * 0.72)
    label_every = max(1, n // 8)
    for index, (start, counts) in enumerate(buckets):
        x = left + slot * index + (slot - bar_w) / 2
        y = top + plot_h
        stamp = start.strftime(label_format)
        for status, color in STATUS_COLORS.items():
            count = counts.get(status, 0)
            if not count:
                continue
            h = plot_h * count / peak
            y -= h
            chart.rects.append(
                Rect(
                    x=round(x, 1),
                    y=round(y, 1),
                    width=round(bar_w, 1),
                    height=round(h, 1),
                    color=color,
                    title=f"{stamp}: {count} → {status}",
                )
            )
        if index % label_every == 0:
            chart.labels.append(Label(x=round(x + bar_w / 2, 1), y=height - 10, text=stamp))
    return chart


def horizontal_bars(counts: dict[str, int], *, width: int = 360, row: int = 26) -> Chart:
    """One bar per status, its count written at its end."""
    left, right = 86, 48
    height = row * len(counts) + 8
    chart = Chart(width=width, height=height, plot_left=left, plot_right=width - right, plot_bottom=height)
    peak = max(counts.values(), default=0) or 1
    for index, (status, count) in enumerate(counts.items()):
        y = 4 + row * index
        w = (width - left - right) * count / peak
        chart.rects.append(
            Rect(
                x=left,
                y=y + 3,
                width=round(max(w, 1 if count else 0), 1),
                height=row - 8,
                color=STATUS_COLORS.get(status, "#666"),
                title=f"{status}: {count}",
            )
        )
        chart.labels.append(Label(x=left - 6, y=y + row / 2 + 2, text=status))
        chart.gridlines.append(Label(x=round(left + w + 6, 1), y=y + row / 2 + 2, text=str(count)))
    return chart
