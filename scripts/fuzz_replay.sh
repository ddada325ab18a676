#!/usr/bin/env bash
# scripts/fuzz_replay.sh - builds every libFuzzer target and replays its seeds and regressions once (ctest -L fuzz).
#
# What CI runs after the README's test command (docs/fuzzing.md): installs
# clang-19 and libFuzzer (FUZZ=1 scripts/setup.sh), configures build-fuzz/
# (clang, ASan and UBSan, no CUDA), builds only the fuzz targets, writes the
# seed corpora with the tools of build/ (built if missing) and runs each target
# once over its corpus and every input in tests/fuzz/regressions/. A crash,
# sanitizer report or timeout in any of them fails the run.
# Environment: FUZZ_BUILD_DIR (default build-fuzz), BUILD_DIR (default build),
# BUILD_LOCK=FILE to serialize the builds with others taking the same lock.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
BUILD_DIR=${BUILD_DIR:-build}
locked() { if [[ -n ${BUILD_LOCK:-} ]]; then flock "$BUILD_LOCK" "$@"; else "$@"; fi; }

FUZZ=1 bash scripts/setup.sh
if [[ ! -f $FUZZ_DIR/build.ninja ]]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$FUZZ_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMEGATRAIN_FUZZ=ON -DMEGATRAIN_CUDA=OFF >/dev/null
fi
# The targets are whatever tests/fuzz/CMakeLists.txt registers under the label.
mapfile -t targets < <(sed -n 's/^ *megatrain_add_fuzzer(\([a-z_]*\).*/\1/p' tests/fuzz/CMakeLists.txt)
echo "fuzz_replay: building ${targets[*]}"
locked cmake --build "$FUZZ_DIR" --target "${targets[@]}"
if [[ ! -x $BUILD_DIR/bin/megatrain-compile || ! -x $BUILD_DIR/bin/megatrain-run ]]; then
  BUILD_DIR=$BUILD_DIR locked bash scripts/build.sh
fi
bash tests/fuzz/make_corpus.sh "$BUILD_DIR/bin" "$FUZZ_DIR/fuzz-corpus" "$FUZZ_DIR/bin"
ctest --test-dir "$FUZZ_DIR" -L fuzz --output-on-failure
