#!/usr/bin/env bash
# Sanitizer builds of the threaded core for CI (issue 14), with GCC (no extra packages; clang's
# ASan cannot compile the transport's Asio coroutines). Each builds in its own tree
# (build-ci-tsan, build-ci-asan); any report fails the run (TSan exits 66, ASan / UBSan abort).
#  - TSan: the thread pool, the huge-page arena, the HTTP handlers' WorkerPool and every kernel
#    test (the kernels split their work over the thread pool; TSan checks those splits).
#  - ASan + UBSan: the thread pool, arena and WorkerPool tests and every kernel test (adds about 2 minutes on
#    2 cores: 1m53s to build kernels_test, 11 s to run it). Its attention tests once failed here
#    against a reference that GCC 12 miscompiled under -fsanitize=undefined (a ?: subscript,
#    src/kernels/attention.cc ReferenceImpl; issue 14).
# The engine and server suites under sanitizers are the CMake presets (CMakePresets.json:
# `cmake --preset tsan && cmake --build --preset tsan && ctest --preset tsan`), too slow for CI's
# 30 minutes on 2 cores.
#   scripts/sanitize.sh [tsan|asan|all]     (default all)
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

run() {  # name, flags, targets...
  local name=$1 dir=build-ci-$1 flags=$2
  shift 2
  local targets=("$@")
  echo "=== sanitize: $name ($flags)"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=gcc \
    -DCMAKE_CXX_COMPILER=g++ "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags" \
    -DMOESERVE_WERROR=ON "${launcher[@]}" > /dev/null
  cmake --build "$dir" -j2 --target "${targets[@]}" > "$dir/build.log" 2>&1 || {
    tail -40 "$dir/build.log"
    exit 1
  }
  for t in "${targets[@]}"; do
    local bin
    bin=$(find "$dir/tests" -name "$t" -type f -perm -u+x | head -1)
    echo "--- $name: $t"
    "$bin" --gtest_brief=1
  done
}

case $which in
  tsan | all) run tsan "-fsanitize=thread" runtime_test worker_pool_test kernels_test ;;&
  asan | all)
    run asan "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
      runtime_test worker_pool_test kernels_test
    ;;
  tsan | asan) ;;
  *) echo "usage: $0 [tsan|asan|all]" >&2; exit 2 ;;
esac
