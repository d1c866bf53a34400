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

__version__ = "0.1.0"
__all__ = ["__version__"]
