#!/usr/bin/env bash
# matmul_epilogues_bitwise.sh - mt-fuse-matmul-epilogues never changes the math: a model compiled
# with the pass (the default) and with --no-matmul-epilogues trains 20 steps on the CPU backend to
# bitwise-identical losses and weights (matmul_add rounds the product to f32 and adds r in f32, as
# matmul then add do; matmul_bias_gelu's GELU is gelu's expression of that sum, matmul_gelu_grad's
# slope gelu_grad's of the product; docs/ops.md "Matmul epilogues"), and the fused plan has
# matmul_add steps and fewer kernel steps. Prints the kernel steps of one training step with and
# without the pass.
# usage: matmul_epilogues_bitwise.sh BIN SRC MODEL [PRECISION [GELU]]
#   MODEL: demo, demo_bf16, or a tests/models/llm/*.onnx stem; PRECISION: the LLM's --precision
#   (default bf16); GELU=1: the fused plan must also have matmul_bias_gelu and matmul_gelu_grad steps.
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
LLM_PRECISION=${4:-bf16}
GELU=${5:-0}
source "$(dirname "$0")/bitwise_common.sh"

# Compiles NAME.plan and prints its kernel steps, its matmul_add steps, its matmul_bias_gelu steps and
# its matmul_gelu_grad steps.
compile() {
  local name=$1; shift
  compile_plan "$name" plan-text txt "$@" || return 1
  echo "$(grep -c 'kernel: "' "$name.txt") $(grep -c 'kernel: "matmul_add"' "$name.txt" || true)" \
    "$(grep -c 'kernel: "matmul_bias_gelu"' "$name.txt" || true)" \
    "$(grep -c 'kernel: "matmul_gelu_grad"' "$name.txt" || true)"
}

compile_counts fused "with mt-fuse-matmul-epilogues"
compile_counts plain "with --no-matmul-epilogues" --no-matmul-epilogues
read -r FUSED_KERNELS FUSED_EPILOGUES FUSED_GELUS FUSED_GRADS < fused.counts
read -r PLAIN_KERNELS PLAIN_EPILOGUES PLAIN_GELUS PLAIN_GRADS < plain.counts
echo "kernel steps per training step of $MODEL: $PLAIN_KERNELS without mt-fuse-matmul-epilogues," \
  "$FUSED_KERNELS with it ($FUSED_EPILOGUES matmul_add, $FUSED_GELUS matmul_bias_gelu," \
  "$FUSED_GRADS matmul_gelu_grad)"
[[ $PLAIN_EPILOGUES -eq 0 && $PLAIN_GELUS -eq 0 && $PLAIN_GRADS -eq 0 ]] ||
  fail "--no-matmul-epilogues left $PLAIN_EPILOGUES matmul_add, $PLAIN_GELUS matmul_bias_gelu and" \
    "$PLAIN_GRADS matmul_gelu_grad steps"
[[ $GELU -eq 0 || $FUSED_GELUS -gt 0 ]] || fail "the pass fused no GELU"
[[ $GELU -eq 0 || $FUSED_GRADS -gt 0 ]] || fail "the pass fused no GELU backward"
[[ $FUSED_EPILOGUES -gt 0 ]] || fail "the pass fused no add"
[[ $FUSED_KERNELS -lt $PLAIN_KERNELS ]] || fail "the pass saved no kernel ($PLAIN_KERNELS -> $FUSED_KERNELS)"

expect_same_training fused plain
echo "PASS: $MODEL trains bitwise-identically with and without mt-fuse-matmul-epilogues"
