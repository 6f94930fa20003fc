#!/usr/bin/env bash
# Builds and tests the JVM clients (clients/java): builds ticketd from this
# repository for the integration tests, runs "mvn -B -q verify", and prints
# "java: N passed, N failed" summed over the Surefire reports of every module.
# Needs Go, Maven and a JDK 21 or newer (the Temurin JDK in
# /usr/lib/jvm/temurin-25-jdk-amd64 by default; set JAVA_HOME to use another).
set -euo pipefail
cd "$(dirname "$0")"
here=$(pwd)
repo=$(cd ../.. && pwd)

if [ -z "${JAVA_HOME:-}" ] || ! "$JAVA_HOME/bin/java" -version 2>&1 | grep -qE 'version "(2[1-9]|[3-9][0-9])'; then
  JAVA_HOME=
  for j in /usr/lib/jvm/temurin-25-jdk-amd64 /usr/lib/jvm/temurin-21-jdk-amd64 /usr/lib/jvm/java-25-openjdk-amd64 /usr/lib/jvm/java-21-openjdk-amd64; do
    if [ -x "$j/bin/javac" ]; then JAVA_HOME=$j; break; fi
  done
  if [ -z "$JAVA_HOME" ]; then
    echo "clients/java/test.sh: no JDK 21 or newer found; install one (apt-get install openjdk-21-jdk-headless) or set JAVA_HOME" >&2
    exit 1
  fi
fi
export JAVA_HOME
export PATH="$JAVA_HOME/bin:$PATH"
# Maven's own libraries call sun.misc.Unsafe; JDK 24+ warns about it on every run.
major=$("$JAVA_HOME/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
if [ "${major:-0}" -ge 24 ]; then
  export MAVEN_OPTS="${MAVEN_OPTS:-} --sun-misc-unsafe-memory-access=allow"
fi
if ! command -v mvn >/dev/null; then
  echo "clients/java/test.sh: Maven is missing; installing it (apt-get install maven)" >&2
  apt-get install -y -q maven >/dev/null || { echo "clients/java/test.sh: install Maven 3.8 or newer (apt-get install maven)" >&2; exit 1; }
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== building ticketd and faketicketd (the conformance scenarios' server) for the Java tests"
(cd "$repo" && nice -n 10 go build -o "$tmp/ticketd" ./server/cmd/ticketd && nice -n 10 go build -o "$tmp/faketicketd" ./internal/faketicketd/cmd/faketicketd)
export TICKETD_BIN="$tmp/ticketd" FAKETICKETD_BIN="$tmp/faketicketd"

# Old reports would be counted again.
find "$here" -path '*/target/surefire-reports' -type d -prune -exec rm -rf {} +

echo "== mvn -B -q verify (clients/java)"
status=0
nice -n 10 mvn -B -q verify || status=$?

passed=0
failed=0
for f in $(find "$here" -path '*/target/surefire-reports/TEST-*.xml' 2>/dev/null); do
  # The first line with a testsuite element carries the suite's counts.
  line=$(grep -m1 -o '<testsuite [^>]*>' "$f" || true)
  get() { echo "$line" | grep -o " $1=\"[0-9]*\"" | grep -o '[0-9]*' || echo 0; }
  t=$(get tests); fl=$(get failures); e=$(get errors); s=$(get skipped)
  passed=$((passed + t - fl - e - s))
  failed=$((failed + fl + e))
done
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  failed=1 # the build failed before or outside the tests
fi
echo "java: $passed passed, $failed failed"
exit "$status"
