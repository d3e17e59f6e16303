#!/usr/bin/env bash
# Builds the chat-template fuzzer with clang-14 (libFuzzer + ASan + UBSan) and runs it for a
# bounded time (default 60 s) on a scratch copy of the kept seed corpus.
#   fuzz/chat/run.sh [seconds]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
secs="${1:-60}"
out="${FUZZ_OUT:-$root/build-fuzz-chat}"
mkdir -p "$out/corpus" "$out/artifacts"
srcs=("$root"/src/chat/*.cc "$root"/src/chat/jinja/*.cc "$root"/src/core/dtype.cc "$root"/src/core/log.cc)
if [[ ! -x "$out/chat_template_fuzzer" || -n "$(find "${srcs[@]}" "$here/chat_template_fuzzer.cc" -newer "$out/chat_template_fuzzer" 2>/dev/null)" ]]; then
  clang++-14 -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I "$root/src" "$here/chat_template_fuzzer.cc" "${srcs[@]}" -o "$out/chat_template_fuzzer"
fi
cp -n "$here"/corpus/* "$out/corpus/" 2>/dev/null || true
# Deep recursion is bounded by the interpreter's limits; give ASan's larger frames room anyway.
ulimit -s 65536 || true
"$out/chat_template_fuzzer" "$out/corpus" -max_total_time="$secs" -max_len=4096 -timeout=10 \
  -rss_limit_mb=2048 -artifact_prefix="$out/artifacts/" -print_final_stats=1
