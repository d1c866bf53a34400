"""Build the class-data-sharing archive of the embedded session's JVM (``framework/class_archive.py``).

Runs the main job once (the shipped specs, a few sample records, the guarantee checks and
the report) in a temporary warehouse, in a JVM that writes every class it loaded to the
archive when it exits, then ends that JVM. Later embedded sessions map the archive instead
of loading those classes. The set-up runs this; it takes about two minutes. Each run also
removes the archives no installation can map again (``class_archive.stale_archives``).

    python jobs/class_archive.py [--if-missing]

Exit status 0 when the archive is there, 1 when it could not be built (topiclake then
starts without it, as before).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

# Running as a script from a checkout: make the package importable without installing it.
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from framework import class_archive, local_file_system, yarn_defaults  # noqa: E402

SAMPLE_RECORDS = "200"


def build(path: Path) -> bool:
    """Run the main job in a JVM that archives its classes at exit into ``path``."""
    from framework.cli.main import main as topiclake
    from framework.session import embedded_master, local_session

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with tempfile.TemporaryDirectory(prefix="topiclake-class-archive-") as scratch:
            spark = local_session("topiclake-class-archive", conf={
                "spark.driver.extraJavaOptions": f"-Dderby.system.home={scratch} {class_archive.dump_option(partial)}"})
            status = topiclake(["--warehouse", os.path.join(scratch, "warehouse"), "--specs", str(REPO / "table_specs"),
                                "maintain", "--with-sample-data", "--sample-records", SAMPLE_RECORDS])
            gateway = spark.sparkContext._gateway
            spark.stop()  # Spark's side first (its Python accumulator server too), then the JVM
            try:
                # HotSpot writes the archive on the way out of a JVM that exits, not one that is killed
                gateway.jvm.java.lang.System.exit(0)
            except Exception:  # noqa: BLE001 - the JVM ends under the call; that is the point
                pass
            gateway.proc.wait(timeout=600)
        if status != 0 or not partial.is_file():
            return False
        # the note first: another installation's set-up removes an archive without one
        class_archive.record_installation(path, embedded_master())
        os.replace(partial, path)
        return True
    finally:
        # a JVM that failed to start still writes what it loaded (40 MB): no leftovers
        partial.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--if-missing", action="store_true", help="do nothing when the archive exists")
    args = parser.parse_args(argv)
    # the session's class path, and so the archive's name, has these jars once they are built
    local_file_system.class_path_entry()
    yarn_defaults.class_path_entry()
    from framework.session import embedded_master

    master = embedded_master()
    path = class_archive.archive_path(master)
    if args.if_missing and path.is_file():
        if not class_archive.made_for(path).is_file():
            class_archive.record_installation(path, master)  # built before the notes: its name is this key's
        print(f"class archive: {path} (there already)")
        return _remove_stale(path)
    started = time.monotonic()
    try:
        built = build(path)
    except Exception as error:  # noqa: BLE001 - the JVM did not start: say so in a line, go on without
        print(f"class archive: {type(error).__name__}: {error}", file=sys.stderr)
        built = False
    if not built:
        from framework.session import spark_log_path

        print(f"class archive: not built; topiclake starts without it (the JVM's output: {spark_log_path()})",
              file=sys.stderr)
        return 1
    print(f"class archive: {path} ({path.stat().st_size / 1e6:.0f} MB, built in {time.monotonic() - started:.0f} s)")
    return _remove_stale(path)


def _remove_stale(path: Path) -> int:
    freed = class_archive.remove_stale(path)
    if freed:
        print(f"class archive: removed the archives no installation can map again ({freed / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    # the session's JVM is gone: skip pyspark's exit handlers, which would call into it
    os._exit(status)
