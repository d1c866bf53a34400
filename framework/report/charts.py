"""The report's charts: a partition's history plotted with matplotlib as static SVG,
inlined into its page. matplotlib is imported only while a chart is drawn."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from datetime import datetime, timezone

from markupsafe import Markup

from framework.report.data import PartitionHistory, RunPoint

__all__ = ["Series", "XAxis", "event_chart", "line_chart", "partition_charts", "x_axis"]

#: Compaction triggers as the trigger chart shows them (CONTRACT section 8), and a row for "not due".
TRIGGERS = (("dirty_ratio", "dirty ratio", "#1f77b4"), ("max_lag", "max lag", "#ff7f0e"),
            ("tombstone_horizon", "tombstones", "#9467bd"), ("forced", "forced", "#2ca02c"),
            ("not_due", "not due", "#9aa5b1"))

#: A chart's size in inches (640 x 270 at 100 dpi) and its plot area in figure fractions
#: (left, bottom, width, height): room above for the title and the legend, below for the time axis.
WIDTH, HEIGHT = 6.4, 2.7
LEFT, RIGHT, TOP, BOTTOM = 0.84, 0.18, 0.48, 0.50
#: matplotlib settings for every chart, applied only while one is drawn (a notebook's own
#: settings stay as they were). Text stays text in the SVG (small, searchable, the page's
#: font); the fixed hash salt makes the SVG's ids, so the page, the same for the same data.
STYLE = {
    "svg.fonttype": "none", "svg.hashsalt": "topiclake-report",
    "font.family": "sans-serif", "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"], "font.size": 8,
    "axes.edgecolor": "#6b7683", "axes.labelcolor": "#5b6776", "axes.spines.top": False,
    "axes.spines.right": False, "xtick.color": "#3d4854", "ytick.color": "#3d4854",
    "grid.color": "#e6e9ee", "grid.linewidth": 0.8, "legend.fontsize": 8, "legend.frameon": False,
}
#: No Dublin Core block in the SVG: no date (the same data draws the same chart) and no URLs.
METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
#: The units a y axis counts in, per kind of value: (divisor, suffix), smallest first.
UNITS = {
    "count": ((1, ""), (1_000_000, "M")),
    "bytes": ((1, " B"), (1024, " KB"), (1024 ** 2, " MB"), (1024 ** 3, " GB"), (1024 ** 4, " TB")),
    "duration": ((1000, "s"), (60_000, "min"), (3_600_000, "h"), (86_400_000, "d")),
    "ratio": ((1, ""),),
}


@dataclass(frozen=True)
class Series:
    label: str
    points: tuple[tuple[float, float], ...]
    color: str
    step: bool = False


@dataclass(frozen=True)
class XAxis:
    """Each run's x, in run order: its ``now_ms`` when that grows run after run, else its number."""

    label: str
    xs: tuple[float, ...]
    is_time: bool


def x_axis(runs: list[RunPoint]) -> XAxis:
    times = [r.now_ms for r in runs]
    if len(runs) >= 2 and all(a < b for a, b in zip(times, times[1:])):
        try:  # a clock beyond the calendar falls back to run order
            datetime.fromtimestamp(times[0] / 1000, tz=timezone.utc)
            datetime.fromtimestamp(times[-1] / 1000, tz=timezone.utc)
            return XAxis("now (UTC)", tuple(float(t) for t in times), True)
        except (OverflowError, OSError, ValueError):
            pass
    return XAxis("run (oldest first)", tuple(float(i) for i in range(1, len(runs) + 1)), False)


def _draw(title: str, plot_height: float, axis: XAxis, paint) -> Markup:
    """A figure with one plot area on ``axis``, painted by ``paint(ax, to_x)``, as inline SVG.

    One Figure per chart, never pyplot: no global figure state, nothing to close.
    """
    import matplotlib  # lazily: only the report draws
    from matplotlib import dates
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    height = TOP + plot_height + BOTTOM
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(WIDTH, height))
        ax = fig.add_axes((LEFT / WIDTH, BOTTOM / height, 1 - (LEFT + RIGHT) / WIDTH, plot_height / height))
        fig.text(LEFT / WIDTH, 1 - 0.2 / height, title, fontsize=10, fontweight="bold", color="#1d2733",
                 va="baseline")
        if axis.is_time:
            def to_x(ms: float) -> float:
                return dates.date2num(datetime.fromtimestamp(ms / 1000, tz=timezone.utc))

            locator = dates.AutoDateLocator(minticks=3, maxticks=6, tz=timezone.utc)
            ax.xaxis.set_major_locator(locator)
            ax.xaxis.set_major_formatter(dates.ConciseDateFormatter(locator, tz=timezone.utc))
        else:
            def to_x(run: float) -> float:
                return run

            ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True, min_n_ticks=1))
        lo, hi = to_x(axis.xs[0]), to_x(axis.xs[-1])
        pad = (hi - lo) * 0.03 if axis.is_time else 0.5  # keep the first and last points off the edges
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_xlabel(axis.label)
        paint(ax, to_x)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata=METADATA)
    text = buffer.getvalue()
    return Markup(text[text.index("<svg"):])  # produced by matplotlib, which escapes its text


def _empty(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center", fontsize=9,
            style="italic", color="#8a95a3")


def _unit(values: list[float], kind: str) -> tuple[float, str]:
    """The kind's largest unit the top value fills."""
    divisor, suffix = UNITS[kind][0]
    for unit in UNITS[kind]:
        if abs(max(values)) >= unit[0]:
            divisor, suffix = unit
    return divisor, suffix


def line_chart(title: str, series: list[Series], axis: XAxis, y_label: str, kind: str = "count",
               threshold: float | None = None) -> Markup:
    """A line (or step) chart of ``series`` from 0 up, with a y grid, a legend and a dashed threshold."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    def paint(ax, to_x):
        ax.set_ylabel(y_label)
        values = [y for s in series for _, y in s.points]
        if not values:
            ax.set_yticks([])
            return _empty(ax, "no data recorded")
        levels = values + ([threshold] if threshold is not None else [])
        divisor, suffix = _unit(levels, kind)
        for s in series:
            ax.plot([to_x(x) for x, _ in s.points], [y / divisor for _, y in s.points], color=s.color,
                    linewidth=1.6, marker="o", markersize=3.6, label=s.label,
                    drawstyle="steps-post" if s.step else "default")
        if threshold is not None:
            ax.axhline(threshold / divisor, color="#d62728", linewidth=1.6, linestyle=(0, (5, 3)),
                       label=f"threshold {threshold:g}")
        # from 0 (or below): a change reads at its true size
        lo, hi = min(0.0, min(levels) / divisor), max(levels) / divisor
        hi = hi if hi > lo else lo + 1
        ax.set_ylim(lo, hi + (hi - lo) * 0.06)
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{_tidy(round(v, 9)):,}{suffix}" if v else "0"))
        ax.grid(axis="y")
        ax.legend(loc="lower left", bbox_to_anchor=(0, 1.01), ncol=len(series) + 1, borderaxespad=0,
                  handlelength=1.8, columnspacing=1.4)

    return _draw(title, HEIGHT - TOP - BOTTOM, axis, paint)


def _tidy(value: float):
    return int(value) if float(value).is_integer() else value


def event_chart(title: str, events: list[tuple[float, str]], axis: XAxis) -> Markup:
    """A marker per (x, trigger) event on one row per trigger (TRIGGERS), top to bottom."""
    plot_height = 0.22 * len(TRIGGERS) + 0.1

    def paint(ax, to_x):
        for row, (key, _, color) in enumerate(TRIGGERS):
            xs = [to_x(x) for x, k in events if k == key]
            if xs:
                ax.plot(xs, [row] * len(xs), linestyle="none", marker="o", markersize=5.5, color=color)
        ax.set_yticks(range(len(TRIGGERS)), [label for _, label, _ in TRIGGERS])
        for label, (_, _, color) in zip(ax.get_yticklabels(), TRIGGERS):
            label.set_color(color)
        ax.set_ylim(len(TRIGGERS) - 0.5, -0.5)
        ax.grid(axis="y")
        if not events:
            _empty(ax, "no compaction stage ran")

    return _draw(title, plot_height, axis, paint)


def partition_charts(history: PartitionHistory) -> list[Markup]:
    """The partition page's charts, one inline SVG each."""
    runs, axis = history.runs, x_axis(history.runs)

    def points(attribute: str) -> tuple[tuple[float, float], ...]:
        pairs = ((x, getattr(r, attribute)) for x, r in zip(axis.xs, runs))
        return tuple((x, y) for x, y in pairs if y is not None and math.isfinite(y))

    before, after = "#ff7f0e", "#1f77b4"
    ratio = points("dirty_ratio")
    events = []
    for x, run in zip(axis.xs, runs):
        if run.compact_due is not None:
            events += [(x, reason) for reason in run.reasons] if run.compact_due else [(x, "not_due")]
    return [
        line_chart("Records per run", [Series("before", points("records_before"), before),
                                       Series("after", points("records_after"), after)], axis, "records"),
        line_chart("Bytes per run", [Series("before", points("bytes_before"), before),
                                     Series("after", points("bytes_after"), after)], axis, "bytes", "bytes"),
        line_chart("Offsets after each run", [Series("log start", points("log_start"), "#2ca02c", step=True),
                                              Series("checkpoint", points("checkpoint"), "#9467bd", step=True),
                                              Series("log end", points("log_end"), "#8c564b", step=True)],
                   axis, "offset"),
        line_chart("Dirty ratio before compaction", [Series("dirty ratio", ratio, after)], axis, "dirty ratio",
                   "ratio", threshold=history.threshold if ratio else None),
        line_chart("max-compaction-delay (KIP-354)",
                   [Series("delay", points("max_compaction_delay_ms"), "#d62728", step=True)],
                   axis, "delay", "duration"),
        event_chart("What triggered compaction", events, axis),
    ]


