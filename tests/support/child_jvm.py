"""The JVM options of the JVMs the tests start in child processes."""

#: A ``topiclake`` command, spark-submit, the standalone daemons and their executors live
#: for seconds: HotSpot's quick C1 compiler pays off there and C2's costly compiles do not
#: (a short command runs about a fifth faster). The run's own session lives for the whole
#: run and keeps the default, which is faster there.
#: C1 alone also shrinks HotSpot's default code cache from 240 MB to 48 MB, which a session
#: that loads Hive, Delta, Great Expectations and Kafka's client can fill: the JVM then fails
#: queries with "Out of space in CodeCache for method handle intrinsic" (seen in CI, one run
#: in about six of the catalog test). So the tiered default's size is asked for explicitly.
QUICK_JIT_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m")
#: On two cores HotSpot picks G1, whose concurrent threads and write barriers cost a short
#: command more than they save: a ``topiclake create`` of the shipped specs took 9.3 and
#: 8.9 s with the serial collector against 11.1 and 10.1 s with G1 (2026-11-25).
SHORT_LIVED_GC = "-XX:+UseSerialGC"
CHILD_JVM_OPTIONS = " ".join((*QUICK_JIT_OPTIONS, SHORT_LIVED_GC))
#: The run's own session is the embedded one, with its own default collector (the throughput
#: one, framework/jvm_options.py), which never meets SHORT_LIVED_GC: it does not inherit it.
