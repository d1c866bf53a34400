"""The Great Expectations project of a warehouse: where suites and validation results live.

A file-backed GE project under ``<warehouse>/_topiclake/gx`` keeps every validation
result the guarantees produce, so ``report`` can render them as Data Docs later. For a
warehouse in object storage, the project lives in a local folder
(``$TOPICLAKE_GX_ROOT``, default ``~/.topiclake/gx/<warehouse hash>``), since GE's file
stores want a local path.
"""

from __future__ import annotations

import hashlib
import os
import threading

from framework.log.warehouse import Warehouse

_contexts: dict[str, object] = {}
_lock = threading.Lock()


def project_root(warehouse: Warehouse) -> str:
    """The folder that holds the GE project (``gx/``) of ``warehouse``."""
    if warehouse.is_local:
        root = warehouse.internal_root
        return root[len("file:"):] if root.startswith("file:") else root
    base = os.environ.get("TOPICLAKE_GX_ROOT", os.path.join(os.path.expanduser("~"), ".topiclake", "gx"))
    return os.path.join(base, hashlib.sha256(warehouse.root.encode()).hexdigest()[:16])


def context(warehouse: Warehouse):
    """The warehouse's file-backed GE context (one per process and project)."""
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


def build_data_docs(warehouse: Warehouse) -> str | None:
    """Render every stored validation result as Data Docs; the index page, or None if none exist."""
    validations = os.path.join(project_root(warehouse), "gx", "uncommitted", "validations")
    if not os.path.isdir(validations):
        return None
    context(warehouse).build_data_docs()
    index = data_docs_index(warehouse)
    return index if os.path.exists(index) else None
