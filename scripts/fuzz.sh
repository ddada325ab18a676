#!/usr/bin/env bash
# scripts/fuzz.sh - runs one libFuzzer target for a while over the repository's seeds (docs/fuzzing.md).
#
# usage: scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#   TARGET   a target of tests/fuzz/CMakeLists.txt: fuzz_plan_loader, fuzz_checkpoint, fuzz_npy,
#            fuzz_token_sidecar, fuzz_onnx_weights, fuzz_onnx_import or fuzz_onnx_structure
# Installs clang-19 and libFuzzer when missing (FUZZ=1 scripts/setup.sh), configures
# build-fuzz/ (clang, MEGATRAIN_FUZZ=ON, no CUDA), builds TARGET, makes the seed
# corpus (tests/fuzz/make_corpus.sh, with the tools of build/, built if missing)
# and fuzzes for SECONDS. New inputs go to build-fuzz/fuzz-corpus/TARGET, crashes
# to build-fuzz/fuzz-crashes/TARGET; commit each crash under tests/fuzz/regressions/TARGET.
# BUILD_LOCK=FILE serializes the builds with others that take the same lock.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 TARGET SECONDS [libFuzzer flags...]" >&2; exit 2; }
TARGET=$1 SECONDS_=$2
shift 2
cd "$(dirname "$0")/.."
SRC=$(pwd)
FUZZ_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
locked() { if [[ -n ${BUILD_LOCK:-} ]]; then flock "$BUILD_LOCK" "$@"; else "$@"; fi; }

FUZZ=1 bash scripts/setup.sh >/dev/null
if [[ ! -f $FUZZ_DIR/build.ninja ]]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$FUZZ_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMEGATRAIN_FUZZ=ON -DMEGATRAIN_CUDA=OFF >/dev/null
fi
locked cmake --build "$FUZZ_DIR" --target "$TARGET" fuzz_checkpoint
# The seeds need the ordinary tools (megatrain-compile, megatrain-run).
if [[ ! -x build/bin/megatrain-compile || ! -x build/bin/megatrain-run ]]; then
  locked bash scripts/build.sh
fi
CORPUS=$FUZZ_DIR/fuzz-corpus
bash tests/fuzz/make_corpus.sh build/bin "$CORPUS" "$FUZZ_DIR/bin" >/dev/null

CRASHES=$FUZZ_DIR/fuzz-crashes/$TARGET
mkdir -p "$CRASHES" "tests/fuzz/regressions/$TARGET"
LOG=$FUZZ_DIR/fuzz-$TARGET.log
# The committed regressions are read but never written (only the first
# directory receives new inputs).
set +e
# An input that takes over 30 s (ASan included) is reported as a timeout, a crash.
"$FUZZ_DIR/bin/$TARGET" -max_total_time="$SECONDS_" -timeout=30 -print_final_stats=1 -artifact_prefix="$CRASHES/" \
  "$@" "$CORPUS/$TARGET" "tests/fuzz/regressions/$TARGET" 2>&1 | tee "$LOG" | grep -E '^#[0-9]+.*(pulse|DONE)|ERROR|SUMMARY'
rc=${PIPESTATUS[0]}
set -e
execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$LOG" | grep -o '[0-9]*$' || true)
rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$LOG" | grep -o '[0-9]*$' || true)
echo "fuzz: $TARGET ran ${execs:-?} inputs in ${SECONDS_}s (${rate:-?} exec/s); log $LOG"
found=$(ls "$CRASHES" 2>/dev/null || true)
if [[ -n $found ]]; then
  echo "fuzz: crash inputs in $CRASHES:"
  ls -l "$CRASHES"
fi
exit "$rc"
