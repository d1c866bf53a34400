"""The HTML report: built from real history rows in a real Delta table, parsed back with html.parser."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from framework.checks import gx_project
from framework.errors import ArgumentError
from framework.log.history import HistoryRow, MaintenanceHistory
from framework.log.warehouse import Warehouse
from framework.report.site import write_report
from tests.support.cli_process import printed_with_no_jvm

DAY_MS = 86_400_000
START_MS = 1_700_000_000_000
SCRIPT = "<script>alert('x')</script>"
#: topic -> partitions; each partition gets RUNS runs of compact, retain and vacuum.
TOPICS = {"orders": 2, "users.v1": 2}
RUNS = 4
#: The run where orders-1 fails a guarantee.
FAILING = ("orders", 1, RUNS - 1)
FAILED_GUARANTEES = ["G2 latest value per key kept", "G5 offsets & order preserved"]
#: Each partition page's charts, by title, with the legend entries they must show.
CHARTS = {"Records per run": ["before", "after"], "Bytes per run": ["before", "after"],
          "Offsets after each run": ["log start", "checkpoint", "log end"],
          "Dirty ratio before compaction": ["dirty ratio"], "max-compaction-delay (KIP-354)": ["delay"],
          "What triggered compaction": ["dirty ratio", "max lag", "tombstones", "forced", "not due"]}
#: The only URLs a page may hold: the SVG namespaces matplotlib declares (names, never fetched).
NAMESPACES = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}


class Page(HTMLParser):
    """The links, tags and text of one HTML page (a file, or HTML text)."""

    def __init__(self, page: Path | str):
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []
        self.feed(page.read_text(encoding="utf-8") if isinstance(page, Path) else page)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.links.append(value)

    def handle_data(self, data):
        self.text.append(data)

    @property
    def all_text(self) -> str:
        return " ".join(" ".join(self.text).split())


def history_rows() -> list[HistoryRow]:
    rows = []
    for run in range(RUNS):
        run_id, now = f"run{run:03d}", START_MS + run * DAY_MS
        for topic, partitions in TOPICS.items():
            for partition in range(partitions):
                records = 100 + 50 * run + 10 * partition
                removed = 30 + run
                failing = (topic, partition, run) == FAILING
                due = run != 2  # run 2: compaction not due
                common = dict(run_id=run_id, run_started_ms=now + 5, now_ms=now, topic=topic, partition=partition)
                rows.append(HistoryRow(
                    **common, stage="compact", trigger=["dirty_ratio", "max_lag", None, "forced"][run],
                    reasons=[["dirty_ratio", "max_lag"], ["max_lag"], [], ["forced"]][run], due=due,
                    committed=due, version_before=3 * run, version_after=3 * run + 1 if due else None,
                    records_before=records, records_after=records - removed if due else records,
                    bytes_before=records * 40, bytes_after=(records - removed) * 40 if due else records * 40,
                    log_start_before=10 * run, log_start_after=10 * run, log_end_offset=200 * (run + 1),
                    checkpoint_before=150 * run, checkpoint_after=200 * (run + 1) - 20,
                    dirty_ratio=[0.8, 0.3, 0.1, 0.45][run], max_compaction_delay_ms=[0, 3_600_000, 0, 0][run],
                    removed_records=removed if due else None, removed_bytes=removed * 40 if due else None,
                    validation="failed" if failing else "passed" if due else "skipped",
                    failed_guarantees=FAILED_GUARANTEES if failing else [],
                    message=f"offset 7 lost {SCRIPT}" if failing else None,
                ))
                rows.append(HistoryRow(
                    **common, stage="retain", reasons=["retention.ms"], due=True, committed=True,
                    version_before=3 * run + 1, version_after=3 * run + 2, log_start_before=10 * run,
                    log_start_after=10 * run + 5, removed_records=5, removed_bytes=200, validation="passed",
                ))
                rows.append(HistoryRow(**common, stage="vacuum", version_before=3 * run + 2,
                                       version_after=3 * run + 2, message="window 604800000 ms; purged=False"))
    return rows


@pytest.fixture(scope="module")
def site(spark, tmp_path_factory) -> Path:
    """A report of 2 topics x 2 partitions over RUNS runs, one of them failing a guarantee."""
    warehouse = Warehouse.resolve(str(tmp_path_factory.mktemp("report") / "warehouse"))
    MaintenanceHistory(spark, warehouse).append(history_rows())
    index = write_report(spark, warehouse)
    assert index == os.path.join(warehouse.report_root, "index.html")
    return Path(index).parent


def pages(site: Path) -> list[Path]:
    return [site / "index.html", *sorted((site / "partitions").glob("*.html"))]


def test_every_local_link_resolves(site):
    for page in pages(site):
        for link in Page(page).links:
            assert not link.startswith(("http:", "https:", "//")), f"{page.name} links to the network: {link}"
            target = link.split("#")[0]
            if target:
                assert (page.parent / target).is_file(), f"{page.name}: dead link {link}"


def test_pages_are_static(site):
    for page in pages(site):
        parsed = Page(page)
        assert "script" not in parsed.tags, f"{page.name} has a script"
        assert "link" not in parsed.tags, f"{page.name} loads a stylesheet"
        urls = set(re.findall(r"[a-z]+://[^\s\"'<>)]*", page.read_text(encoding="utf-8")))
        assert urls <= NAMESPACES, f"{page.name} names the network: {urls - NAMESPACES}"


def test_each_partition_has_a_page_with_charts(site):
    index = Page(site / "index.html")
    for topic, partitions in TOPICS.items():
        for partition in range(partitions):
            page = site / "partitions" / f"{topic}-{partition}.html"
            assert f"partitions/{topic}-{partition}.html" in index.links
            parsed = Page(page)
            assert parsed.tags.count("svg") == len(CHARTS), page.name  # one inline SVG per chart
            charts = re.findall(r"<svg.*?</svg>", page.read_text(encoding="utf-8"), re.S)
            for chart, (title, legend) in zip(charts, CHARTS.items()):
                text = " ".join(Page(chart).text)  # text stays text (svg.fonttype none)
                assert title in text and all(label in text for label in legend), f"{page.name}: {title}"
                assert "now (UTC)" in text, f"{page.name}: {title} without its time axis"
            # a marker per run and series: records before and after, RUNS runs
            assert charts[0].count("<use ") >= 2 * RUNS, f"{page.name}: charts without points"
            assert f"run{RUNS - 1:03d}" in parsed.all_text


def test_failed_validation_stands_out_on_the_index(site):
    index = Page(site / "index.html")
    text = index.all_text
    for guarantee in FAILED_GUARANTEES:
        assert guarantee in text
    assert "1 partition(s) failed their last validation" in text
    raw = (site / "index.html").read_text(encoding="utf-8")
    assert '<tr class="failed">' in raw
    assert "G5 offsets &amp; order preserved" in raw


def test_user_strings_are_escaped(site):
    for page in pages(site):
        assert "<script>" not in page.read_text(encoding="utf-8"), page.name
    failing = site / "partitions" / f"{FAILING[0]}-{FAILING[1]}.html"
    assert "&lt;script&gt;" in failing.read_text(encoding="utf-8")
    assert SCRIPT in Page(failing).all_text  # shown to the reader as text


def test_last_runs_are_newest_first(site):
    raw = (site / "index.html").read_text(encoding="utf-8")
    positions = [raw.index(f"<code>run{run:03d}</code>") for run in reversed(range(RUNS))]
    assert positions == sorted(positions)


def test_no_validations_means_no_dead_link(site):
    text = Page(site / "index.html").all_text
    assert "no validations yet" in text
    assert not (site / "data_docs").exists()


def test_empty_warehouse_says_so(spark, warehouse, tmp_path):
    index = Path(write_report(spark, warehouse, str(tmp_path / "out")))
    assert index == tmp_path / "out" / "index.html"
    parsed = Page(index)
    assert "No maintenance history yet" in parsed.all_text
    assert "no validations yet" in parsed.all_text
    assert parsed.links == []


def test_data_docs_are_copied_and_linked(spark, warehouse, tmp_path, monkeypatch):
    docs = tmp_path / "gx_site"
    (docs / "static").mkdir(parents=True)
    (docs / "index.html").write_text("<html><head></head>docs</html>")
    (docs / "validations" / "t").mkdir(parents=True)
    (docs / "validations" / "t" / "run.html").write_text("<html><head></head>a run</html>")
    (docs / "static" / "style.css").write_text("body {}")
    monkeypatch.setattr(gx_project, "build_data_docs", lambda wh: str(docs / "index.html"))
    index = Path(write_report(spark, warehouse, str(tmp_path / "out")))
    assert "data_docs/index.html" in Page(index).links
    copied = index.parent / "data_docs"
    assert (copied / "static" / "style.css").is_file()
    # the offline sheet is there and every page links it by a path that resolves
    assert (copied / "topiclake-offline.css").is_file()
    assert '<link rel="stylesheet" href="topiclake-offline.css">' in (copied / "index.html").read_text()
    assert '<link rel="stylesheet" href="../../topiclake-offline.css">' in (copied / "validations" / "t" / "run.html").read_text()


def test_data_docs_are_rebuilt_only_after_a_new_validation(spark, warehouse, monkeypatch):
    """An idle run validates nothing: its report keeps the Data Docs copy built from the same
    GE project (no Great Expectations import); a run that validated rebuilds it."""
    from framework.checks.guarantees import Guarantees
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.topic import Topic
    from framework.spec import parse_spec
    from framework.stages.maintenance import Maintenance

    spec = parse_spec({"topic": "docs", "partitions": 1, "config": {"cleanup.policy": "compact"}}, "test")
    topic = Topic(spark, warehouse, spec)

    def validated_run(now: int) -> None:
        raw = [{"key": "a", "value": str(now), "timestamp": now}]
        produce(topic, parse_records(list(enumerate(raw, start=1)), spec, "test"), now_ms=now)
        Maintenance(spark, warehouse, [spec], validator=Guarantees(spark, warehouse)).run(now + 1, force=True)

    validated_run(1000)
    index = Path(write_report(spark, warehouse))
    assert "data_docs/index.html" in Page(index).links
    built = (index.parent / "data_docs" / "index.html").read_text()
    calls = []

    def refused(wh):
        calls.append(wh)
        raise RuntimeError("not now")

    monkeypatch.setattr(gx_project, "build_data_docs", refused)
    Maintenance(spark, warehouse, [spec], validator=Guarantees(spark, warehouse)).run(5000)  # idle: nothing due
    index = Path(write_report(spark, warehouse))
    assert not calls and "data_docs/index.html" in Page(index).links
    assert (index.parent / "data_docs" / "index.html").read_text() == built
    validated_run(9000)
    index = Path(write_report(spark, warehouse))
    assert len(calls) == 1 and "Data Docs could not be built (RuntimeError: not now)" in Page(index).all_text


def test_a_uri_warehouse_needs_an_output_folder(spark):
    with pytest.raises(ArgumentError, match="--output"):
        write_report(spark, Warehouse("s3a://bucket/warehouse"))
    with pytest.raises(ArgumentError, match="--output"):
        write_report(spark, Warehouse("s3a://bucket/warehouse"), "s3a://bucket/report")


def test_runs_fold_stage_rows_into_one_point_per_partition():
    from framework.report.data import shape

    partitions, runs = shape([r.as_dict() for r in history_rows()])
    assert [p.name for p in partitions] == ["orders-0", "orders-1", "users.v1-0", "users.v1-1"]
    assert [r.run_id for r in runs] == [f"run{run:03d}" for run in reversed(range(RUNS))]
    first = partitions[0].runs[0]
    assert first.stages == ("compact", "retain", "vacuum")
    assert (first.records_before, first.records_after) == (100, 100 - 30 - 5)  # compaction, then retention
    assert first.log_start == 5 and first.trigger == "dirty_ratio"
    assert partitions[0].runs[2].trigger is None  # not due
    failing = partitions[1].runs[FAILING[2]]
    assert failing.validation == "failed" and list(failing.failed_guarantees) == FAILED_GUARANTEES
    assert runs[0].outcome == "failed" and runs[0].failed == ["orders-1"]


def test_end_to_end_maintenance_run_shows_on_its_partition_page(spark, warehouse):
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.topic import Topic
    from framework.spec import parse_spec
    from framework.stages.maintenance import Maintenance

    spec = parse_spec({"topic": "users", "partitions": 1,
                       "config": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.25}}, "test")
    topic = Topic(spark, warehouse, spec)
    raw = [{"key": k, "value": v, "timestamp": 0} for k, v in [("a", "1"), ("b", "1"), ("a", "2"), ("a", "3")]]
    produce(topic, parse_records(list(enumerate(raw, start=1)), spec, "test"), now_ms=0)
    run = Maintenance(spark, warehouse, [spec], validator=None).run(1000, force=True)

    index = Path(write_report(spark, warehouse))
    page = index.parent / "partitions" / "users-0.html"
    text = Page(page).all_text
    assert run.run_id in text
    assert "4 → 2" in text  # records before -> after: a and b keep their latest value
    assert "threshold 0.25" in text  # read from the table's properties
    assert "users-0" in Page(index).all_text


def test_history_and_path_strings_are_escaped_by_the_templates():
    """Autoescape: a run id, a trigger, a guarantee name and the warehouse folder are data, never markup."""
    from framework.report.data import shape
    from framework.report.site import index_page, partition_page

    rows = [r.as_dict() for r in history_rows()]
    for row in rows:
        if (row["topic"], row["partition"]) == ("orders", 0):
            row["run_id"] += SCRIPT
            if row["stage"] == "compact" and row["due"]:
                row.update(trigger=SCRIPT, validation="failed", failed_guarantees=[f"G1 {SCRIPT}"])
    partitions, runs = shape(rows)
    pages = [index_page(Warehouse(f"/tmp/{SCRIPT}/warehouse"), partitions, runs, None, SCRIPT),
             partition_page(partitions[0])]
    for html in pages:
        assert "<script" not in html
        assert "&lt;script&gt;" in html
        assert SCRIPT in Page(html).all_text  # shown to the reader as text
        assert "script" not in Page(html).tags


def test_the_same_history_draws_the_same_charts():
    """svg.hashsalt fixed and no date in the SVG: a page changes only when its data does."""
    from framework.report.charts import partition_charts
    from framework.report.data import shape

    partitions, _ = shape([r.as_dict() for r in history_rows()])
    partitions[1].threshold = 0.5
    first = partition_charts(partitions[1])
    assert first == partition_charts(partitions[1])
    assert "threshold 0.5" in Page("".join(first)).all_text  # the dashed line is in the legend
    assert not any("<dc:date" in chart or "<metadata" in chart for chart in first)


def test_a_run_without_numbers_draws_empty_charts_on_run_order():
    from framework.report.charts import partition_charts
    from framework.report.data import shape

    rows = [r.as_dict() for r in history_rows() if r.stage == "vacuum" and r.run_id == "run000"]
    partitions, _ = shape(rows[:1])
    text = Page("".join(partition_charts(partitions[0]))).all_text
    assert text.count("no data recorded") == 5 and "no compaction stage ran" in text
    assert "run (oldest first)" in text


def test_only_drawing_a_chart_loads_matplotlib():
    """The other verbs import framework.report.site's neighbours; none of them pays for matplotlib."""
    code = "import sys, framework.report.site; assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


def test_a_partition_page_is_redrawn_only_when_its_history_changed(spark, tmp_path):
    """Idle partitions cost no charts: their pages are left as they are, byte for byte."""
    warehouse = Warehouse.resolve(str(tmp_path / "warehouse"))
    history = MaintenanceHistory(spark, warehouse)
    rows = history_rows()
    history.append([r for r in rows if r.run_id != f"run{RUNS - 1:03d}"])
    folder = Path(write_report(spark, warehouse)).parent
    first = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (folder / "partitions").glob("*.html")}
    assert first and all(body.rstrip().endswith(b"-->") for _, body in first.values())

    write_report(spark, warehouse)  # nothing new: no page is rewritten
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (folder / "partitions").glob("*.html")} == first

    # one partition gains a run: only its page changes
    changed = [r for r in rows if r.run_id == f"run{RUNS - 1:03d}" and (r.topic, r.partition) == ("orders", 0)]
    assert changed
    history.append(changed)
    write_report(spark, warehouse)
    after = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (folder / "partitions").glob("*.html")}
    assert {name for name in after if after[name] != first[name]} == {"orders-0.html"}


def test_many_pages_to_draw_are_drawn_by_workers_as_one_process_draws_them(tmp_path, monkeypatch):
    """An idle run over a big topic redraws every page; past ``PAGES_FOR_WORKERS`` they are
    drawn by worker processes (fresh interpreters), byte for byte as this process draws them."""
    import concurrent.futures

    from framework.report import site
    from framework.report.data import shape

    partitions, _ = shape([r.as_dict() for r in history_rows()])
    pools = []

    class Counted(concurrent.futures.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            pools.append(args[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Counted)
    drawn = {}
    for way, at_least in (("one process", 10 ** 6), ("workers", 2)):
        monkeypatch.setattr(site, "PAGES_FOR_WORKERS", at_least)
        monkeypatch.setattr(site.os, "cpu_count", lambda: 2)
        folder = tmp_path / way
        (folder / "partitions").mkdir(parents=True)
        site._write_partition_pages(str(folder), partitions)
        drawn[way] = {p.name: re.sub(rb"Generated by topiclake at [^<]*", b"", p.read_bytes())
                      for p in (folder / "partitions").iterdir()}
    assert pools == [2] and len(drawn["workers"]) == len(partitions) == 4
    assert drawn["workers"] == drawn["one process"]


def _no_session():
    raise AssertionError("the report asked for a Spark session")


def test_a_local_history_is_read_by_arrow_as_spark_reads_it(spark, warehouse):
    """The report reads a local history by Arrow, with no Spark session, and keeps each
    partition's newest runs as Spark's ranking does (ties by run id, a run's earliest stage
    start); with the newest version's checksum gone it asks for the session and reads the
    same rows by Spark."""
    from framework.log import history
    from framework.report.data import history_by_spark, newest_runs, read_history

    def extra(run_id: str, started_ms: int, stage: str = "compact") -> HistoryRow:
        return HistoryRow(run_id=run_id, run_started_ms=started_ms, now_ms=started_ms, topic="orders", partition=0,
                          stage=stage)

    newest_ms = START_MS + 9 * DAY_MS
    MaintenanceHistory(spark, warehouse).append([
        *history_rows(),
        extra("tie-a", newest_ms), extra("tie-b", newest_ms),  # started together: the higher run id is newer
        # its retain stage started first: the run counts from there, before every other run
        extra("early", newest_ms + DAY_MS), extra("early", START_MS - DAY_MS, "retain"),
    ])

    def ordered(rows: list[dict]) -> list[dict]:
        return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["run_id"], r["stage"]))

    local = history.local_rows(warehouse)
    assert local is not None and len(local) == len(history_rows()) + 4
    runs_of_orders_0 = lambda rows: sorted({r["run_id"] for r in rows if (r["topic"], r["partition"]) == ("orders", 0)})  # noqa: E731
    for max_runs in (1, 2, 3, 500):
        by_arrow = newest_runs(local, max_runs)
        assert ordered(by_arrow) == ordered(history_by_spark(spark, warehouse, max_runs)), max_runs
        assert ordered(read_history(_no_session, warehouse, max_runs)) == ordered(by_arrow)
    assert runs_of_orders_0(newest_runs(local, 2)) == ["tie-a", "tie-b"]
    assert runs_of_orders_0(newest_runs(local, 3)) == ["run003", "tie-a", "tie-b"]
    assert "early" in runs_of_orders_0(newest_runs(local, RUNS + 3))
    assert "early" not in runs_of_orders_0(newest_runs(local, RUNS + 2))

    log = Path(warehouse.maintenance_history_path) / "_delta_log"
    max(log.glob("*.crc")).unlink()
    asked = []
    assert history.local_rows(warehouse) is None
    assert ordered(read_history(lambda: asked.append(1) or spark, warehouse)) == ordered(local)
    assert asked == [1]


def test_the_threshold_is_read_from_the_checksum_as_spark_reads_it(spark, warehouse, monkeypatch):
    from framework.log.topic import Topic
    from framework.report import data
    from framework.spec import parse_spec

    spec = parse_spec({"topic": "th", "partitions": 1,
                       "config": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.35}}, "test")
    Topic(spark, warehouse, spec).ensure()
    assert data.dirty_ratio_threshold(_no_session, warehouse, "th", 0) == 0.35
    assert data.dirty_ratio_threshold(_no_session, warehouse, "th", 1) is None  # no such table
    monkeypatch.setattr(data, "_local_properties", lambda warehouse, path: None)
    assert data.dirty_ratio_threshold(lambda: spark, warehouse, "th", 0) == 0.35


def test_report_in_a_new_process_starts_no_jvm(spark, tmp_path):
    """``topiclake report`` of a local warehouse reads it without Spark: no JVM starts, with
    a history or with none yet."""
    def report(warehouse: Warehouse, out: Path) -> str:
        printed_with_no_jvm("--warehouse", warehouse.root, "report", "--output", str(out), timeout=300)
        return Page(out / "index.html").all_text

    empty = Warehouse.resolve(str(tmp_path / "empty"))
    os.makedirs(empty.root)
    assert "No maintenance history yet" in report(empty, tmp_path / "out-empty")
    warehouse = Warehouse.resolve(str(tmp_path / "warehouse"))
    MaintenanceHistory(spark, warehouse).append(history_rows())
    assert "orders-1" in report(warehouse, tmp_path / "out")
