#!/usr/bin/env bash
# The whole test suite from a clean checkout: installs what is missing,
# configures, builds host code and firmware, then runs every test (unit tests,
# integration tests that boot real QEMU chips, bench smoke tests) with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
ctest --preset default -j "$(nproc)" "$@"
