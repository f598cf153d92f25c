"""The SVG chart helpers: ticks, escaping, empty data."""

from __future__ import annotations

from purgatory_broker.analytics._svg import bar_chart, fmt_number, line_chart, nice_ticks


def test_nice_ticks_are_round_and_cover_the_range() -> None:
    assert nice_ticks(0, 10) == [0, 2, 4, 6, 8, 10]
    assert nice_ticks(0, 7) == [0, 2, 4, 6, 8]
    ticks = nice_ticks(-3.5, 41)
    assert ticks[0] <= -3.5 and ticks[-1] >= 41
    assert nice_ticks(5, 5)[-1] >= 5


def test_fmt_number() -> None:
    assert [fmt_number(v) for v in (0, 950, 1500, 2_500_000, 0.25)] == [
        "0",
        "950",
        "1.5k",
        "2.5M",
        "0.25",
    ]


def test_charts_escape_text_and_handle_no_data() -> None:
    svg = bar_chart(["<a>"], {"s&p": [3.0]}, title="t<", x_label="x", y_label="y")
    assert "<a>" not in svg and "&lt;a&gt;" in svg and "t&lt;" in svg
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "no data" in line_chart([], {}, title="t", x_label="x", y_label="y")
    line = line_chart(
        [0, 1, 2], {"a": [1, None, 3], "b": [2, 2, 2]}, title="t", x_label="x", y_label="y"
    )
    assert line.count("<circle") == 2  # the line broken by None leaves two dots
    assert line.count("<polyline") == 1
