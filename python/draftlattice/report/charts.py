"""Inline SVG charts for the report: horizontal bars, a histogram, line charts.

Each function returns one ``<svg>`` element as a string, sized by its viewBox (the page's CSS
scales it to the column width), with a ``<title>`` for screen readers and every label escaped.
No JavaScript and no external resources.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f")


def color(i: int) -> str:
    """The i-th series colour (rows keep one colour across all charts)."""
    return PALETTE[i % len(PALETTE)]


def bar_chart(title: str, labels: Sequence[str], values: Sequence[float], fmt: Callable[[float], str]) -> str:
    """Horizontal bars, one per label, coloured by position, each with its value written beside it."""
    width, label_w, bar_w, row_h, top = 560, 170, 300, 24, 34
    height = top + row_h * len(labels) + 8
    top_value = max(values, default=0.0) or 1.0
    parts = [_open(width, height, title), _text(8, 20, title, cls="chart-title")]
    for i, (label, value) in enumerate(zip(labels, values)):
        y = top + i * row_h
        length = bar_w * value / top_value
        parts.append(_text(label_w - 8, y + 16, label, anchor="end"))
        parts.append(
            f'<rect class="bar" x="{label_w}" y="{y + 3}" width="{length:.1f}" height="{row_h - 6}" '
            f'fill="{color(i)}"><title>{escape(f"{label}: {fmt(value)}")}</title></rect>'
        )
        parts.append(_text(label_w + length + 6, y + 16, fmt(value)))
    return "".join(parts) + "</svg>"


def histogram(title: str, counts: dict[int, int], lengths: Sequence[int], fill: str) -> str:
    """Vertical bars of ``counts`` over the categories ``lengths`` (shared across rows), with counts."""
    width, height, left, top, bottom = 280, 170, 34, 30, 34
    plot_w, plot_h = width - left - 8, height - top - bottom
    top_count = max(counts.values(), default=0) or 1
    slot = plot_w / max(len(lengths), 1)
    parts = [_open(width, height, title), _text(4, 18, title, cls="chart-title")]
    parts.append(_line(left, top + plot_h, left + plot_w, top + plot_h))
    for i, length in enumerate(lengths):
        count = counts.get(length, 0)
        h = plot_h * count / top_count
        x = left + i * slot
        parts.append(
            f'<rect class="bar" x="{x + slot * 0.12:.1f}" y="{top + plot_h - h:.1f}" width="{slot * 0.76:.1f}" '
            f'height="{h:.1f}" fill="{fill}"><title>accepted {length}: {count} steps</title></rect>'
        )
        parts.append(_text(x + slot / 2, top + plot_h + 14, str(length), anchor="middle", cls="tick"))
        if count:
            parts.append(_text(x + slot / 2, top + plot_h - h - 3, str(count), anchor="middle", cls="tick"))
    parts.append(_text(left + plot_w / 2, height - 4, "accepted draft tokens per step", anchor="middle", cls="axis"))
    return "".join(parts) + "</svg>"


def line_chart(title: str, series: dict[str, Sequence[tuple[float, float]]], x_label: str, y_label: str) -> str:
    """Lines with markers; x on a log2 axis when every x is positive and they span a factor of 4."""
    width, height, left, right, top, bottom = 560, 300, 52, 130, 34, 44
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = sorted({x for points in series.values() for x, _ in points})
    log = xs[0] > 0 and xs[-1] / xs[0] >= 4
    fx = math.log2 if log else float
    x_lo, x_hi = fx(xs[0]), fx(xs[-1])
    y_max = max(y for points in series.values() for _, y in points)
    y_step = _nice_ceiling(y_max / 5)
    y_ticks = max(1, math.ceil(y_max / y_step - 1e-9))
    y_hi = y_step * y_ticks

    def px(x: float) -> float:
        return left + (plot_w / 2 if x_hi == x_lo else plot_w * (fx(x) - x_lo) / (x_hi - x_lo))

    def py(y: float) -> float:
        return top + plot_h * (1 - y / y_hi)

    parts = [_open(width, height, title), _text(8, 20, title, cls="chart-title")]
    parts.append(_line(left, top, left, top + plot_h) + _line(left, top + plot_h, left + plot_w, top + plot_h))
    for i in range(y_ticks + 1):
        y = y_step * i
        parts.append(_line(left, py(y), left + plot_w, py(y), cls="grid"))
        parts.append(_text(left - 6, py(y) + 4, f"{y:.4g}", anchor="end", cls="tick"))
    for x in xs:
        parts.append(_text(px(x), top + plot_h + 16, f"{x:g}", anchor="middle", cls="tick"))
    parts.append(
        _text(left + plot_w / 2, height - 6, x_label + (" (log scale)" if log else ""), anchor="middle", cls="axis")
    )
    parts.append(f'<text class="axis" transform="translate(14 {top + plot_h / 2}) rotate(-90)" text-anchor="middle">')
    parts.append(f"{escape(y_label)}</text>")
    for i, (name, points) in enumerate(series.items()):
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        parts.append(f'<polyline class="curve" points="{coords}" fill="none" stroke="{color(i)}" stroke-width="2"/>')
        for x, y in points:
            tip = escape(f"{name}: {x:g} -> {y:.3f}")
            parts.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{color(i)}"><title>{tip}</title></circle>'
            )
        ly = top + 8 + 18 * i
        parts.append(_line(width - right + 12, ly, width - right + 32, ly, stroke=color(i)))
        parts.append(_text(width - right + 38, ly + 4, name))
    return "".join(parts) + "</svg>"


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^n at or above ``value`` (1 for zero): a tick step."""
    if value <= 0:
        return 1.0
    scale = 10 ** math.floor(math.log10(value))
    return next(m * scale for m in (1, 2, 2.5, 5, 10) if m * scale >= value * (1 - 1e-9))


def _open(width: int, height: int, title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img"><title>{escape(title)}</title>'
    )


def _text(x: float, y: float, text: str, *, anchor: str = "start", cls: str = "label") -> str:
    return f'<text class="{cls}" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{escape(text)}</text>'


def _line(x1: float, y1: float, x2: float, y2: float, *, cls: str = "axis-line", stroke: str | None = None) -> str:
    extra = f' stroke="{stroke}" stroke-width="2"' if stroke else ""
    return f'<line class="{cls}" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}"{extra}/>'
