#!/usr/bin/env bash
# fold_norm_casts_bitwise.sh - mt-fold-norm-casts never changes the math: a Llama compiled at
# bf16 with the pass (the default) and with --no-fold-norm-casts trains 20 steps on the CPU
# backend to bitwise-identical losses and weights (the norm rounds its f32 result to bf16 as the
# cast did), and the folded plan has rms_norm steps with bf16 results and fewer casts.
# usage: fold_norm_casts_bitwise.sh BIN SRC MODEL   (MODEL: a tests/models/llm/*.onnx stem)
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
LLM_PRECISION=bf16
source "$(dirname "$0")/bitwise_common.sh"

# Compiles NAME.plan; prints its cast steps and its rms_norm steps with a bf16 result.
compile() {
  local name=$1; shift
  compile_plan "$name" scheduled mlir "$@" || return 1
  echo "$(grep -c ' = mt.cast ' "$name.mlir" || true) $(grep -c 'mt.rms_norm .*-> tensor<[0-9x]*xbf16>' "$name.mlir" || true)"
}

read -r FOLDED_CASTS FOLDED_NORMS < <(compile folded) || fail "compile with mt-fold-norm-casts"
read -r PLAIN_CASTS PLAIN_NORMS < <(compile plain --no-fold-norm-casts) || fail "compile with --no-fold-norm-casts"
echo "casts in the step of $MODEL: $PLAIN_CASTS without mt-fold-norm-casts, $FOLDED_CASTS with it" \
  "($FOLDED_NORMS rms_norm steps write bf16)"
[[ $PLAIN_NORMS -eq 0 ]] || fail "--no-fold-norm-casts left $PLAIN_NORMS bf16 norms"
[[ $FOLDED_NORMS -gt 0 ]] || fail "the pass folded no cast"
[[ $FOLDED_CASTS -eq $((PLAIN_CASTS - FOLDED_NORMS)) ]] ||
  fail "expected one cast fewer per folded norm ($PLAIN_CASTS - $FOLDED_NORMS), got $FOLDED_CASTS"

expect_same_training folded plain
echo "PASS: $MODEL trains bitwise-identically with and without mt-fold-norm-casts"
