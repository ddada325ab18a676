#!/usr/bin/env bash
# scripts/test.sh - the README's test command: set up, build, run every test that needs no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
# Tests labelled `gpu` need the GPU machine (bench/device.sh runs them there).
ctest --test-dir "$BUILD_DIR" --output-on-failure -LE gpu -j "$(nproc)"
