#!/usr/bin/env bash
# GSM8K regression on the bundled model, end to end: `moeserve serve` (at the given -tp) answers
# `moeserve eval gsm8k` (lm-eval semantics, 5-shot, greedy) on a fixed 100-question subset of the
# model's held-out synthetic test set. The strict-match accuracy must lie within a stated band of
# the recorded value in gsm8k_expected.json; a drop fails with the figure.
#   gsm8k_regression_test.sh MOESERVE TP WORKDIR [MODEL_DIR [TAG [EXTRA SERVE ARGS...]]]
# (MODEL_DIR and the extra args produce the README's parity table; CTest uses the defaults.)
set -euo pipefail
MOESERVE=$1
TP=$2
WORK=$3
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MODEL=${4:-$ROOT/models/minimax-m2-tiny}
TAG=${5:-tp$TP}
shift $(( $# < 5 ? $# : 5 ))
EXPECTED=$ROOT/tests/eval/gsm8k_expected.json
mkdir -p "$WORK"
LOG=$WORK/serve_$TAG.log
PORT=$((20000 + RANDOM % 20000))

"$MOESERVE" serve --model "$MODEL" --served-model-name minimax-m2-tiny --port "$PORT" -tp "$TP" \
  --kv-cache-memory 268435456 --max-num-seqs 16 "$@" >"$LOG" 2>&1 &
SERVER=$!
trap 'kill -INT $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then break; fi
  if ! kill -0 $SERVER 2>/dev/null; then cat "$LOG"; echo "server exited"; exit 1; fi
  sleep 0.2
done

"$MOESERVE" eval gsm8k --base-url "http://127.0.0.1:$PORT/v1" --limit 100 --concurrency 8 \
  --data "$ROOT/data/synthetic-gsm8k/test.jsonl" \
  --fewshot-data "$ROOT/data/synthetic-gsm8k/train.jsonl" \
  --output "$WORK/report_$TAG.json" --no-progress

/usr/bin/python3 - "$WORK/report_$TAG.json" "$EXPECTED" "$TAG" <<'PY'
import json, sys
report, expected, tp = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
def find(d, key):
    if isinstance(d, dict):
        for k, v in d.items():
            if k == key and isinstance(v, (int, float)):
                return v
            r = find(v, key)
            if r is not None:
                return r
    return None
got = find(report, "exact_match,strict-match")
want, band = expected["strict_match"], expected["band"]
print(f"{tp}: strict-match {got:.3f} on 100 questions; recorded {want:.3f} +- {band:.3f}")
sys.exit(0 if abs(got - want) <= band else 1)
PY
