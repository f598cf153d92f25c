"""Small inline SVG charts for the HTML reports: bars and lines, nothing external.

Each function returns one ``<svg>`` element as a string, sized in CSS pixels,
with its axes, ticks at "nice" values (1, 2 or 5 times a power of ten), a
title, and a legend when there is more than one series. Text is escaped.
Colours are the Okabe-Ito palette, readable by colour-blind people.
Cost: O(points) string building.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from html import escape

__all__ = ["PALETTE", "bar_chart", "line_chart", "nice_ticks"]

PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")

_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 28, 52


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0]
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(count, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1.0, 2.0, 5.0, 10.0) if m * power >= raw)
    first = float(math.floor(lo / step) * step)
    ticks: list[float] = []
    value: float = first
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < hi:
        ticks.append(round(value, 10))
    return ticks


def fmt_number(value: float) -> str:
    """Compact: 950, 1.2k, 3.4M; integers without decimals."""
    magnitude = abs(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if magnitude >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.3g}"


def _frame(title: str, width: int, height: int) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" '
        'font-family="system-ui, sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<text x="{_LEFT}" y="16" font-size="13" font-weight="600">{escape(title)}</text>',
    ]


def _y_axis(
    parts: list[str], ticks: list[float], y_of: Callable[[float], float], width: int, label: str
) -> None:
    for tick in ticks:
        y = y_of(tick)
        parts.append(
            f'<line x1="{_LEFT}" x2="{width - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            'stroke="#ddd" stroke-width="1"/>'
        )
        parts.append(
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{fmt_number(tick)}</text>'
        )
    parts.append(
        f'<text transform="translate(14,{(_TOP + y_of(ticks[0])) / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{escape(label)}</text>'
    )


def _no_data(parts: list[str], height: int) -> str:
    parts.append(f'<text x="{_LEFT}" y="{height // 2}">no data</text></svg>')
    return "".join(parts)


def _closed(parts: list[str], x_label: str, names: Sequence[str], width: int, height: int) -> str:
    """The chart with its x label and legend, as one string."""
    plot_w = width - _LEFT - _RIGHT
    parts.append(
        f'<text x="{_LEFT + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
    )
    _legend(parts, names, width)
    parts.append("</svg>")
    return "".join(parts)


def _legend(parts: list[str], names: Sequence[str], width: int) -> None:
    if len(names) < 2:
        return
    x = float(width - _RIGHT)
    for index, name in reversed(list(enumerate(names))):
        text_width = 6.5 * len(name) + 18
        x -= text_width
        colour = PALETTE[index % len(PALETTE)]
        parts.append(f'<rect x="{x:.1f}" y="7" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{x + 14:.1f}" y="16">{escape(name)}</text>')


def bar_chart(
    labels: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    width: int = 640,
    height: int = 240,
) -> str:
    """Grouped vertical bars, one group per label, one bar per series. O(bars)."""
    parts = _frame(title, width, height)
    names = list(series)
    values = [v for s in series.values() for v in s]
    if not labels or not values:
        return _no_data(parts, height)
    ticks = nice_ticks(0.0, max(*values, 1.0))
    plot_h = height - _TOP - _BOTTOM
    plot_w = width - _LEFT - _RIGHT

    def y_of(v: float) -> float:
        return _TOP + plot_h * (1 - v / ticks[-1])

    _y_axis(parts, ticks, y_of, width, y_label)
    slot = plot_w / len(labels)
    bar = max(slot * 0.8 / len(names), 0.5)
    every = max(1, math.ceil(len(labels) * 34 / plot_w))  # label spacing: ~34 px each
    for i, label in enumerate(labels):
        x0 = _LEFT + i * slot + slot * 0.1
        for j, name in enumerate(names):
            v = series[name][i]
            top = y_of(v)
            parts.append(
                f'<rect x="{x0 + j * bar:.1f}" y="{top:.1f}" width="{bar:.1f}" '
                f'height="{y_of(0) - top:.1f}" fill="{PALETTE[j % len(PALETTE)]}">'
                f"<title>{escape(label)}: {escape(name)} {fmt_number(v)}</title></rect>"
            )
        if i % every == 0:
            cx = _LEFT + (i + 0.5) * slot
            parts.append(
                f'<text x="{cx:.1f}" y="{y_of(0) + 14:.1f}" text-anchor="middle">'
                f"{escape(label)}</text>"
            )
    return _closed(parts, x_label, names, width, height)


def line_chart(
    xs: Sequence[float],
    series: Mapping[str, Sequence[float | None]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    width: int = 640,
    height: int = 240,
    markers: bool = False,
) -> str:
    """Lines over a shared numeric x axis; ``None`` values break a line; ``markers``
    draws a dot on every point (for series with many gaps). O(points)."""
    parts = _frame(title, width, height)
    values = [v for s in series.values() for v in s if v is not None]
    if not xs or not values:
        return _no_data(parts, height)
    y_ticks = nice_ticks(min(0.0, *values), max(*values, 1.0))
    x_ticks = nice_ticks(min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1)
    plot_h = height - _TOP - _BOTTOM
    plot_w = width - _LEFT - _RIGHT
    x_lo, x_hi = x_ticks[0], x_ticks[-1]
    y_lo, y_hi = y_ticks[0], y_ticks[-1]

    def y_of(v: float) -> float:
        return _TOP + plot_h * (1 - (v - y_lo) / (y_hi - y_lo))

    def x_of(v: float) -> float:
        return _LEFT + plot_w * (v - x_lo) / (x_hi - x_lo)

    _y_axis(parts, y_ticks, y_of, width, y_label)
    for tick in x_ticks:
        parts.append(
            f'<text x="{x_of(tick):.1f}" y="{y_of(y_lo) + 14:.1f}" text-anchor="middle">'
            f"{fmt_number(tick)}</text>"
        )
    for index, (name, ys) in enumerate(series.items()):
        points = [
            None if y is None else f"{x_of(x):.1f},{y_of(y):.1f}"
            for x, y in zip(xs, ys, strict=True)
        ]
        _line(parts, name, points, PALETTE[index % len(PALETTE)], markers)
    return _closed(parts, x_label, list(series), width, height)


def _line(
    parts: list[str], name: str, points: Sequence[str | None], colour: str, markers: bool
) -> None:
    """One series: a polyline per run of points between Nones, a dot on a point
    alone (or on every point, with ``markers``)."""
    runs: list[list[str]] = [[]]
    for point in points:
        if point is None:
            runs.append([])
        else:
            runs[-1].append(point)
    for run in runs:
        for dot in run if markers or len(run) == 1 else ():
            cx, cy = dot.split(",")
            parts.append(f'<circle cx="{cx}" cy="{cy}" r="2.5" fill="{colour}"/>')
        if len(run) > 1:
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                f'points="{" ".join(run)}"><title>{escape(name)}</title></polyline>'
            )
