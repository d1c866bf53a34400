"""The HTML report: built from real history rows in a real Delta table, parsed back with html.parser."""

from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path

import pytest

from framework import gx_project
from framework.errors import ArgumentError
from framework.history import HistoryRow, MaintenanceHistory
from framework.report import write_report
from framework.warehouse import Warehouse

DAY_MS = 86_400_000
START_MS = 1_700_000_000_000
SCRIPT = "<script>alert('x')</script>"
#: topic -> partitions; each partition gets RUNS runs of compact, retain and vacuum.
TOPICS = {"orders": 2, "users.v1": 2}
RUNS = 4
#: The run where orders-1 fails a guarantee.
FAILING = ("orders", 1, RUNS - 1)
FAILED_GUARANTEES = ["G2 latest value per key kept", "G5 offsets & order preserved"]


class Page(HTMLParser):
    """The links, tags and text of one HTML page."""

    def __init__(self, path: Path):
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []
        self.feed(path.read_text(encoding="utf-8"))

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


def test_each_partition_has_a_page_with_charts(site):
    index = Page(site / "index.html")
    for topic, partitions in TOPICS.items():
        for partition in range(partitions):
            page = site / "partitions" / f"{topic}-{partition}.html"
            assert f"partitions/{topic}-{partition}.html" in index.links
            parsed = Page(page)
            assert parsed.tags.count("svg") >= 5, page.name
            assert parsed.tags.count("circle") >= RUNS, f"{page.name}: charts without points"
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


def test_a_uri_warehouse_needs_an_output_folder(spark):
    with pytest.raises(ArgumentError, match="--output"):
        write_report(spark, Warehouse("s3a://bucket/warehouse"))
    with pytest.raises(ArgumentError, match="--output"):
        write_report(spark, Warehouse("s3a://bucket/warehouse"), "s3a://bucket/report")


def test_runs_fold_stage_rows_into_one_point_per_partition():
    from framework.report import shape

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
    from framework.maintenance import Maintenance
    from framework.produce import produce
    from framework.records import parse_records
    from framework.spec import parse_spec
    from framework.topic import Topic

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
