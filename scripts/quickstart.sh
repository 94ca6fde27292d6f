#!/usr/bin/env bash
# From a fresh machine to a running board: installs what is missing, builds
# everything, brings up the default board, runs its main job (a GEMM on chip
# 0's tensor engines, the default where the chip has them, verified against
# the host reference; `vtrn run` prints the engine, the wall time and the
# modeled chip time; then the chip's telemetry with the job counters and
# latency, and the jobs table), shows the board, and brings it down.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"

vtrn=build/host-tools/vtrn
trap '"$vtrn" down >/dev/null 2>&1 || true' EXIT

step() { printf '\n\033[1m$ vtrn %s\033[0m\n' "$*"; "$vtrn" "$@"; }

step up "$@"
# The main job: a real kernel on the chip's tensor engines, verified.
step run gemm --m 256 --n 256 --k 256 --dtype bf16
# The engines finish well inside one telemetry period: show the block once
# the firmware has published the job in it (bounded wait, 5 s).
python3 - "$vtrn" <<'EOF_WAIT'
import json, subprocess, sys, time
deadline = time.monotonic() + 5
while time.monotonic() < deadline:
    doc = json.loads(subprocess.run([sys.argv[1], "telemetry", "0", "--json"], capture_output=True, text=True).stdout)
    if doc["chips"][0]["jobs_completed"] >= 1:
        break
    time.sleep(0.05)
EOF_WAIT
step telemetry 0
step jobs
step ls
chips=$("$vtrn" ls --json | python3 -c 'import json,sys; print(" ".join(str(c["id"]) for c in json.load(sys.stdin)["chips"]))')
for c in $chips; do
  step info "$c"
  step ping "$c" --count 100
done
step logs 0 --tail 8
step down
trap - EXIT
