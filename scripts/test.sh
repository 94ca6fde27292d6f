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
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake --preset asan
cmake --build --preset asan -j "$(nproc)"
ctest --preset asan -j "$(nproc)" "$@"
