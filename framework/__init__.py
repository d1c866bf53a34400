"""topiclake: Kafka's log-compaction guarantees for topics kept as Delta Lake tables.

Importing the package starts nothing and imports neither Spark nor Great Expectations
(``topiclake lint`` answers without them). The public API:

- :mod:`framework.spec`: ``load_spec``, ``load_specs``, ``parse_spec``, ``lint``, ``TopicSpec``
- :mod:`framework.session`: ``local_session``, ``get_session``
- :mod:`framework.log.topic`: ``Topic`` (a spec's partition tables), :mod:`framework.log.partition_log`: ``PartitionLog``
- :mod:`framework.clients.produce`: ``produce`` (checked records), ``produce_frame`` (a DataFrame)
- :mod:`framework.clients.ingest`: ``ingest`` (a ``source.kafka`` topic's new records, exactly once)
- :mod:`framework.stages.maintenance`: ``Maintenance`` (compaction, retention, vacuum, checks)
- :mod:`framework.cli.main`: ``main(argv) -> int``, the ``topiclake`` command
"""

import os

__version__ = "0.1.0"
__all__ = ["__version__"]

# Arrow's allocator (mimalloc) asks the kernel for transparent huge pages. Where the
# kernel's THP mode is "madvise" (Debian's and Ubuntu's default), each fresh 2 MB page is
# then compacted and zeroed in the kernel: a 5M-record rewrite spent as much CPU there as
# in Arrow (docs/performance-log.md, stop 97). mimalloc reads this once, when pyarrow
# loads, so it is set here, before any module imports pyarrow; a value already set wins.
os.environ.setdefault("MIMALLOC_ALLOW_THP", "0")
