#!/usr/bin/env bash
# fold_casts_bitwise.sh - a fold of bf16 casts into their producer never changes the math:
# PRODUCER norm (mt-fold-norm-casts: an RMS norm read only by bf16 casts writes bf16) or product
# (mt-fold-product-casts: a bf16 matmul read only by bf16 casts writes bf16). A Llama compiled at
# bf16 with the pass (the default) and with --no-fold-PRODUCER-casts trains 20 steps to
# bitwise-identical losses and weights (the producer rounds its f32 result to bf16 as the cast
# did), and the folded plan has producer steps with bf16 results and one cast fewer for each. On
# the CPU backend, or on a GPU where megatrain-run's auto backend finds one (bitwise_common.sh
# asks for cuDNN's deterministic attention backward).
# usage: fold_casts_bitwise.sh BIN SRC MODEL PRODUCER   (MODEL: a tests/models/llm/*.onnx stem;
#        PRODUCER: norm or product)
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
PRODUCER=$4
LLM_PRECISION=bf16
source "$(dirname "$0")/bitwise_common.sh"

case $PRODUCER in
  norm) STEP='mt.rms_norm .*-> tensor<[0-9x]*xbf16>' ;;
  product) STEP='mt.matmul .*-> tensor<[0-9x]*xbf16>$' ;;
  *) fail "PRODUCER is '$PRODUCER'; expected norm or product" ;;
esac
PASS=mt-fold-$PRODUCER-casts

# Compiles NAME.plan; prints its cast steps and its producer steps with a bf16 result.
compile() {
  local name=$1; shift
  compile_plan "$name" scheduled mlir "$@" || return 1
  echo "$(grep -c ' = mt.cast ' "$name.mlir" || true) $(grep -c "$STEP" "$name.mlir" || true)"
}

compile_counts folded "with $PASS"
compile_counts plain "with --no-fold-$PRODUCER-casts" "--no-fold-$PRODUCER-casts"
read -r FOLDED_CASTS FOLDED_STEPS < folded.counts
read -r PLAIN_CASTS PLAIN_STEPS < plain.counts
echo "casts in the step of $MODEL: $PLAIN_CASTS without $PASS, $FOLDED_CASTS with it" \
  "($FOLDED_STEPS $PRODUCER steps write bf16)"
[[ $PLAIN_STEPS -eq 0 ]] || fail "--no-fold-$PRODUCER-casts left $PLAIN_STEPS bf16 ${PRODUCER}s"
[[ $FOLDED_STEPS -gt 0 ]] || fail "the pass folded no cast"
[[ $FOLDED_CASTS -eq $((PLAIN_CASTS - FOLDED_STEPS)) ]] ||
  fail "expected one cast fewer per folded $PRODUCER ($PLAIN_CASTS - $FOLDED_STEPS), got $FOLDED_CASTS"

expect_same_training folded plain
echo "PASS: $MODEL trains bitwise-identically with and without $PASS"
