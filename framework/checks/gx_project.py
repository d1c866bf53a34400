"""The Great Expectations project of a warehouse: where suites and validation results live.

A file-backed GE project under ``<warehouse>/_topiclake/gx`` keeps every validation
result the guarantees produce, so ``report`` can render them as Data Docs later. The
store stays bounded: after each validation, a suite keeps its newest results only
(``RESULTS_KEPT`` of a topic's guarantees, ``RESULTS_KEPT_PER_PARTITION`` per partition of
its spec's own expectations), and Data Docs are rebuilt from what is kept. For a
warehouse in object storage, the project lives in a local folder
(``$TOPICLAKE_GX_ROOT``, default ``~/.topiclake/gx/<warehouse hash>``), since GE's file
stores want a local path.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import threading

from framework.checks import gx_import
from framework.log.warehouse import Warehouse

#: Validation results a topic's guarantees suite keeps: one result judges every check a
#: maintenance run recorded in one history append (most runs: one), so about 50 runs' worth.
RESULTS_KEPT = 50
#: Validation results a topic's spec-expectations suite keeps per partition of the topic
#: (they run per stage and partition, over its records: about 25 runs' worth of a compacted
#: and retained partition).
RESULTS_KEPT_PER_PARTITION = 50


def results_kept(partitions: int) -> int:
    """How many validation results a suite of a topic with ``partitions`` partitions keeps."""
    return RESULTS_KEPT_PER_PARTITION * partitions


#: GE's folder for one result: ``<suite path>/<run name>/<run time>/<batch>.json``.
_RUN_TIME = re.compile(r"^\d{8}T\d{6}\.\d{6}Z$")

_contexts: dict[str, object] = {}
_lock = threading.Lock()
#: Great Expectations' file-backed stores are not safe for two writers: a process validates
#: (and builds Data Docs) one at a time, while the Spark work of the checks around it,
#: most of their cost, runs side by side in the cleaner threads.
STORES = threading.RLock()


def project_root(warehouse: Warehouse) -> str:
    """The folder that holds the GE project (``gx/``) of ``warehouse``."""
    if warehouse.is_local:
        root = warehouse.internal_root
        return root[len("file:"):] if root.startswith("file:") else root
    base = os.environ.get("TOPICLAKE_GX_ROOT", os.path.join(os.path.expanduser("~"), ".topiclake", "gx"))
    return os.path.join(base, hashlib.sha256(warehouse.root.encode()).hexdigest()[:16])


def context(warehouse: Warehouse):
    """The warehouse's file-backed GE context (one per process and project)."""
    gx_import.imported()
    import great_expectations as gx

    root = project_root(warehouse)
    with _lock:
        found = _contexts.get(root)
        if found is None:
            os.makedirs(root, exist_ok=True)
            found = gx.get_context(mode="file", project_root_dir=root)
            _quiet(found)
            _contexts[root] = found
        return found


def _quiet(ctx) -> None:
    """No tqdm bars while GE computes metrics: stdout and stderr belong to the CLI."""
    from great_expectations.data_context.types.base import ProgressBarsConfig

    ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)


def data_docs_index(warehouse: Warehouse) -> str:
    """Where GE writes the Data Docs site's index page."""
    return os.path.join(project_root(warehouse), "gx", "uncommitted", "data_docs", "local_site", "index.html")


def _validations(warehouse: Warehouse) -> str:
    return os.path.join(project_root(warehouse), "gx", "uncommitted", "validations")


def prune_results(warehouse: Warehouse, suite_name: str, keep: int) -> int:
    """Delete all but the newest ``keep`` stored results of ``suite_name``; how many went.

    GE names a result's folder by its run time (UTC, fixed width), so names sort by age.
    A result another process deletes first is simply gone.
    """
    folder = os.path.join(_validations(warehouse), *suite_name.split("."))
    results = []
    for run_name in (os.listdir(folder) if os.path.isdir(folder) else []):
        parent = os.path.join(folder, run_name)
        if os.path.isdir(parent):
            results.extend((name, os.path.join(parent, name)) for name in os.listdir(parent) if _RUN_TIME.match(name))
    doomed = sorted(results, reverse=True)[max(0, keep):]
    for _, path in doomed:
        shutil.rmtree(path, ignore_errors=True)
    return len(doomed)


def project_digest(warehouse: Warehouse) -> str | None:
    """A digest of what Data Docs are built from (every file of the GE project but the site
    itself: suites, validation results, configuration; by name, size and modification
    time), or None before the first validation. Equal digests build the same site, and
    building it changes none of these files; it costs no Great Expectations import."""
    validations = _validations(warehouse)
    if not os.path.isdir(validations):
        return None
    gx_folder = os.path.dirname(os.path.dirname(validations))
    site = os.path.join(gx_folder, "uncommitted", "data_docs")
    seen = []
    for directory, folders, names in os.walk(gx_folder):
        folders[:] = [f for f in folders if os.path.join(directory, f) != site]
        for name in names:
            path = os.path.join(directory, name)
            try:
                status = os.stat(path)
            except FileNotFoundError:  # pruned while we looked: the digest differs either way
                continue
            seen.append(f"{os.path.relpath(path, gx_folder)}\t{status.st_size}\t{status.st_mtime_ns}")
    return hashlib.sha256("\n".join(sorted(seen)).encode()).hexdigest()


def build_data_docs(warehouse: Warehouse) -> str | None:
    """Render the stored validation results as Data Docs; the index page, or None if none exist.

    GE rebuilds the site's result pages from the store, so a pruned result's page goes too
    (``tests/test_metadata_bounds.py``).
    """
    validations = _validations(warehouse)
    if not os.path.isdir(validations):
        return None
    with STORES:
        context(warehouse).build_data_docs()
    index = data_docs_index(warehouse)
    return index if os.path.exists(index) else None
