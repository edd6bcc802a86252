#!/usr/bin/env bash
# graphserve set-up on a fresh Debian 12 machine (root, no GPU needed):
#   bash scripts/bootstrap.sh run    # install deps, build, run the server on the built-in default
#   bash scripts/bootstrap.sh test   # install deps, build, run every test (then again under ASan+UBSan)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-test}
jobs=$(nproc)

install_deps() {
  local pkgs=(build-essential cmake ninja-build pkg-config git curl ca-certificates
              nlohmann-json3-dev libboost-dev libcpp-httplib-dev libcli11-dev libspdlog-dev libfmt-dev
              libgtest-dev libgmock-dev libbenchmark-dev libpcre2-dev libutf8proc-dev
              libxxhash-dev gnuplot-nox ccache clang-format)
  local missing=()
  for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  # Node.js + npm run the OpenAI Node SDK test; a Node that bundles npm (nodesource) is fine.
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  if ((${#missing[@]})); then
    echo "bootstrap: installing ${missing[*]}"
    local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

build() {  # build <dir> [cmake args...]
  local dir=$1; shift
  # ccache keyed on paths relative to the checkout, so a fresh clone reuses an earlier build's objects.
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
}

install_deps
case "$what" in
  run)
    build build/release -DGS_BUILD_TESTS=OFF
    shift || true
    exec build/release/graphserve serve "$@"
    ;;
  test)
    # Style first: .clang-format is the rule for src/ and tests/.
    bash scripts/check_format.sh
    # The OpenAI Node SDK for the server's client-compatibility test (pinned by package-lock.json).
    (cd tests/server/node && npm ci --no-audit --no-fund --loglevel=error)
    build build/release
    (cd build/release && ctest --output-on-failure -j "$jobs")
    # The same tests under AddressSanitizer + UndefinedBehaviorSanitizer (CPU backend only).
    build build/asan -DGS_SANITIZE=ON -DGS_CUDA=OFF -DGS_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
    (cd build/asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j "$jobs")
    ;;
  *) echo "usage: bash scripts/bootstrap.sh run|test" >&2; exit 2 ;;
esac
