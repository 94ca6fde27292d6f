#!/usr/bin/env bash
# The whole test suite from a clean checkout, in one build: installs what is
# missing, configures the `asan` preset (all host code with AddressSanitizer
# and UndefinedBehaviorSanitizer and asserts on, plus the firmware, the
# libFuzzer harnesses and the bare-metal images), builds it, and runs every
# test once with ctest: unit tests, integration tests that boot real QEMU
# chips, fuzz corpora and bounded fuzz runs, bare-metal and bench smoke
# tests, the soak.
#
# One sanitized build instead of a release pass plus a sanitizer pass: the
# suite must stay under 10 minutes on 2 cores, and a second host build and
# second QEMU run cost more than that budget left. The release build
# (`default` preset) is what ./scripts/quickstart.sh builds and runs.
#
# A run that passes with tests missing is a failure: the preset refuses to
# configure when a test cannot be registered (VTRN_REQUIRE_ALL_TESTS) and
# to run when no test matches (noTestsAction), and this script prints how
# many tests are registered and how many ran, fails unless they are equal,
# and fails when any test ran zero test cases (a CMocka binary or a Python
# file that collected none). Arguments go to ctest (e.g. -R REGEX); the
# counts then refer to that selection.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake --preset asan
cmake --build --preset asan -j "$(nproc)"

registered=$(ctest --preset asan -N "$@" | sed -n 's/^Total Tests: \([0-9][0-9]*\)$/\1/p')
junit="$PWD/build-asan/ctest-results.xml"
rm -f "$junit"
rc=0
# Whole outputs in the report (ctest keeps 1 KiB of a passed test by
# default): the test-case counts below are read from them.
ctest --preset asan -j "$(nproc)" --output-junit "$junit" --test-output-size-passed 4000000 \
  --test-output-size-failed 4000000 "$@" || rc=$?

python3 - "$junit" "${registered:-0}" "$rc" <<'EOF'
"""Counts what ctest ran from its JUnit report and checks it against what
was registered; every test must have run at least one test case."""
import re
import sys
import xml.etree.ElementTree as ET

path, registered, rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    cases = ET.parse(path).getroot().findall("testcase")
except (OSError, ET.ParseError) as e:
    cases = []
    print(f"scripts/test.sh: no ctest report ({e})", file=sys.stderr)
ran = [c for c in cases if c.get("status") in ("run", "fail")]
# A test that ran nothing inside: unittest's "Ran 0 tests", CMocka's
# "0 test(s) run", libFuzzer's corpus replay of "0 files".
empty_re = re.compile(r"^Ran 0 tests|^\[=+\] 0 test\(s\) run|INFO: +0 files found", re.M)
empty = [c.get("name") for c in ran if empty_re.search((c.findtext("system-out") or ""))]
inner = 0
for c in ran:
    out = c.findtext("system-out") or ""
    inner += sum(int(n) for n in re.findall(r"^Ran (\d+) tests? in ", out, re.M))
    inner += sum(int(n) for n in re.findall(r"^\[=+\] (\d+) test\(s\) run\.", out, re.M))
print(f"scripts/test.sh: {registered} tests registered, {len(ran)} run "
      f"({inner} Python and CMocka test cases inside them)")
problems = []
if registered == 0:
    problems.append("no test registered")
if len(ran) != registered:
    missing = sorted(c.get("name") for c in cases if c.get("status") not in ("run", "fail"))
    problems.append(f"{registered - len(ran)} registered test(s) did not run: {', '.join(missing) or '?'}")
if empty:
    problems.append(f"ran zero test cases: {', '.join(empty)}")
for p in problems:
    print(f"scripts/test.sh: FAILED: {p}", file=sys.stderr)
sys.exit(rc if rc else (1 if problems else 0))
EOF
