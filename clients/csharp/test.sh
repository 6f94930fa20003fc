#!/usr/bin/env bash
# The C# client's suite exactly as CI runs it: Mono's mcs (C# 7.0) compiles the
# library and its tests, NUnit 2.6 runs them under Mono, against ticketd built
# from this repository. Installs the Mono packages when they are missing
# (Debian: mono-devel nunit-console openssl). Ends with the line
#   csharp: N passed, N failed
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

summary() { echo "csharp: $1 passed, $2 failed"; }

have() { command -v mcs >/dev/null && command -v mono >/dev/null && command -v nunit-console >/dev/null && command -v openssl >/dev/null; }
if ! have; then
  echo "== installing Mono, NUnit 2.6 and openssl (apt-get)"
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "clients/csharp/test.sh needs mcs, mono, nunit-console and openssl: install them with" >&2
    echo "  apt-get update && apt-get install -y mono-devel nunit-console openssl" >&2
    summary 0 1
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends mono-devel nunit-console openssl ca-certificates >/dev/null
fi
nunit=$(ls /usr/lib/cli/nunit.framework-2.6*/nunit.framework.dll 2>/dev/null | head -n1 || true)
if [ -z "$nunit" ]; then
  echo "nunit.framework.dll (NUnit 2.6) not found under /usr/lib/cli; reinstall nunit-console" >&2
  summary 0 1
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== building ticketd, ticketbench, faketicketd (the conformance scenarios' server) and coordpeer (a Go coordination session for the interoperability test) for the C# tests"
(cd "$repo" && nice -n 10 go build -o "$tmp/ticketd" ./server/cmd/ticketd && nice -n 10 go build -o "$tmp/ticketbench" ./server/cmd/ticketbench && nice -n 10 go build -o "$tmp/faketicketd" ./internal/faketicketd/cmd/faketicketd && nice -n 10 go build -o "$tmp/coordpeer" ./internal/coordpeer/cmd/coordpeer)

echo "== compiling the C# client and its tests with mcs (C# 7.0)"
compile() {
  if ! nice -n 10 mcs -langversion:7 -warnaserror+ -target:library "$@" >"$tmp/mcs.log" 2>&1; then
    cat "$tmp/mcs.log" >&2
    summary 0 1
    exit 1
  fi
}
cd "$here"
# -doc: every public member must have its XML documentation (CS1591 is an error).
compile -doc:"$tmp/Ticketing.xml" -out:"$tmp/Ticketing.dll" -r:System.dll -r:System.Core.dll Ticketing/*.cs
# The same sources against reference assemblies of .NET Framework 4.6.1, the
# API level netstandard2.0 maps to: no Mono-only API slips in. IAsyncDisposable
# and ValueTask, which the netstandard2.0 package takes from
# Microsoft.Bcl.AsyncInterfaces, come from a stand-in (ci/): no NuGet here.
api=/usr/lib/mono/4.6.1-api
compile -nostdlib -noconfig -out:"$tmp/AsyncInterfaces.api-check.dll" \
  -r:"$api/mscorlib.dll" ci/AsyncInterfacesReference.cs
compile -nostdlib -noconfig -define:NETSTANDARD2_0 -out:"$tmp/Ticketing.api-check.dll" \
  -r:"$api/mscorlib.dll" -r:"$api/System.dll" -r:"$api/System.Core.dll" -r:"$tmp/AsyncInterfaces.api-check.dll" Ticketing/*.cs
cp "$nunit" "$tmp/"
compile -out:"$tmp/Ticketing.Tests.dll" -r:System.dll -r:System.Core.dll -r:"$tmp/Ticketing.dll" -r:"$tmp/nunit.framework.dll" Ticketing.Tests/*.cs
# The documentation's examples, as programs against the library as built above.
compile -target:exe -out:"$tmp/Example.exe" -r:"$tmp/Ticketing.dll" Example/*.cs
compile -target:exe -out:"$tmp/CoordinationExample.exe" -r:"$tmp/Ticketing.dll" CoordinationExample/*.cs

echo "== running the C# tests (NUnit 2.6 under Mono)"
export COORDPEER_BIN="$tmp/coordpeer" TICKETD_BIN="$tmp/ticketd" TICKETBENCH_BIN="$tmp/ticketbench" FAKETICKETD_BIN="$tmp/faketicketd" TICKETING_REPO="$repo" TICKETING_EXAMPLE="$tmp/Example.exe" TICKETING_COORDINATION_EXAMPLE="$tmp/CoordinationExample.exe"
status=0
# -domain:None: no AppDomain unload at the end, which on Mono waits for
# threads blocked in socket reads (a failed test can leave some behind).
(cd "$tmp" && timeout 900 nunit-console -nologo -domain:None -xml="$tmp/result.xml" Ticketing.Tests.dll) >"$tmp/nunit.log" 2>&1 || status=$?
# The latency lines and the failover tally, then failures in full.
grep -oE '(csharp|go) (latency|failover|cancellation storm|dispose|leader kills).*' "$tmp/nunit.log" || true
if [ ! -s "$tmp/result.xml" ]; then
  tail -n 50 "$tmp/nunit.log" >&2
  summary 0 1
  exit 1
fi
attr() { grep -o "<test-results [^>]*" "$tmp/result.xml" | grep -o " $1=\"[0-9]*\"" | grep -o '[0-9]*'; }
total=$(attr total); errors=$(attr errors); failures=$(attr failures)
notrun=$(attr not-run); invalid=$(attr invalid); inconclusive=$(attr inconclusive)
failed=$((errors + failures + notrun + invalid + inconclusive))
passed=$((total - errors - failures - inconclusive))
if [ "$failed" -ne 0 ] || [ "$status" -ne 0 ]; then
  sed -n '/^Errors and Failures:/,$p' "$tmp/nunit.log" | grep -v '^  at \|^at ' >&2 || tail -n 50 "$tmp/nunit.log" >&2
  [ "$failed" -eq 0 ] && failed=1
fi
summary "$passed" "$failed"
[ "$failed" -eq 0 ]
