#!/usr/bin/env bash
# Sets up a fresh machine for topiclake: Java for Spark, the .venv with pinned
# dependencies, and Delta Lake's jars (resolved from Maven Central on first use).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}

# Spark 4 needs Java 17 or newer (the JDK: javac builds the local file system's classes).
java_major() { java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print v[1]}'; }
# javac compiles the embedded session's local file system (framework/local_file_system.py);
# without it topiclake runs on Hadoop's own, which forks a process per file it writes, so
# a missing compiler is installed when it can be, and its absence is no failure.
jdk="" runtime_missing=""
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
  jdk="Java 17 (Spark 4 needs Java >= 17)" runtime_missing=1
elif ! command -v javac >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
  jdk="the Java 17 compiler"
fi
if [ -n "$jdk" ]; then
  echo "setup: installing $jdk"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq openjdk-17-jdk-headless >/dev/null; }; then
    [ -z "$runtime_missing" ] || exit 1
    echo "setup: going on without javac"
  fi
fi

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "setup: $PYTHON not found; topiclake needs Python 3.11" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# constraints.txt pins every transitive version that was tested together.
.venv/bin/python -m pip install -q -c constraints.txt -e '.[spark,test]'
.venv/bin/python -m ipykernel install --prefix .venv --name python3 --display-name "topiclake (.venv)" >/dev/null
# HotSpot's class archive for the embedded session's JVM (framework/class_archive.py): runs
# the main job once (about two minutes, the first Ivy resolution included); later sessions
# map the classes instead of loading them and start about a third faster.
# A second try when the first fails (a jar download from Maven Central can fail once).
.venv/bin/python jobs/class_archive.py --if-missing || .venv/bin/python jobs/class_archive.py --if-missing \
  || echo "setup: going on without the class archive"
echo "setup: .venv ready ($(.venv/bin/python --version), $(java -version 2>&1 | head -1))"
