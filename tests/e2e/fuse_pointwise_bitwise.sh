#!/usr/bin/env bash
# fuse_pointwise_bitwise.sh - mt-fuse-pointwise never changes the math: a model compiled with the
# pass (the default) and with --no-fuse-pointwise trains 20 steps on the CPU backend to
# bitwise-identical losses and weights (each instruction of a pointwise program is the expression
# of the unfused CPU kernel, in its type and order), and the fused plan launches fewer kernels.
# Prints the kernel steps of one training step with and without the pass.
# usage: fuse_pointwise_bitwise.sh BIN SRC MODEL   (MODEL: demo, demo_bf16, or a tests/models/llm/*.onnx stem)
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
LLM_PRECISION=bf16
source "$(dirname "$0")/bitwise_common.sh"

# Compiles NAME.plan and prints its kernel steps and its pointwise steps.
compile() {
  local name=$1; shift
  compile_plan "$name" plan-text txt "$@" || return 1
  echo "$(grep -c 'kernel: "' "$name.txt") $(grep -c 'kernel: "pointwise"' "$name.txt" || true)"
}

compile_counts fused "with mt-fuse-pointwise"
compile_counts plain "with --no-fuse-pointwise" --no-fuse-pointwise
read -r FUSED_KERNELS FUSED_POINTWISE < fused.counts
read -r PLAIN_KERNELS PLAIN_POINTWISE < plain.counts
echo "kernel steps per training step of $MODEL: $PLAIN_KERNELS without mt-fuse-pointwise," \
  "$FUSED_KERNELS with it ($FUSED_POINTWISE pointwise)"
[[ $PLAIN_POINTWISE -eq 0 ]] || fail "--no-fuse-pointwise left $PLAIN_POINTWISE pointwise steps"
[[ $FUSED_POINTWISE -gt 0 ]] || fail "the pass fused no chain"
[[ $FUSED_KERNELS -lt $PLAIN_KERNELS ]] || fail "the pass saved no kernel ($PLAIN_KERNELS -> $FUSED_KERNELS)"

expect_same_training fused plain
echo "PASS: $MODEL trains bitwise-identically with and without mt-fuse-pointwise"
