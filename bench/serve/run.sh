#!/bin/bash
# Serving benchmark as in the README's performance table: starts `moeserve serve` on MODEL, warms
# it up, then runs `moeserve bench serve` at each (concurrency, requests) pair given, each with its
# own dataset seed so the prefix cache never turns one run's prompts into another's hits.
#   bench/serve/run.sh MODEL [C N ...]        (default: 1 8 16 64)
# Environment: MOESERVE (binary, default build/src/apps/moeserve), IN / OUT (prompt / answer tokens,
# default 128 / 128), PORT (default 18123), SERVE_FLAGS (extra `serve` flags), VOCAB (random prompt
# ids are drawn below it, default 8000; keep it under the model's vocabulary).
# MODEL needs tokenizer.json / tokenizer_config.json (copy any model's into the bench checkpoint).
set -eu
MODEL=${1:?usage: bench/serve/run.sh MODEL [C N ...]}
shift
[ $# -gt 0 ] || set -- 1 8 16 64
BIN=${MOESERVE:-build/src/apps/moeserve}
PORT=${PORT:-18123}
IN=${IN:-128}
OUT=${OUT:-128}
VOCAB=${VOCAB:-8000}
# shellcheck disable=SC2086
"$BIN" serve --model "$MODEL" --port "$PORT" --kv-cache-memory 1073741824 --max-model-len 1024 \
  ${SERVE_FLAGS:-} > /tmp/moeserve_bench_serve.log 2>&1 &
SERVER=$!
trap 'kill -INT $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  curl -sf "localhost:$PORT/health" > /dev/null && break
  kill -0 $SERVER 2>/dev/null || { cat /tmp/moeserve_bench_serve.log; exit 1; }
  sleep 1
done
common=(--base-url "http://127.0.0.1:$PORT/v1" --random-input-len "$IN" --random-vocab-size "$VOCAB"
        --no-progress)
# Warm-up: pages in the weights.
"$BIN" bench serve "${common[@]}" --random-output-len 4 --max-concurrency 4 --num-prompts 4 \
  --seed 99 > /dev/null
while [ $# -gt 1 ]; do
  C=$1 N=$2
  shift 2
  echo "== concurrency $C, $N requests, $IN in / $OUT out ${SERVE_FLAGS:-}"
  "$BIN" bench serve "${common[@]}" --random-output-len "$OUT" --max-concurrency "$C" \
    --num-prompts "$N" --seed $((C * 1000 + N)) |
    grep -E "Output token throughput|TTFT|TPOT|ITL"
done
