"""Great Expectations imported in the background while a command's Spark session starts.

Importing Great Expectations is 2 to 3 s of Python (pandas, pydantic, its expectation
registry), and a command in a new process that judges checks or writes the report paid it
after the session had started, before its first verdict. Begun in a daemon thread as the
session starts, it runs while the main thread waits for the JVM and for its first Spark
jobs (py4j calls release the GIL). The command line starts it for the verbs that need it
(``framework.cli.context``); every use of Great Expectations waits for it first
(:func:`imported`), so that no two threads import its modules at once.
"""

from __future__ import annotations

import sys
import threading

__all__ = ["import_in_background", "imported"]

_thread: threading.Thread | None = None
_lock = threading.Lock()


def import_in_background() -> bool:
    """Start importing Great Expectations in a daemon thread, unless it is imported or being
    imported already; whether a thread was started."""
    global _thread
    with _lock:
        if _thread is not None or "great_expectations" in sys.modules:
            return False
        _thread = threading.Thread(target=_import, name="topiclake-gx-import", daemon=True)
        _thread.start()
        return True


def imported() -> None:
    """Wait until a background import (if one was started) has finished. A failed one is
    left for the caller's own import to raise, on its own thread."""
    thread = _thread
    if thread is not None:
        thread.join()


def _import() -> None:
    try:
        import great_expectations  # noqa: F401
        import great_expectations.expectations  # noqa: F401 - its registry, which every suite uses
    except BaseException:  # noqa: BLE001 - the caller's own import reports it
        pass
