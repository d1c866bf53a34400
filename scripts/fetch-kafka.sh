#!/usr/bin/env bash
# Fetches Apache Kafka's broker jars from Maven Central into .kafka/lib (git-ignored), for the
# tests' real KRaft broker (tests/support/kafka_broker.py). Idempotent: does nothing when
# .kafka/lib/.fetched is newer than scripts/kafka/pom.xml. Maven's local repository (~/.m2)
# caches the downloads. Prints one line.
set -euo pipefail
cd "$(dirname "$0")/.."
POM=scripts/kafka/pom.xml
LIB=.kafka/lib
STAMP=$LIB/.fetched

if [ -f "$STAMP" ] && [ "$STAMP" -nt "$POM" ]; then
  echo "fetch-kafka: $LIB up to date ($(ls "$LIB"/*.jar | wc -l) jars)"
  exit 0
fi
if ! command -v mvn >/dev/null 2>&1; then
  echo "fetch-kafka: installing Maven (it copies Kafka's jars from Maven Central)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq maven >/dev/null
fi

# Copy into a fresh folder, then swap it in: an interrupted run never leaves a half-filled lib.
rm -rf "$LIB.tmp"
mkdir -p "$(dirname "$LIB")"
# Maven's own output (colour codes even with -q) is shown only when it fails.
if ! out=$(mvn -q -B -Dstyle.color=never -f "$POM" dependency:copy-dependencies \
             -DoutputDirectory="$PWD/$LIB.tmp" -DincludeScope=runtime 2>&1); then
  printf '%s\n' "$out" >&2
  echo "fetch-kafka: mvn dependency:copy-dependencies failed" >&2
  exit 1
fi
touch "$LIB.tmp/.fetched"
rm -rf "$LIB"
mv "$LIB.tmp" "$LIB"
echo "fetch-kafka: $(ls "$LIB"/*.jar | wc -l) jars in $LIB"
