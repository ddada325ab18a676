#!/usr/bin/env bash
# fuse_norm_grad_adds_bitwise.sh - mt-fuse-norm-grad-adds never changes the math: a Llama
# compiled at PRECISION with the pass (the default) and with --no-fuse-norm-grad-adds trains 20
# steps to bitwise-identical losses and weights (the fused kernel adds the residual gradient to
# the dx it rounded, and rounds the sum to bf16, as the add and the cast did). The fused step has
# an rms_norm_grad_add for each add it took, and under bf16 a cast fewer for each bf16 copy it
# writes. On the CPU backend, or on a GPU where megatrain-run's auto backend finds one.
# usage: fuse_norm_grad_adds_bitwise.sh BIN SRC MODEL PRECISION   (MODEL: a tests/models/llm/*.onnx
#        stem; PRECISION: fp32 or bf16)
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
LLM_PRECISION=$4
source "$(dirname "$0")/bitwise_common.sh"

# The lines of FILE that match PATTERN (0 when none).
count() { grep -c -- "$2" "$1" || true; }

# Compiles NAME.plan; prints its add steps, cast steps, fused steps and fused steps with a copy.
compile() {
  local name=$1; shift
  compile_plan "$name" scheduled mlir "$@" || return 1
  echo "$(count "$name.mlir" ' = mt.add ') $(count "$name.mlir" ' = mt.cast ')" \
    "$(count "$name.mlir" 'mt.rms_norm_grad_add ') $(count "$name.mlir" 'mt.rms_norm_grad_add .*xbf16>)$')"
}

compile_counts fused "with the pass"
compile_counts plain "with --no-fuse-norm-grad-adds" --no-fuse-norm-grad-adds
read -r FUSED_ADDS FUSED_CASTS FUSED STEPS_COPY < fused.counts
read -r PLAIN_ADDS PLAIN_CASTS PLAIN _ < plain.counts
echo "$MODEL at $LLM_PRECISION: adds $PLAIN_ADDS -> $FUSED_ADDS, casts $PLAIN_CASTS -> $FUSED_CASTS," \
  "$FUSED rms_norm_grad_add steps ($STEPS_COPY with a bf16 copy)"
[[ $PLAIN -eq 0 ]] || fail "--no-fuse-norm-grad-adds left $PLAIN fused steps"
[[ $FUSED -gt 0 ]] || fail "the pass fused no add"
[[ $FUSED_ADDS -eq $((PLAIN_ADDS - FUSED)) ]] ||
  fail "expected one add fewer per fused step ($PLAIN_ADDS - $FUSED), got $FUSED_ADDS"
[[ $FUSED_CASTS -eq $((PLAIN_CASTS - STEPS_COPY)) ]] ||
  fail "expected one cast fewer per bf16 copy ($PLAIN_CASTS - $STEPS_COPY), got $FUSED_CASTS"
if [[ $LLM_PRECISION == bf16 ]]; then
  [[ $STEPS_COPY -gt 0 ]] || fail "no fused step writes the bf16 copy under bf16"
else
  [[ $STEPS_COPY -eq 0 ]] || fail "$STEPS_COPY fused steps write a bf16 copy under $LLM_PRECISION"
fi

expect_same_training fused plain
echo "PASS: $MODEL trains bitwise-identically with and without mt-fuse-norm-grad-adds"
