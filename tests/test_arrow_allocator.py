"""Arrow's allocator as importing topiclake leaves it: no transparent huge pages.

A rewrite by Arrow reads and writes its row groups in fresh memory. mimalloc, Arrow's
allocator, allows transparent huge pages by default, and where the kernel's THP mode is
"madvise" (Debian's and Ubuntu's default) the kernel then compacts and zeroes each fresh
2 MB page: a 5M-record compaction spent as much CPU in the kernel as in Arrow
(``jobs/benchmark.py --only huge_pages``, docs/performance-log.md, stop 97). mimalloc reads
the setting once, when pyarrow loads, so each case here is a new interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _allow_thp(imports: str, setting: str | None = None) -> str:
    """mimalloc's ``allow_thp`` in a new interpreter that runs ``imports`` and allocates."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("MIMALLOC_")}
    env["MIMALLOC_VERBOSE"] = "1"  # mimalloc prints its options as it starts
    if setting is not None:
        env["MIMALLOC_ALLOW_THP"] = setting
    code = (f"{imports}; import pyarrow as pa; "
            "assert pa.default_memory_pool().backend_name == 'mimalloc', pa.default_memory_pool().backend_name; "
            "pa.allocate_buffer(1 << 20)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    found = [line for line in done.stderr.splitlines() if "option 'allow_thp'" in line]
    assert len(found) == 1, done.stderr[-2000:]
    return found[0].rsplit(":", 1)[1].strip()


def test_importing_topiclake_first_turns_huge_pages_off_for_arrow():
    assert _allow_thp("import sys") == "1"  # mimalloc's own default, which the package changes
    assert _allow_thp("import framework") == "0"
    assert _allow_thp("from framework.cli.main import main") == "0"


def test_a_setting_of_the_users_own_wins():
    assert _allow_thp("import framework", setting="1") == "1"
