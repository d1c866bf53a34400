"""The JVM options of the JVMs the tests start in child processes."""

#: A ``topiclake`` command, spark-submit, the standalone daemons and their executors live
#: for seconds: HotSpot's quick C1 compiler pays off there and C2's costly compiles do not
#: (a short command runs about a fifth faster). The run's own session lives for the whole
#: run and keeps the default, which is faster there.
CHILD_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
