#!/usr/bin/env bash
# Builds and tests the JVM clients (clients/java): builds ticketd from this
# repository for the integration tests, then
#   1. with a JDK 21 or newer (virtual threads) and Spring Boot 3.5:
#      "mvn clean install", every module and every test;
#   2. with JDK 17 and Spring Boot 4 (-Pboot4): the client, the JDBC fence, the
#      Spring modules and the example, built again from the same sources, with
#      their tests (the client's conformance scenarios and JVM-specific tests, and
#      a real ticketd, on platform threads).
# Prints "java: N passed, N failed" summed over the Surefire reports of both.
# Needs Go, Maven and two JDKs: 21 or newer (the Temurin JDK in
# /usr/lib/jvm/temurin-25-jdk-amd64 by default; set JAVA_HOME to use another)
# and 17 (/usr/lib/jvm/java-17-openjdk-amd64; set JDK17_HOME to use another).
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
if [ -z "${JDK17_HOME:-}" ]; then
  for j in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-17-jdk-amd64; do
    if [ -x "$j/bin/javac" ]; then JDK17_HOME=$j; break; fi
  done
  if [ -z "${JDK17_HOME:-}" ]; then
    echo "clients/java/test.sh: JDK 17 is missing; installing it (apt-get install openjdk-17-jdk-headless)" >&2
    apt-get install -y -q openjdk-17-jdk-headless >/dev/null || true
    JDK17_HOME=/usr/lib/jvm/java-17-openjdk-amd64
  fi
fi
if ! "$JDK17_HOME/bin/javac" -version 2>&1 | grep -q '^javac 17'; then
  echo "clients/java/test.sh: no JDK 17 in $JDK17_HOME; install one (apt-get install openjdk-17-jdk-headless) or set JDK17_HOME" >&2
  exit 1
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

passed=0
failed=0
count() { # adds the Surefire reports under clients/java to passed/failed
  local f line t fl e sk
  for f in $(find "$here" -path '*/target/surefire-reports/TEST-*.xml' 2>/dev/null); do
    # The first line with a testsuite element carries the suite's counts.
    line=$(grep -m1 -o '<testsuite [^>]*>' "$f" || true)
    get() { echo "$line" | grep -o " $1=\"[0-9]*\"" | grep -o '[0-9]*' || echo 0; }
    t=$(get tests); fl=$(get failures); e=$(get errors); sk=$(get skipped)
    passed=$((passed + t - fl - e - sk))
    failed=$((failed + fl + e))
  done
}
clear_reports() { # old reports would be counted again
  find "$here" -path '*/target/surefire-reports' -type d -prune -exec rm -rf {} +
}

status=0
clear_reports
echo "== mvn -B -q clean install (clients/java; JDK $major, Spring Boot 3.5)"
nice -n 10 mvn -B -q clean install || status=$?
before=$failed
count
if [ "$status" -ne 0 ] && [ "$failed" -eq "$before" ]; then
  failed=$((failed + 1)) # the build failed before or outside the tests
fi

# The same sources on JDK 17 against Spring Boot 4. The Kotlin module, the
# fuzzer, failover, TLS and authorization suites run in the first build only.
b4=0
clear_reports
echo "== mvn -B -q -Pboot4 clean verify (JDK 17, Spring Boot 4: client, fence, ShedLock, Spring modules, example)"
JAVA_HOME=$JDK17_HOME PATH="$JDK17_HOME/bin:$PATH" MAVEN_OPTS="${MAVEN_OPTS_17:-}" nice -n 10 mvn -B -q -Pboot4 clean verify \
  -pl ticketing-client,ticketing-jdbc,ticketing-spring-retry,ticketing-shedlock,ticketing-spring-integration,ticketing-spring-boot-starter,examples/orders-spring \
  -Dtest='ConformanceTest,CoordinationConformanceTest,CoordVectorsTest,CoordinationIntegrationTest,RecipeInteropTest,FutureCancellationTest,TicketCloseTest,VirtualThreadsTest,ListenerTest,OwnerReleaseCompatibilityTest,SingleNodeIntegrationTest,VectorsTest,*FenceTest,Retry*Test,CommittedTransactionsTest,TicketingClassesTest,RecipesIntegrationTest,JvmConformanceTest,CoordinationExamplesTest,ShedLock*Test,LockRegistryTest,LeaderInitiatorTest,StarterTest,ConfigurationMetadataTest,OrdersApplicationTest' \
  -Dsurefire.failIfNoSpecifiedTests=false || b4=$?
before=$failed
count
if [ "$b4" -ne 0 ] && [ "$failed" -eq "$before" ]; then
  failed=$((failed + 1))
fi
[ "$b4" -eq 0 ] || status=$b4

echo "java: $passed passed, $failed failed"
exit "$status"
