"""The report: the maintenance history and the validation results as a static HTML site.

``write_report`` writes, into one folder that opens from the file system with no server
and no network (styles inline, charts hand-written SVG, no scripts):

- ``index.html``: the latest state of every partition, the failed validations, a link to
  the Great Expectations Data Docs, and the last runs, newest first;
- ``partitions/<topic>-<partition>.html``: the partition's history plotted (records,
  bytes, offsets, dirty ratio, max-compaction-delay, triggers) and every stage row;
- ``data_docs/``: a copy of the Data Docs site, replaced on every write, so the folder is
  self-contained.

Only the history table is read (one row per partition, stage and run: small), plus each
partition table's dirty-ratio threshold from its properties.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape
from urllib.parse import quote

from . import faults, gx_project
from .errors import ArgumentError
from .history import MaintenanceHistory
from .warehouse import Warehouse, delta_table_sql

__all__ = ["write_report", "MAX_RUNS_PER_PARTITION"]

#: The newest runs per partition the report reads; older ones are left out.
MAX_RUNS_PER_PARTITION = 500
#: Runs listed on the index page.
RECENT_RUNS = 50
THRESHOLD_PROPERTY = "topiclake.config.min.cleanable.dirty.ratio"
STAGE_ORDER = ("compact", "retain", "optimize", "vacuum", "error")
#: Compaction triggers as the trigger chart shows them (CONTRACT section 8), and a row for "not due".
TRIGGERS = (("dirty_ratio", "dirty ratio", "#1f77b4"), ("max_lag", "max lag", "#ff7f0e"),
            ("tombstone_horizon", "tombstones", "#9467bd"), ("forced", "forced", "#2ca02c"),
            ("not_due", "not due", "#9aa5b1"))


# ----------------------------------------------------------------------- data shaping
@dataclass
class RunPoint:
    """One run of one partition: its stage rows and the numbers the charts plot."""

    run_id: str
    now_ms: int
    started_ms: int
    rows: list[dict]
    stages: tuple[str, ...] = ()
    trigger: str | None = None
    reasons: tuple[str, ...] = ()
    compact_due: bool | None = None
    records_before: int | None = None
    records_after: int | None = None
    bytes_before: int | None = None
    bytes_after: int | None = None
    log_start: int | None = None
    log_end: int | None = None
    checkpoint: int | None = None
    #: live data files after the run's bin-packing stage (None when it did not run)
    files: int | None = None
    dirty_ratio: float | None = None
    max_compaction_delay_ms: int | None = None
    #: failed, error, passed or skipped (nothing was validated)
    validation: str = "skipped"
    failed_guarantees: tuple[str, ...] = ()


@dataclass
class PartitionHistory:
    """The runs of one partition, oldest first."""

    topic: str
    partition: int
    runs: list[RunPoint]
    threshold: float | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def page(self) -> str:
        """The page's path relative to the report folder."""
        return "partitions/" + re.sub(r"[^A-Za-z0-9._-]", "_", self.name) + ".html"

    def latest(self, attribute: str):
        """The newest value of ``attribute`` that some run recorded, or None."""
        for run in reversed(self.runs):
            value = getattr(run, attribute)
            if value is not None:
                return value
        return None

    @property
    def last_validated(self) -> RunPoint | None:
        """The newest run that validated something (or failed with an error)."""
        return next((r for r in reversed(self.runs) if r.validation != "skipped"), None)


@dataclass
class RunSummary:
    """One maintenance run over all the partitions it touched."""

    run_id: str
    now_ms: int
    started_ms: int
    stages: set[str] = field(default_factory=set)
    partitions: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    outcomes: set[str] = field(default_factory=set)

    @property
    def outcome(self) -> str:
        return _worst(self.outcomes)


def _worst(outcomes) -> str:
    for outcome in ("failed", "error", "passed"):
        if outcome in outcomes:
            return outcome
    return "skipped"


def read_history(spark, warehouse: Warehouse, max_runs: int = MAX_RUNS_PER_PARTITION) -> list[dict]:
    """The history rows of the newest ``max_runs`` runs of every partition, as dicts."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    history = MaintenanceHistory(spark, warehouse)
    if not history.exists():
        return []
    run = Window.partitionBy("topic", "partition", "run_id")
    newest_first = Window.partitionBy("topic", "partition").orderBy(
        F.col("_run_started").desc(), F.col("run_id").desc())
    frame = (history.read()
             .withColumn("_run_started", F.min("run_started_ms").over(run))
             .withColumn("_rank", F.dense_rank().over(newest_first))
             .where(F.col("_rank") <= max_runs)
             .drop("_run_started", "_rank"))
    return [row.asDict(recursive=True) for row in frame.collect()]


def fold_run(rows: list[dict]) -> RunPoint:
    """The stage rows of one partition in one run, folded into one point per chart."""
    rows = sorted(rows, key=lambda r: (_stage_rank(r["stage"]), r["run_started_ms"] or 0))
    first = rows[0]
    point = RunPoint(run_id=first["run_id"], now_ms=first["now_ms"],
                     started_ms=min(r["run_started_ms"] or 0 for r in rows), rows=rows,
                     stages=tuple(dict.fromkeys(r["stage"] for r in rows)))
    compact = next((r for r in rows if r["stage"] == "compact"), None)
    if compact is not None:
        point.trigger = compact["trigger"] if compact["due"] else None
        point.reasons = tuple(compact["reasons"] or ())
        point.compact_due = compact["due"]
        point.dirty_ratio = compact["dirty_ratio"]
        point.max_compaction_delay_ms = compact["max_compaction_delay_ms"]
    removed_records = sum(r["removed_records"] or 0 for r in rows)
    removed_bytes = sum(r["removed_bytes"] or 0 for r in rows)
    point.records_before = _first(rows, "records_before")
    point.bytes_before = _first(rows, "bytes_before")
    if point.records_before is not None:
        point.records_after = point.records_before - removed_records
    if point.bytes_before is not None:
        point.bytes_after = point.bytes_before - removed_bytes
    point.log_start = _last(rows, "log_start_after", "log_start_before")
    point.checkpoint = _last(rows, "checkpoint_after", "checkpoint_before")
    point.log_end = _last(rows, "log_end_offset")
    point.files = _last(rows, "files_after", "files_before")
    outcomes = {r["validation"] for r in rows} | ({"error"} if "error" in point.stages else set())
    point.validation = _worst(outcomes)
    guarantees = [g for r in rows for g in (r["failed_guarantees"] or ())]
    point.failed_guarantees = tuple(dict.fromkeys(guarantees))
    return point


def _stage_rank(stage: str) -> int:
    return STAGE_ORDER.index(stage) if stage in STAGE_ORDER else len(STAGE_ORDER)


def _first(rows: list[dict], column: str):
    return next((r[column] for r in rows if r[column] is not None), None)


def _last(rows: list[dict], *columns: str):
    for row in reversed(rows):
        for column in columns:
            if row[column] is not None:
                return row[column]
    return None


def shape(rows: list[dict]) -> tuple[list[PartitionHistory], list[RunSummary]]:
    """Partitions sorted by topic and partition, each with its runs oldest first; runs newest first."""
    grouped: dict[tuple[str, int], dict[str, list[dict]]] = {}
    for row in rows:
        grouped.setdefault((row["topic"], row["partition"]), {}).setdefault(row["run_id"], []).append(row)
    partitions, runs = [], {}
    for (topic, partition), by_run in sorted(grouped.items()):
        points = sorted((fold_run(r) for r in by_run.values()), key=lambda p: (p.started_ms, p.run_id))
        history = PartitionHistory(topic, partition, points)
        partitions.append(history)
        for point in points:
            summary = runs.setdefault(point.run_id, RunSummary(point.run_id, point.now_ms, point.started_ms))
            summary.started_ms = min(summary.started_ms, point.started_ms)
            summary.stages.update(point.stages)
            summary.partitions.append(history.name)
            summary.outcomes.add(point.validation)
            if point.validation in ("failed", "error"):
                summary.failed.append(history.name)
    newest_first = sorted(runs.values(), key=lambda s: (s.started_ms, s.run_id), reverse=True)
    return partitions, newest_first


def dirty_ratio_threshold(spark, warehouse: Warehouse, topic: str, partition: int) -> float | None:
    """The partition table's ``min.cleanable.dirty.ratio``, or None if the table or property is gone."""
    from delta.tables import DeltaTable

    path = warehouse.partition_path(topic, partition)
    try:
        if not DeltaTable.isDeltaTable(spark, path):
            return None
        rows = spark.sql(f"SHOW TBLPROPERTIES {delta_table_sql(path)}").collect()
        value = {r["key"]: r["value"] for r in rows}.get(THRESHOLD_PROPERTY)
        return float(value) if value not in (None, "") else None
    except Exception:  # noqa: BLE001 - the threshold is a nicety: a chart without it is still right
        return None


# --------------------------------------------------------------------------- formats
def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _count(value) -> str:
    return "-" if value is None else f"{value:,}"


def _bytes(value) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(size) < 1024 or unit == "TB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(value)


def _duration(ms) -> str:
    if ms is None:
        return "-"
    seconds = ms / 1000
    for limit, divisor, unit in ((120, 1, "s"), (7200, 60, "min"), (172800, 3600, "h")):
        if abs(seconds) < limit:
            return f"{seconds / divisor:.3g}{unit}"
    return f"{seconds / 86400:.3g}d"


def _ratio(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def _span(old, new, fmt=_count) -> str:
    if old is None and new is None:
        return "-"
    if new is None or old == new:
        return fmt(old)
    return f"{fmt(old)} → {fmt(new)}"


# ------------------------------------------------------------------------- SVG charts
WIDTH, HEIGHT = 640, 270
LEFT, RIGHT, TOP, BOTTOM = 84, 18, 48, 50


@dataclass(frozen=True)
class Series:
    label: str
    points: tuple[tuple[float, float], ...]
    color: str
    dashed: bool = False
    step: bool = False
    markers: bool = True


@dataclass(frozen=True)
class XAxis:
    label: str
    lo: float
    hi: float
    ticks: tuple[tuple[float, str], ...]
    #: each run's x, in run order
    xs: tuple[float, ...]
    is_time: bool

    def point_label(self, x: float) -> str:
        return _when(int(x)) if self.is_time else f"run {int(x)}"


def x_axis(runs: list[RunPoint]) -> XAxis:
    """Time (the runs' ``now_ms``) when it grows run after run, else run order."""
    times = [r.now_ms for r in runs]
    if len(runs) >= 2 and all(a < b for a, b in zip(times, times[1:])):
        lo, hi = times[0], times[-1]
        span = hi - lo
        fmt = "%H:%M:%S" if span <= 86_400_000 else "%m-%d %H:%M" if span <= 60 * 86_400_000 else "%Y-%m-%d"
        ticks = tuple((lo + span * i / 4, _strftime(lo + span * i / 4, fmt)) for i in range(5))
        pad = span * 0.03  # keep the first and last points off the chart's edges
        return XAxis(f"now (UTC, from {_when(lo)[:10]})", lo - pad, hi + pad, ticks, tuple(times), True)
    count = max(len(runs), 1)
    step = max(1, _nice_step(count - 1, 6)) if count > 1 else 1
    ticks = tuple((float(i), str(i)) for i in range(1, count + 1, int(step)))
    return XAxis("run (oldest first)", 0.5, count + 0.5, ticks, tuple(float(i) for i in range(1, count + 1)), False)


def _strftime(ms: float, fmt: str) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime(fmt)
    except (OverflowError, OSError, ValueError):
        return str(int(ms))


def _nice_step(span: float, count: int) -> float:
    raw = span / max(count, 1)
    if raw <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 5, 10) if raw <= m * magnitude)


#: The units a y axis counts in, per kind of value: (divisor, suffix), smallest first.
UNITS = {
    "count": ((1, ""), (1_000_000, "M")),
    "bytes": ((1, " B"), (1024, " KB"), (1024 ** 2, " MB"), (1024 ** 3, " GB"), (1024 ** 4, " TB")),
    "duration": ((1000, "s"), (60_000, "min"), (3_600_000, "h"), (86_400_000, "d")),
    "ratio": ((1, ""),),
}


def _y_ticks(values: list[float], kind: str) -> list[tuple[float, str]]:
    """Round ticks from 0 (or below) to the top value, labelled in the kind's largest fitting unit."""
    lo, hi = min(0.0, min(values)), max(values)
    divisor, suffix = UNITS[kind][0]
    for unit in UNITS[kind]:
        if abs(hi) >= unit[0]:
            divisor, suffix = unit
    lo, hi = lo / divisor, hi / divisor
    if hi <= lo:
        hi = lo + 1
    step = _nice_step(hi - lo, 5)
    start, end = math.floor(lo / step) * step, math.ceil(hi / step) * step
    ticks = [start + i * step for i in range(int(round((end - start) / step)) + 1)]
    return [(t * divisor, f"{_tidy(round(t, 9)):,}{suffix}" if t else "0") for t in ticks]


def _svg_open(title: str, height: int = HEIGHT) -> list[str]:
    return [f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}" '
            f'xmlns="http://www.w3.org/2000/svg">',
            f'<text class="title" x="{LEFT}" y="18">{escape(title)}</text>']


def _legend(items: list[tuple[str, str, bool]]) -> list[str]:
    """One row of colored swatches under the title: (label, color, dashed)."""
    parts, x = [], LEFT
    for label, color, dashed in items:
        dash = ' stroke-dasharray="5 3"' if dashed else ""
        parts.append(f'<line x1="{x}" y1="32" x2="{x + 18}" y2="32" stroke="{color}" stroke-width="2.5"{dash}/>')
        parts.append(f'<text class="legend" x="{x + 23}" y="36">{escape(label)}</text>')
        x += 23 + 7 * len(label) + 18
    return parts


def _frame(axis: XAxis, y_label: str, plot_h: int) -> list[str]:
    """The x axis with its ticks and title, the left axis line and the y title."""
    plot_w, bottom = WIDTH - LEFT - RIGHT, TOP + plot_h
    parts = [f'<line class="axis" x1="{LEFT}" y1="{bottom}" x2="{LEFT + plot_w}" y2="{bottom}"/>',
             f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}"/>']
    for value, label in axis.ticks:
        x = LEFT + (value - axis.lo) / (axis.hi - axis.lo) * plot_w
        anchor = "end" if x > WIDTH - RIGHT - 30 else "middle"  # keep the last label inside the chart
        parts.append(f'<line class="axis" x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}"/>')
        parts.append(f'<text class="tick" x="{x:.1f}" y="{bottom + 17}" text-anchor="{anchor}">{escape(label)}</text>')
    parts.append(f'<text class="axis-label" x="{LEFT + plot_w / 2:.1f}" y="{bottom + 38}" '
                 f'text-anchor="middle">{escape(axis.label)}</text>')
    if y_label:
        parts.append(f'<text class="axis-label" transform="translate(14 {TOP + plot_h / 2:.1f}) rotate(-90)" '
                     f'text-anchor="middle">{escape(y_label)}</text>')
    return parts


def line_chart(title: str, series: list[Series], axis: XAxis, y_label: str, kind: str = "count") -> str:
    """A line (or step) chart of ``series`` over ``axis``, with a y grid, a legend and point tooltips."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    parts = _svg_open(title) + _legend([(s.label, s.color, s.dashed) for s in series])
    parts += _frame(axis, y_label, plot_h)
    values = [y for s in series for _, y in s.points]
    if not values:
        parts.append(f'<text class="empty" x="{LEFT + plot_w / 2:.1f}" y="{TOP + plot_h / 2:.1f}" '
                     f'text-anchor="middle">no data recorded</text></svg>')
        return "".join(parts)
    ticks = _y_ticks(values, kind)
    y_lo, y_hi = ticks[0][0], ticks[-1][0]
    y_format = {"count": _count, "bytes": _bytes, "duration": _duration, "ratio": _ratio}[kind]

    def sx(x: float) -> float:
        return LEFT + (x - axis.lo) / (axis.hi - axis.lo) * plot_w

    def sy(y: float) -> float:
        return TOP + plot_h - (y - y_lo) / (y_hi - y_lo) * plot_h

    for tick, label in ticks:
        parts.append(f'<line class="grid" x1="{LEFT}" y1="{sy(tick):.1f}" x2="{LEFT + plot_w}" y2="{sy(tick):.1f}"/>')
        parts.append(f'<text class="tick" x="{LEFT - 6}" y="{sy(tick) + 4:.1f}" text-anchor="end">{escape(label)}</text>')
    for s in series:
        points = [(sx(x), sy(y)) for x, y in s.points]
        if len(points) > 1:
            path = [f"M{points[0][0]:.1f},{points[0][1]:.1f}"]
            for (_, y0), (x1, y1) in zip(points, points[1:]):
                if s.step:
                    path.append(f"L{x1:.1f},{y0:.1f}")
                path.append(f"L{x1:.1f},{y1:.1f}")
            dash = ' stroke-dasharray="5 3"' if s.dashed else ""
            parts.append(f'<path d="{"".join(path)}" fill="none" stroke="{s.color}" stroke-width="2"{dash}/>')
        if s.markers:
            for (x, y), (px, py) in zip(s.points, points):
                tip = f"{s.label}: {y_format(_tidy(y))} ({axis.point_label(x)})"
                parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.2" fill="{s.color}">'
                             f'<title>{escape(tip)}</title></circle>')
    parts.append("</svg>")
    return "".join(parts)


def _tidy(value: float):
    return int(value) if float(value).is_integer() else value


def event_chart(title: str, events: list[tuple[float, str, str]], axis: XAxis) -> str:
    """A marker per (x, category, tooltip) on one row per trigger category."""
    rows = TRIGGERS
    plot_w, plot_h = WIDTH - LEFT - RIGHT, 22 * len(rows) + 10
    height = TOP + plot_h + BOTTOM
    parts = _svg_open(title, height) + _frame(axis, "", plot_h)
    row_y = {key: TOP + 16 + 22 * i for i, (key, _, _) in enumerate(rows)}
    for key, label, color in rows:
        y = row_y[key]
        parts.append(f'<line class="grid" x1="{LEFT}" y1="{y}" x2="{LEFT + plot_w}" y2="{y}"/>')
        parts.append(f'<text class="tick" x="{LEFT - 6}" y="{y + 4}" text-anchor="end" '
                     f'style="fill: {color}">{escape(label)}</text>')
    colors = {key: color for key, _, color in rows}
    for x, key, tip in events:
        if key not in row_y:
            continue
        px = LEFT + (x - axis.lo) / (axis.hi - axis.lo) * plot_w
        parts.append(f'<circle cx="{px:.1f}" cy="{row_y[key]}" r="4.5" fill="{colors[key]}">'
                     f'<title>{escape(tip)}</title></circle>')
    if not events:
        parts.append(f'<text class="empty" x="{LEFT + plot_w / 2:.1f}" y="{TOP + plot_h / 2:.1f}" '
                     f'text-anchor="middle">no compaction stage ran</text>')
    parts.append("</svg>")
    return "".join(parts)


def partition_charts(history: PartitionHistory) -> list[str]:
    """The partition page's charts, one SVG string each."""
    runs, axis = history.runs, x_axis(history.runs)

    def points(attribute: str) -> tuple[tuple[float, float], ...]:
        pairs = ((x, getattr(r, attribute)) for x, r in zip(axis.xs, runs))
        return tuple((x, y) for x, y in pairs if y is not None and math.isfinite(y))

    before, after = "#ff7f0e", "#1f77b4"
    charts = [
        line_chart("Records per run", [Series("before", points("records_before"), before),
                                       Series("after", points("records_after"), after)], axis, "records"),
        line_chart("Bytes per run", [Series("before", points("bytes_before"), before),
                                     Series("after", points("bytes_after"), after)], axis, "bytes", "bytes"),
        line_chart("Offsets after each run", [Series("log start", points("log_start"), "#2ca02c", step=True),
                                              Series("checkpoint", points("checkpoint"), "#9467bd", step=True),
                                              Series("log end", points("log_end"), "#8c564b", step=True)],
                   axis, "offset"),
    ]
    ratio = [Series("dirty ratio", points("dirty_ratio"), after)]
    if history.threshold is not None and ratio[0].points:
        ratio.append(Series(f"threshold {history.threshold:g}",
                            ((axis.lo, history.threshold), (axis.hi, history.threshold)),
                            "#d62728", dashed=True, markers=False))
    charts.append(line_chart("Dirty ratio before compaction", ratio, axis, "dirty ratio", "ratio"))
    charts.append(line_chart("max-compaction-delay (KIP-354)",
                             [Series("delay", points("max_compaction_delay_ms"), "#d62728", step=True)],
                             axis, "delay", "duration"))
    events = []
    for x, run in zip(axis.xs, runs):
        if run.compact_due is None:
            continue
        when = f"run {run.run_id} at {_when(run.now_ms)}"
        if not run.compact_due:
            events.append((x, "not_due", f"not due, {when}"))
        for reason in run.reasons if run.compact_due else ():
            events.append((x, reason, f"{reason}{' (trigger)' if reason == run.trigger else ''}, {when}"))
    charts.append(event_chart("What triggered compaction", events, axis))
    return charts


# ---------------------------------------------------------------------- HTML templates
CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d2733;
       margin: 0 auto; padding: 20px 28px 40px; max-width: 1500px; background: #f7f8fa; }
h1 { font-size: 24px; margin: 4px 0 2px; } h2 { font-size: 18px; margin: 28px 0 8px; }
a { color: #0b5cad; } .meta { color: #5b6776; margin: 0 0 12px; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid #dde2e8; }
th, td { padding: 5px 9px; border-bottom: 1px solid #e6e9ee; text-align: left; vertical-align: top; }
th { background: #eef1f5; font-weight: 600; white-space: nowrap; }
td.name, td.when { white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.failed td { background: #fdecec; } tr.failed td:first-child { box-shadow: inset 4px 0 #c62828; }
tr.run-start td { border-top: 2px solid #c9d1db; } td.run { background: #fff !important; box-shadow: none !important;
  white-space: nowrap; }
td.names { min-width: 230px; overflow-wrap: break-word; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; }
.badge.passed { background: #e3f4e6; color: #1b6e2a; } .badge.failed { background: #c62828; color: #fff; }
.badge.error { background: #8e24aa; color: #fff; } .badge.skipped { background: #eceff3; color: #5b6776; }
.guarantees { color: #b71c1c; font-weight: 600; }
.alert { background: #fdecec; border: 1px solid #e5a4a4; border-left: 6px solid #c62828; padding: 10px 14px;
         margin: 12px 0; } .alert ul { margin: 4px 0 0; }
.note { background: #fff; border: 1px solid #dde2e8; padding: 10px 14px; }
.empty-site { background: #fff; border: 1px dashed #aab4c0; padding: 28px; text-align: center; color: #5b6776; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 14px; }
.chart { width: 100%; height: auto; background: #fff; border: 1px solid #dde2e8; }
.chart .title { font: 600 14px system-ui, sans-serif; fill: #1d2733; }
.chart .legend, .chart .tick { font: 11px system-ui, sans-serif; fill: #3d4854; }
.chart .axis-label { font: 12px system-ui, sans-serif; fill: #5b6776; }
.chart .empty { font: italic 13px system-ui, sans-serif; fill: #8a95a3; }
.chart .axis { stroke: #6b7683; } .chart .grid { stroke: #e6e9ee; }
.facts { display: flex; flex-wrap: wrap; gap: 8px 24px; background: #fff; border: 1px solid #dde2e8;
         padding: 10px 14px; } .facts div span { color: #5b6776; margin-right: 4px; }
td.msg { min-width: 240px; max-width: 460px; word-break: break-word; font-size: 12px; }
td.msg pre { white-space: pre-wrap; margin: 4px 0 0; } code { font-size: 12px; }
.small { font-size: 12px; color: #5b6776; } .scroll { overflow-x: auto; }
"""


def _page(title: str, body: str) -> str:
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{escape(title)}</title><style>{CSS}</style></head>\n<body>\n{body}\n'
            f'<p class="small">Generated by topiclake at {generated}.</p>\n</body></html>\n')


def _badge(outcome: str) -> str:
    return f'<span class="badge {escape(outcome)}">{escape(outcome)}</span>'


def _href(path: str) -> str:
    return escape(quote(path))


def _guarantees(names, separator: str = "<br>") -> str:
    """Failed guarantee names in red, one a line unless told otherwise."""
    return f'<span class="guarantees">{separator.join(escape(n) for n in names)}</span>' if names else ""


def _row(cells: list[str], css: str = "") -> str:
    opening = f'<tr class="{css}">' if css else "<tr>"
    return opening + "".join(cells) + "</tr>"


def _td(text: str, css: str = "") -> str:
    """A cell of already-escaped HTML."""
    return f'<td class="{css}">{text}</td>' if css else f"<td>{text}</td>"


def _table(headers: list[str], rows: list[str]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def index_page(warehouse: Warehouse, partitions: list[PartitionHistory], runs: list[RunSummary],
               data_docs: str | None, data_docs_note: str) -> str:
    body = [f"<h1>topiclake report</h1><p class=\"meta\">Warehouse <code>{escape(warehouse.root)}</code> · "
            f"{len(partitions)} partition(s) · {len(runs)} run(s) in the history</p>"]
    failing = [(p, p.last_validated) for p in partitions
               if p.last_validated is not None and p.last_validated.validation in ("failed", "error")]
    if failing:
        items = "".join(f'<li><a href="{_href(p.page)}">{escape(p.name)}</a>: {_badge(run.validation)} '
                        f'{_guarantees(run.failed_guarantees, ", ")} <span class="small">(run {escape(run.run_id)}, '
                        f'{escape(_when(run.now_ms))})</span></li>' for p, run in failing)
        body.append(f'<div class="alert"><strong>{len(failing)} partition(s) failed their last validation</strong>'
                    f"<ul>{items}</ul></div>")
    if data_docs:
        body.append(f'<p class="note">Validation results: <a href="{_href(data_docs)}">Great Expectations Data Docs'
                    f"</a></p>")
    else:
        body.append(f'<p class="note">Validation results: {escape(data_docs_note)}</p>')
    if not partitions:
        body.append('<div class="empty-site"><h2>No maintenance history yet</h2><p>Run <code>topiclake maintain'
                    '</code>, then <code>topiclake report</code> again.</p></div>')
        return _page("topiclake report", "\n".join(body))
    body.append("<h2>Partitions</h2>")
    body.append(_table(["partition", "last run", "log start", "log end", "checkpoint", "records", "bytes",
                        "data files", "dirty ratio (last run)", "last trigger", "last validation", "failed guarantees"],
                       [_partition_line(p) for p in partitions]))
    body.append("<h2>Last runs</h2>")
    lines = []
    for run in runs[:RECENT_RUNS]:
        failed = ", ".join(run.failed)
        lines.append(_row([_td(f"<code>{escape(run.run_id)}</code>"), _td(escape(_when(run.now_ms)), "when"),
                           _td(escape(", ".join(sorted(run.stages, key=_stage_rank)))),
                           _td(escape(str(len(run.partitions))), "num"), _td(_badge(run.outcome)),
                           _td(f'<span class="guarantees">{escape(failed)}</span>' if failed else "")],
                          "failed" if run.outcome in ("failed", "error") else ""))
    body.append(_table(["run", "now", "stages", "partitions", "outcome", "failed partitions"], lines))
    if len(runs) > RECENT_RUNS:
        body.append(f'<p class="small">{len(runs) - RECENT_RUNS} older run(s) not listed.</p>')
    return _page("topiclake report", "\n".join(body))


def _partition_line(p: PartitionHistory) -> str:
    checked = p.last_validated
    outcome = checked.validation if checked else "skipped"
    guarantees = checked.failed_guarantees if checked else ()
    return _row([
        _td(f'<a href="{_href(p.page)}">{escape(p.name)}</a>', "name"), _td(escape(_when(p.runs[-1].now_ms)), "when"),
        _td(escape(_count(p.latest("log_start"))), "num"), _td(escape(_count(p.latest("log_end"))), "num"),
        _td(escape(_count(p.latest("checkpoint"))), "num"), _td(escape(_count(p.latest("records_after"))), "num"),
        _td(escape(_bytes(p.latest("bytes_after"))), "num"), _td(escape(_count(p.latest("files"))), "num"),
        _td(escape(_ratio(p.latest("dirty_ratio"))), "num"),
        _td(escape(p.latest("trigger") or "-")), _td(_badge(outcome)), _td(_guarantees(guarantees)),
    ], "failed" if outcome in ("failed", "error") else "")


def partition_page(p: PartitionHistory) -> str:
    latest = p.runs[-1]
    checked = p.last_validated
    body = [f'<p><a href="../index.html">← all partitions</a></p><h1>{escape(p.name)}</h1>',
            f'<p class="meta">{len(p.runs)} run(s) from {escape(_when(p.runs[0].now_ms))} to '
            f"{escape(_when(latest.now_ms))} (now, UTC)</p>"]
    if checked is not None and checked.validation in ("failed", "error"):
        body.append(f'<div class="alert"><strong>Last validation {escape(checked.validation)}</strong> in run '
                    f"<code>{escape(checked.run_id)}</code> at {escape(_when(checked.now_ms))}: "
                    f"{_guarantees(checked.failed_guarantees, ', ') or 'see the stage rows below'}</div>")
    facts = [("log start", _count(p.latest("log_start"))), ("log end", _count(p.latest("log_end"))),
             ("checkpoint", _count(p.latest("checkpoint"))), ("records", _count(p.latest("records_after"))),
             ("bytes", _bytes(p.latest("bytes_after"))), ("data files", _count(p.latest("files"))),
             ("dirty ratio at last run", _ratio(p.latest("dirty_ratio"))),
             ("threshold", "-" if p.threshold is None else f"{p.threshold:g}"),
             ("last trigger", p.latest("trigger") or "-")]
    body.append('<div class="facts">' + "".join(f"<div><span>{escape(k)}</span>{escape(v)}</div>" for k, v in facts)
                + "</div>")
    body.append('<h2>History</h2><div class="charts">' + "".join(partition_charts(p)) + "</div>")
    body.append("<h2>Stage rows</h2>")
    rows = [_stage_line(run, row, first=i == 0) for run in reversed(p.runs) for i, row in enumerate(run.rows)]
    body.append(_table(["run", "stage", "trigger", "versions", "records", "removed", "validation",
                        "failed guarantees", "message"], rows))
    return _page(f"{p.name} · topiclake report", "\n".join(body))


def _stage_line(run: RunPoint, r: dict, first: bool) -> str:
    """One stage row; the first of its run carries the run's cell, spanning the run's rows."""
    state = "committed" if r["committed"] else ("not due" if r["due"] is False else "no commit")
    trigger = r["trigger"] or ", ".join(r["reasons"] or ()) or "-"
    removed = [] if r["removed_records"] is None else [f"{_count(r['removed_records'])} rec", _bytes(r["removed_bytes"])]
    if r["stamped_tombstones"]:
        removed.append(f"{r['stamped_tombstones']} stamped")
    validation = r["validation"] if r["stage"] != "error" else "error"
    cells = [
        _td(f'{escape(r["stage"])}<br><span class="small">{escape(state)}</span>'), _td(escape(trigger)),
        _td(escape(_span(r["version_before"], r["version_after"], str_or_dash)), "num"),
        _td(escape(_span(r["records_before"], r["records_after"])), "num"), _td("<br>".join(map(escape, removed)) or "-", "num"),
        _td(_badge(validation)), _td(_guarantees(r["failed_guarantees"] or ()), "names"),
        _td(_message(r["message"]), "msg"),
    ]
    if first:
        cells.insert(0, f'<td class="run" rowspan="{len(run.rows)}"><code>{escape(run.run_id)}</code><br>'
                        f'<span class="small">{escape(_when(run.now_ms))}</span></td>')
    css = " ".join(c for c in ("run-start" if first else "", "failed" if validation in ("failed", "error") else "") if c)
    return _row(cells, css)


def str_or_dash(value) -> str:
    return "-" if value is None else str(value)


def _message(text: str | None) -> str:
    if not text:
        return ""
    if len(text) <= 160 and "\n" not in text:
        return escape(text)
    first = text.strip().splitlines()[0][:120] if text.strip() else ""
    return f"<details><summary>{escape(first)} …</summary><pre>{escape(text)}</pre></details>"


# ----------------------------------------------------------------------------- output
def _output_folder(warehouse: Warehouse, output: str | None) -> str:
    if output is None:
        if not warehouse.is_local:
            raise ArgumentError(f"--output: the warehouse {warehouse.root} is not a local folder; "
                                "give a local folder for the report with --output")
        output = warehouse.report_root
    elif not Warehouse(output).is_local:
        raise ArgumentError(f"--output: the report is written with local file access; {output!r} is not a local path")
    if output.startswith("file:"):
        output = output[len("file:"):]
    return os.path.abspath(output)


def _copy_data_docs(warehouse: Warehouse, folder: str) -> tuple[str | None, str]:
    """Copy the Data Docs site into ``<folder>/data_docs``; (its index relative to folder, or None; a note)."""
    try:
        index = gx_project.build_data_docs(warehouse)
    except Exception as error:  # noqa: BLE001 - the history is still worth a report without the Data Docs
        return None, f"Data Docs could not be built ({type(error).__name__}: {error})"
    if index is None:
        return None, "no validations yet"
    target = os.path.join(folder, "data_docs")
    if os.path.isdir(target):
        shutil.rmtree(target)
    shutil.copytree(os.path.dirname(index), target)
    _add_offline_style(target)
    return "data_docs/" + os.path.basename(index), ""


#: Data Docs take Bootstrap and their scripts from CDNs; a reader offline would get bare
#: HTML. This small sheet, local and linked after theirs, keeps the pages readable then.
OFFLINE_CSS = """
body { font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1b2330;
       background: #f7f8fa; margin: 0 24px 24px; }
a { color: #0b5cab; }
img[src*="gx_logo"], img[alt="Great Expectations"] { display: none; }
table { border-collapse: collapse; margin: 6px 0 14px; background: #fff; }
th, td { border: 1px solid #d9dee6; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eef1f5; }
h1, h2, h3, h4, h5, h6 { font-weight: 600; margin: 18px 0 6px; }
h5, h6 { font-size: 15px; }
ol.breadcrumb, ul { padding-left: 20px; }
.alert-danger, .text-danger, .fa-times { color: #b3261e; }
.fa-check-circle, .text-success { color: #1a7f37; }
"""


def _add_offline_style(folder: str) -> None:
    """Write the offline sheet into the copied Data Docs and link it from every page."""
    sheet = os.path.join(folder, "topiclake-offline.css")
    _write(sheet, OFFLINE_CSS.lstrip())
    for directory, _, names in os.walk(folder):
        for name in names:
            if not name.endswith(".html"):
                continue
            page = os.path.join(directory, name)
            relative = os.path.relpath(sheet, directory).replace(os.sep, "/")
            with open(page, encoding="utf-8") as handle:
                text = handle.read()
            link = f'<link rel="stylesheet" href="{relative}">'
            if link not in text and "</head>" in text:
                _write(page, text.replace("</head>", link + "\n</head>", 1))


def _write(path: str, text: str) -> None:
    """Write a page whole or not at all: a crash mid-write leaves the previous page."""
    partial = f"{path}.{os.getpid()}.partial"
    with open(partial, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(partial, path)


def write_report(spark, warehouse: Warehouse, output: str | None = None) -> str:
    """Write the report site into ``output`` (default ``<warehouse>/_topiclake/report``); its index.html."""
    folder = _output_folder(warehouse, output)
    partitions, runs = shape(read_history(spark, warehouse))
    for p in partitions:
        p.threshold = dirty_ratio_threshold(spark, warehouse, p.topic, p.partition)
    os.makedirs(os.path.join(folder, "partitions"), exist_ok=True)
    faults.reached("report.before_write", folder=folder)
    data_docs, note = _copy_data_docs(warehouse, folder)
    for p in partitions:
        _write(os.path.join(folder, p.page), partition_page(p))
    index = os.path.join(folder, "index.html")
    _write(index, index_page(warehouse, partitions, runs, data_docs, note))
    faults.reached("report.after_write", folder=folder)
    return index
