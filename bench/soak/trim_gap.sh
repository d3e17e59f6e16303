#!/bin/bash
# Repro of the soak's RSS finding: request bodies under the malloc_trim threshold (1 MiB when found,
# now 64 KiB: src/server/memory_release.h, kLargeRequestBytes) left the server's idle RSS high; one request
# of 1 MiB or more (which calls malloc_trim) gives most of it back.
#   bench/soak/trim_gap.sh [BODY_BYTES (default 786432)] [SECONDS (default 40)]
set -eu
cd "$(dirname "$0")/../.."
BYTES=${1:-786432}
SECS=${2:-40}
PORT=${PORT:-18777}
LOG=$(mktemp /tmp/moeserve-trim-gap-XXXXXX.log)
build/src/apps/moeserve serve --model models/minimax-m2-tiny --host 127.0.0.1 --port "$PORT" \
  --kv-cache-memory 2097152 --max-model-len 512 --max-request-bytes 2097152 > "$LOG" 2>&1 &
SP=$!
trap 'kill -TERM $SP 2>/dev/null || true' EXIT
for _ in $(seq 60); do curl -sf "localhost:$PORT/health" > /dev/null && break; sleep 0.5; done
rss() { grep VmRSS "/proc/$SP/status" | awk '{print $2 " kB"}'; }
echo "idle at start: $(rss)"
node bench/soak/soak.mjs --base-url "http://127.0.0.1:$PORT" --pid "$SP" --duration "$SECS" --concurrency 16 \
  --idle-checks 1 --kinds large_ok --large-bytes "$BYTES" --max-request-bytes 2097152 --max-model-len 512 \
  > "$LOG.soak" 2>&1 || true
grep -E "^large_ok" "$LOG.soak"
sleep 2
echo "idle after ${SECS} s of ${BYTES}-byte bodies: $(rss)"
body=$(mktemp)
node -e "const c=JSON.stringify({prompt:'hello world',max_tokens:2});process.stdout.write(c.slice(0,-1)+' '.repeat(1200000-c.length)+'}')" > "$body"
curl -s -o /dev/null -H 'content-type: application/json' --data-binary "@$body" "localhost:$PORT/v1/completions"
rm -f "$body"
sleep 1
echo "idle after one 1.2 MB request (malloc_trim): $(rss)"
