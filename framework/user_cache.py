"""topiclake's cache folder: what is worth keeping between commands on one machine (the
expectation types Great Expectations registers, the jars Ivy resolved, HotSpot's class
archive). Everything in it can be rebuilt; a folder that cannot be written costs only time."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable

#: Overrides the folder (default ``$XDG_CACHE_HOME/topiclake``, else ``~/.cache/topiclake``).
CACHE_ENV = "TOPICLAKE_CACHE"


def folder() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "topiclake"


def keyed(name: str, key: list, suffix: str) -> Path:
    """``<folder>/<name>-<hash of key><suffix>``: one entry per value of ``key`` (the versions
    and installations the cached thing was made for)."""
    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
    return folder() / f"{name}-{digest}{suffix}"


def replace_whole(path: Path, fill: Callable[[Path], object]) -> bool:
    """Make ``path`` whole or not at all: ``fill`` writes a partial file beside it, which then
    takes its place (a reader, in another process too, never sees half of it). False where
    the folder cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        fill(partial)
        os.replace(partial, path)
        return True
    except OSError:
        return False


def write_whole(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (:func:`replace_whole`); where the folder cannot be
    written, write nothing."""
    replace_whole(path, lambda partial: partial.write_text(text, encoding="utf-8"))


def ensured(path: Path, whole: Callable[[Path], bool], make: Callable[[Path], bool], make_missing: bool = True
            ) -> str | None:
    """``path`` when it holds what ``whole`` checks for, else made again by ``make`` (unless
    ``make_missing`` is False: then None), and None when that fails."""
    if path.is_file() and whole(path):
        return str(path)
    return str(path) if make_missing and make(path) and whole(path) else None
