"""`topiclake simulate` fails on every kind of mismatch it claims to check (CONTRACT section 7).

The acceptance scenarios show that simulate passes a correct engine; these tests show the
other half: a scenario whose expectation differs from what the engine did is reported as
``FAIL <file>: <the first mismatch>`` (then ``N passed, M failed``, exit 1), naming the
step and what differed. Each test runs a correct and a wrong version of one scenario in
one simulate call, so it also checks that a failure does not stop the next file and that
both are counted. The exact messages are asserted, so a simulate that stopped comparing
something (or compared it loosely) turns these tests red.
"""

from __future__ import annotations

import textwrap

import pytest

from framework import faults
from framework.cli.main import main


def scenario(folder, name: str, text: str, *values):
    """Write ``text`` (dedented, then ``%``-formatted with ``values``) as a scenario file."""
    path = folder / name
    text = textwrap.dedent(text)
    path.write_text(text % values if values else text)
    return path


def simulate(capsys, *paths) -> tuple[int, list[str]]:
    code = main(["simulate", *map(str, paths)])
    return code, capsys.readouterr().out.splitlines()


# ------------------------------------------------------- offsets, end offset
def test_wrong_offsets_or_end_offset_of_one_partition_fail(spark, tmp_path, capsys):
    # a, b, a: offsets 0, 1, 2 and end offset 3. The wrong files say as many offsets as
    # there are but not the same ones, and the last offset for the end offset.
    text = """\
        spec: {topic: t, partitions: 1, config: {cleanup.policy: compact}}
        steps:
          - produce: [{key: a, value: '1', timestamp: 0}, {key: b, value: '1', timestamp: 0},
                      {key: a, value: '2', timestamp: 0}]
          - expect: {offsets: %s, end_offset: %s}
        """
    offsets = scenario(tmp_path, "offsets.yaml", text, "[0, 1, 3]", "3")
    right = scenario(tmp_path, "right.yaml", text, "[0, 1, 2]", "3")
    end = scenario(tmp_path, "end.yaml", text, "[0, 1, 2]", "2")
    code, out = simulate(capsys, offsets, right, end)
    assert out == [
        f"FAIL {offsets}: step 2 (expect, line 5): partition 0 offsets [0, 1, 2] != expected [0, 1, 3]",
        f"PASS {right}",
        f"FAIL {end}: step 2 (expect, line 5): partition 0 end offset 3 != expected 2",
        "1 passed, 2 failed",
    ]
    assert code == 1
    # --json: the same verdicts as one object.
    assert main(["--json", "simulate", str(offsets), str(right)]) == 1
    import json

    report = json.loads(capsys.readouterr().out)
    assert (report["passed"], report["failed"]) == (1, 1)
    assert [(r["path"], r["passed"]) for r in report["scenarios"]] == [(str(offsets), False), (str(right), True)]
    assert report["scenarios"][0]["message"].endswith("partition 0 offsets [0, 1, 2] != expected [0, 1, 3]")


def test_wrong_offsets_or_end_offset_of_one_partition_of_several_fail(spark, tmp_path, capsys):
    # Partition 0 gets one record, partition 1 two. Each wrong file is right about partition
    # 0 and wrong about partition 1 only, so a simulate that looked at partition 0 (or at
    # the first partition listed) only would pass it.
    text = """\
        spec: {topic: t, partitions: 2, config: {cleanup.policy: compact}}
        steps:
          - produce:
              - {partition: 0, key: a, value: '1', timestamp: 0}
              - {partition: 1, key: a, value: '1', timestamp: 0}
              - {partition: 1, key: b, value: '1', timestamp: 0}
          - expect: {offsets: {0: [0], 1: %s}, end_offset: {0: 1, 1: %s}}
        """
    right = scenario(tmp_path, "right.yaml", text, "[0, 1]", "2")
    offsets = scenario(tmp_path, "offsets.yaml", text, "[0, 2]", "2")
    end = scenario(tmp_path, "end.yaml", text, "[0, 1]", "1")
    code, out = simulate(capsys, right, offsets, end)
    assert out == [
        f"PASS {right}",
        f"FAIL {offsets}: step 2 (expect, line 7): partition 1 offsets [0, 1] != expected [0, 2]",
        f"FAIL {end}: step 2 (expect, line 7): partition 1 end offset 2 != expected 1",
        "1 passed, 2 failed",
    ]
    assert code == 1


# ------------------------------------------------------------------ produce
def test_a_batch_expected_refused_that_was_accepted_fails(spark, tmp_path, capsys):
    text = """\
        spec: {topic: t, partitions: 1, config: {cleanup.policy: compact}}
        steps:
          - produce:
              expect_error: true
              records: [{key: %s, value: '1', timestamp: 0}]
          - expect: {end_offset: 0}
        """
    refused = scenario(tmp_path, "refused.yaml", text, "null")  # no key on a compacted topic
    accepted = scenario(tmp_path, "accepted.yaml", text, "a")
    code, out = simulate(capsys, refused, accepted)
    assert out == [
        f"PASS {refused}",
        f"FAIL {accepted}: step 1 (produce, line 4): the batch was accepted, but the scenario expects it refused",
        "1 passed, 1 failed",
    ]
    assert code == 1


def test_a_batch_refused_unexpectedly_fails(spark, tmp_path, capsys):
    bad = scenario(tmp_path, "bad.yaml", """\
        spec: {topic: t, partitions: 1, config: {cleanup.policy: compact}}
        steps:
          - produce:
              - {key: a, value: '1', timestamp: 0}
              - {key: null, value: '1', timestamp: 0}
          - expect: {end_offset: 0}
        """)
    code, out = simulate(capsys, bad)
    assert out == [
        f"FAIL {bad}: step 1 (produce, line 4): produce refused: {bad}:5: key: "
        "a record without a key cannot be produced to a compacted topic (cleanup.policy=compact)",
        "0 passed, 1 failed",
    ]
    assert code == 1


# ----------------------------------------------------------- delete_records
def test_delete_records_expected_refused_that_succeeded_fails(spark, tmp_path, capsys):
    # The log end offset is 2: before_offset 3 is OFFSET_OUT_OF_RANGE, 1 is accepted.
    text = """\
        spec: {topic: t, partitions: 1, config: {cleanup.policy: 'compact,delete'}}
        steps:
          - produce: [{key: a, value: '1', timestamp: 0}, {key: b, value: '1', timestamp: 0}]
          - delete_records: {partition: 0, before_offset: %s, expect_error: true}
          - expect: {offsets: [0, 1]}
        """
    refused = scenario(tmp_path, "refused.yaml", text, "3")
    accepted = scenario(tmp_path, "accepted.yaml", text, "1")
    code, out = simulate(capsys, refused, accepted)
    assert out == [
        f"PASS {refused}",
        f"FAIL {accepted}: step 2 (delete_records, line 4): delete_records was accepted, "
        "but the scenario expects it refused",
        "1 passed, 1 failed",
    ]
    assert code == 1


@pytest.mark.parametrize("policy, before_offset, error", [
    ("compact", 1, "{path} spec: delete-records: topic t has cleanup.policy=compact; "
                   "Kafka refuses deleteRecords on a compact-only topic (POLICY_VIOLATION)"),
    ("'compact,delete'", 3, "--before-offset: 3 is outside t-0's log [0, 2] (OFFSET_OUT_OF_RANGE)"),
])
def test_delete_records_refused_unexpectedly_fails(spark, tmp_path, capsys, policy, before_offset, error):
    bad = scenario(tmp_path, "bad.yaml", f"""\
        spec: {{topic: t, partitions: 1, config: {{cleanup.policy: {policy}}}}}
        steps:
          - produce: [{{key: a, value: '1', timestamp: 0}}, {{key: b, value: '1', timestamp: 0}}]
          - delete_records: {{partition: 0, before_offset: {before_offset}}}
          - expect: {{offsets: [0, 1]}}
        """)
    code, out = simulate(capsys, bad)
    assert out == [
        f"FAIL {bad}: step 2 (delete_records, line 4): delete_records refused: " + error.format(path=bad),
        "0 passed, 1 failed",
    ]
    assert code == 1


# --------------------------------------------------------------------- spec
def test_a_spec_refused_unexpectedly_fails_and_one_refused_as_expected_passes(spark, tmp_path, capsys):
    # (A good spec under expect_spec_error is tests/test_acceptance.py's.)
    text = """\
        %s
        spec: {topic: t, partitions: 1, config: {min.cleanable.dirty.ratio: 1.5}}
        steps:
          - produce: [{key: a, value: '1', timestamp: 0}]
        """
    expected = scenario(tmp_path, "expected.yaml", text, "expect_spec_error: true")
    unexpected = scenario(tmp_path, "unexpected.yaml", text, "")
    code, out = simulate(capsys, expected, unexpected)
    assert out == [
        f"PASS {expected}",
        f"FAIL {unexpected}: spec refused: {unexpected} spec:2:69: config.min.cleanable.dirty.ratio: "
        "must be from 0 to 1 (a fraction of the partition's bytes), got 1.5",
        "1 passed, 1 failed",
    ]
    assert code == 1


# ---------------------------------------------------------------- guarantees
def test_a_guarantee_broken_during_maintain_fails(spark, tmp_path, capsys):
    # min lag 500 at now 1000: offsets 0 and 1 (t=0) are dirty, offsets 2 and 3 (t=1000)
    # are the head. Right before compaction commits, the hook deletes offset 2 behind the
    # engine's back, as a broken engine would: G2 (head untouched) must fail the step. (b's
    # latest value is offset 3's, so the final state stays the same: G2 alone fails.)
    path = scenario(tmp_path, "head.yaml", """\
        spec: {topic: t, partitions: 1, config: {cleanup.policy: compact, min.cleanable.dirty.ratio: 0.0,
                                                 min.compaction.lag.ms: 500}}
        steps:
          - produce: [{key: a, value: '1', timestamp: 0}, {key: a, value: '2', timestamp: 0},
                      {key: b, value: '1', timestamp: 1000}, {key: b, value: '2', timestamp: 1000}]
          - maintain: {now: 1000}
          - expect: {offsets: [1, 2, 3]}
        """)
    broken = []

    def delete_the_head(point, context):
        if not broken:
            broken.append(context["log"].partition)
            context["log"].delta_table().delete("offset = 2")

    with faults.installed("compact.before_commit", delete_the_head):
        code, out = simulate(capsys, path)
    assert broken == [0]
    assert out == [
        f"FAIL {path}: step 2 (maintain, line 6): partition 0: guarantee(s) failed: G2 head untouched",
        "0 passed, 1 failed",
    ]
    assert code == 1


def test_a_maintain_step_that_errors_fails(spark, tmp_path, capsys):
    # Not a guarantee this time: the partition's maintenance raises before it commits.
    path = scenario(tmp_path, "error.yaml", """\
        spec: {topic: t, partitions: 1, config: {cleanup.policy: compact, min.cleanable.dirty.ratio: 0.0}}
        steps:
          - produce: [{key: a, value: '1', timestamp: 0}, {key: a, value: '2', timestamp: 0}]
          - maintain: {now: 1000}
          - expect: {offsets: [1]}
        """)

    def fail(point, context):
        raise RuntimeError("injected failure")

    with faults.installed("compact.before_commit", fail):
        code, out = simulate(capsys, path)
    assert out == [
        f"FAIL {path}: step 2 (maintain, line 4): partition 0: RuntimeError: injected failure",
        "0 passed, 1 failed",
    ]
    assert code == 1


# ------------------------------------------------------- how expect reads offsets
def test_expect_reads_a_partitions_offsets_without_a_spark_job_as_delta_reads_them(spark, warehouse):
    """An ``expect`` step's offsets come from the files the newest version's checksum lists,
    read by Arrow (no Spark job), and are Delta's own; a table with deletion vectors, whose
    files are not its records, is read through Delta."""
    from framework.cli.simulate import _offsets
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.topic import Topic
    from framework.log.warehouse import delta_table_sql
    from framework.spec import parse_spec
    from framework.stages import compaction
    from tests.support.spark_jobs import spark_jobs

    spec = parse_spec({"topic": "t", "partitions": 1,
                       "config": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0}}, "test")
    topic = Topic(spark, warehouse, spec)
    records = [(i, {"partition": 0, "key": k, "value": "v", "timestamp": 0}) for i, k in enumerate("abacab")]
    produce(topic, parse_records(records, spec, "test"), 10)
    log = topic.partition(0)
    compaction.execute(log, compaction.plan(log, 1000))
    through_delta = sorted(r["offset"] for r in log.read().select("offset").collect())
    assert through_delta == [3, 4, 5]
    offsets, jobs = spark_jobs(spark, lambda: _offsets(topic, 0))
    assert (offsets, jobs) == (through_delta, 0)
    table = delta_table_sql(log.path)
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(f"DELETE FROM {table} WHERE `offset` = 4")
    offsets, jobs = spark_jobs(spark, lambda: _offsets(topic, 0))
    assert offsets == [3, 5] and jobs > 0
