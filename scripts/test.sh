#!/usr/bin/env bash
# The whole test suite from a clean checkout: installs what is missing,
# configures, builds host code and firmware, then runs every test (unit tests,
# integration tests that boot real QEMU chips, fuzz corpora and bounded fuzz
# runs, bare-metal and bench smoke tests) with ctest. A second pass rebuilds
# the host code with AddressSanitizer and UndefinedBehaviorSanitizer (the
# `asan` preset) and runs the unit and integration tests again under them.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
ctest --preset default -j "$(nproc)" "$@"

echo "== host code under AddressSanitizer + UndefinedBehaviorSanitizer =="
cmake --preset asan -DVTRN_BUILD_FUZZERS=OFF
cmake --build --preset asan -j "$(nproc)"
ctest --preset asan -j "$(nproc)" -LE 'fuzz|bench|baremetal' "$@"
