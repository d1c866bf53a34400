"""The report: the maintenance history and the validation results as a static HTML site.

``write_report`` writes, into one folder that opens from the file system with no server
and no network (styles inline, charts inline SVG drawn by matplotlib, no scripts):

- ``index.html``: the latest state of every partition, the failed validations, a link to
  the Great Expectations Data Docs, and the last runs, newest first;
- ``partitions/<topic>-<partition>.html``: the partition's history plotted (records,
  bytes, offsets, dirty ratio, max-compaction-delay, triggers) and every stage row;
- ``data_docs/``: a copy of the Data Docs site, replaced on every write, so the folder is
  self-contained.

The history is read and shaped in ``report.data``, the charts drawn in ``report.charts``;
the pages are the Jinja templates in ``framework/report/templates`` (autoescaped: topic names, run ids and messages are data).
matplotlib is imported only when a chart is drawn, so the other verbs never load it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from datetime import datetime, timezone

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from framework import faults
from framework.checks import gx_project
from framework.errors import ArgumentError
from framework.log.warehouse import Warehouse
from framework.report.charts import partition_charts
from framework.report.data import FILTERS, PartitionHistory, RunSummary, dirty_ratio_threshold, read_history, shape

__all__ = ["index_page", "partition_page", "write_report"]

#: Runs listed on the index page.
RECENT_RUNS = 50


# ------------------------------------------------------------------------------ pages
#: Templates ship inside the package (setup.cfg package_data); PackageLoader also reads
#: them from a zipped wheel, as spark-submit --py-files gives it.
PAGES = Environment(loader=PackageLoader("framework.report", "templates"), autoescape=select_autoescape(["html"]),
                    undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
PAGES.filters.update(FILTERS)


def _render(template: str, **data) -> str:
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return PAGES.get_template(template).render(generated=generated, **data)


def index_page(warehouse: Warehouse, partitions: list[PartitionHistory], runs: list[RunSummary],
               data_docs: str | None, data_docs_note: str) -> str:
    failing = [(p, p.last_validated) for p in partitions
               if p.last_validated is not None and p.last_validated.validation in ("failed", "error")]
    return _render("index.html", warehouse=warehouse.root, partitions=partitions, runs=runs[:RECENT_RUNS],
                   older_runs=max(0, len(runs) - RECENT_RUNS), run_count=len(runs), failing=failing,
                   data_docs=data_docs, data_docs_note=data_docs_note)


def partition_page(p: PartitionHistory) -> str:
    return _render("partition.html", p=p, charts=partition_charts(p))


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
    """Copy the Data Docs site into ``<folder>/data_docs``; (its index relative to folder, or
    None; a note). A copy built from the GE project as it is now is kept as it is: a run with
    no new validation (an idle maintain) then writes its report without importing Great
    Expectations (2 to 4 s of CPU) or rebuilding the site."""
    target = os.path.join(folder, "data_docs")
    stamp = os.path.join(target, DATA_DOCS_STAMP)
    source = gx_project.project_digest(warehouse)
    digest = None if source is None else f"{_TEMPLATES_DIGEST}\n{source}"
    index = os.path.join(target, "index.html")
    if digest is not None and os.path.exists(index) and _read(stamp) == digest:
        return "data_docs/index.html", ""
    try:
        built = gx_project.build_data_docs(warehouse)
    except Exception as error:  # noqa: BLE001 - the history is still worth a report without the Data Docs
        return None, f"Data Docs could not be built ({type(error).__name__}: {error})"
    if built is None:
        return None, "no validations yet"
    if os.path.isdir(target):
        shutil.rmtree(target)
    shutil.copytree(os.path.dirname(built), target)
    _add_offline_style(target)
    if digest is not None:  # the project as the build read it: a validation since makes it differ
        _write(stamp, digest)
    return "data_docs/" + os.path.basename(built), ""


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


#: In the report's copy of the Data Docs: what the copy was built from (``_copy_data_docs``).
DATA_DOCS_STAMP = ".topiclake-built-from"


def _add_offline_style(folder: str) -> None:
    """Data Docs take Bootstrap and their scripts from CDNs; a reader offline would get bare
    HTML. A small local sheet (templates/offline.css), linked after theirs from every page,
    keeps them readable then."""
    sheet = os.path.join(folder, "topiclake-offline.css")
    _write(sheet, PAGES.loader.get_source(PAGES, "offline.css")[0])
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


#: Pages drawn side by side in worker processes once this many need drawing. A page's six
#: charts cost about 0.2 s of matplotlib, and an idle run over a big topic adds a "not due"
#: row to every partition's history, so every page is drawn again; a worker's start (a
#: fresh interpreter importing matplotlib) costs about a second.
PAGES_FOR_WORKERS = 16
#: At most this many workers (and never more than the machine's cores).
MAX_PAGE_WORKERS = 4


def _stamp(p: PartitionHistory) -> bytes:
    """What a partition's page is drawn from: its history, the templates and this version."""
    digest = hashlib.sha256(f"{_TEMPLATES_DIGEST}\n{p!r}".encode()).hexdigest()
    return f"<!-- topiclake page {digest} -->\n".encode()  # last, so the doctype stays first


def _is_current(path: str, stamp: bytes) -> bool:
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - len(stamp)))
            return handle.read() == stamp
    except FileNotFoundError:
        return False


def _draw_page(page: tuple[str, PartitionHistory, bytes]) -> None:
    path, p, stamp = page
    _write(path, partition_page(p) + stamp.decode())


def _write_partition_pages(folder: str, partitions: list[PartitionHistory]) -> None:
    """Draw a partition's page only when its history changed since the page was written
    (most partitions of a big topic are idle), side by side in worker processes when many
    changed (:data:`PAGES_FOR_WORKERS`). The workers are fresh interpreters ("spawn"): this
    process may hold a JVM and its threads, which a fork would copy mid-flight."""
    due = [(path, p, stamp) for p in partitions
           if not _is_current(path := os.path.join(folder, p.page), stamp := _stamp(p))]
    workers = min(MAX_PAGE_WORKERS, os.cpu_count() or 1)
    if len(due) < PAGES_FOR_WORKERS or workers < 2:
        for page in due:
            _draw_page(page)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_draw_page, due, chunksize=max(1, len(due) // (workers * 4))))


def _templates_digest() -> str:
    """What the pages are drawn with: this version of topiclake and its templates."""
    from framework import __version__

    sources = "".join(PAGES.loader.get_source(PAGES, name)[0] for name in sorted(PAGES.list_templates()))
    return hashlib.sha256(f"{__version__}\n{sources}".encode()).hexdigest()


_TEMPLATES_DIGEST = _templates_digest()


def _write(path: str, text: str) -> None:
    """Write a page whole or not at all: a crash mid-write leaves the previous page."""
    partial = f"{path}.{os.getpid()}.partial"
    with open(partial, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(partial, path)


def write_report(spark, warehouse: Warehouse, output: str | None = None) -> str:
    """Write the report site into ``output`` (default ``<warehouse>/_topiclake/report``); its
    index.html. ``spark`` is a Spark session or a function that returns one: a local
    warehouse is read without it (``framework.report.data``)."""
    folder = _output_folder(warehouse, output)
    partitions, runs = shape(read_history(spark, warehouse))
    for p in partitions:
        p.threshold = dirty_ratio_threshold(spark, warehouse, p.topic, p.partition)
    os.makedirs(os.path.join(folder, "partitions"), exist_ok=True)
    faults.reached("report.before_write", folder=folder)
    data_docs, note = _copy_data_docs(warehouse, folder)
    _write_partition_pages(folder, partitions)
    index = os.path.join(folder, "index.html")
    _write(index, index_page(warehouse, partitions, runs, data_docs, note))
    faults.reached("report.after_write", folder=folder)
    return index
