#!/usr/bin/env bash
# Installs everything moeserve's build and tests need on Debian 12, builds, and runs the tests.
#   bash scripts/setup.sh            # install + build + test
#   bash scripts/setup.sh --no-test  # install + build
# MOESERVE_CMAKE_ARGS adds configure options (CI: -DMOESERVE_WERROR=ON -DMOESERVE_REQUIRE_ALL_TESTS=ON).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

PACKAGES=(
  build-essential cmake pkg-config git curl
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcpp-httplib-dev libboost-dev libcli11-dev libpcre2-dev libicu-dev
  libjemalloc-dev  # the moeserve executable's malloc (MOESERVE_MALLOC in CMakeLists.txt)
  libopenmpi-dev openmpi-bin
  python3 python3-torch python3-numpy
  clang libclang-rt-14-dev clang-format ccache
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js: use the machine's own if it has one (Debian's would shadow a newer install).
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Reference implementations the tests compare against (HF tokenizers, HF jinja, the openai client).
if [ ! -d node_modules ] || [ package.json -nt node_modules ]; then
  npm ci --no-audit --no-fund || npm install --no-audit --no-fund
  touch node_modules
fi

JOBS="${JOBS:-2}"
# shellcheck disable=SC2086  # MOESERVE_CMAKE_ARGS is a list of words
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${MOESERVE_CMAKE_ARGS:-}
cmake --build build -j"$JOBS"

if [ "${1:-}" != "--no-test" ]; then
  ctest --test-dir build --output-on-failure -j"$JOBS"
fi
