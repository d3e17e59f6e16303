#!/bin/bash
# Soak benchmark (issue 14): builds nothing, runs bench/soak/soak.mjs against the bundled model with
# the binary in build/, writes its output to OUT (default /tmp/moeserve-soak-<date>), exits with its
# status. Extra arguments go to soak.mjs (--duration S, --concurrency N, --seed N, ...).
#   bench/soak/run.sh                       # 30 minutes at concurrency 64
#   bench/soak/run.sh --duration 120        # a short run
set -eu
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/moeserve-soak-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
node bench/soak/soak.mjs --bin "${MOESERVE:-build/src/apps/moeserve}" --out "$OUT" "$@" 2>&1 | tee "$OUT/soak.txt"
exit "${PIPESTATUS[0]}"
