#!/usr/bin/env bash
# fold_product_casts_bitwise.sh - mt-fold-product-casts never changes the math: a Llama compiled
# at bf16 with the pass (the default) and with --no-fold-product-casts trains 20 steps to
# bitwise-identical losses and weights (the product rounds its f32 result to bf16 as the cast
# did), and the folded plan has matmul steps with bf16 results and one cast fewer for each. On
# the CPU backend, or on a GPU where megatrain-run's auto backend finds one (bitwise_common.sh
# asks for cuDNN's deterministic attention backward).
# usage: fold_product_casts_bitwise.sh BIN SRC MODEL   (MODEL: a tests/models/llm/*.onnx stem)
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
LLM_PRECISION=bf16
source "$(dirname "$0")/bitwise_common.sh"

# Compiles NAME.plan; prints its cast steps and its matmul steps with a bf16 result.
compile() {
  local name=$1; shift
  compile_plan "$name" scheduled mlir "$@" || return 1
  echo "$(grep -c ' = mt.cast ' "$name.mlir" || true) $(grep -c 'mt.matmul .*-> tensor<[0-9x]*xbf16>$' "$name.mlir" || true)"
}

read -r FOLDED_CASTS FOLDED_PRODUCTS < <(compile folded) || fail "compile with mt-fold-product-casts"
read -r PLAIN_CASTS PLAIN_PRODUCTS < <(compile plain --no-fold-product-casts) || fail "compile with --no-fold-product-casts"
echo "casts in the step of $MODEL: $PLAIN_CASTS without mt-fold-product-casts, $FOLDED_CASTS with it" \
  "($FOLDED_PRODUCTS matmul steps write bf16)"
[[ $PLAIN_PRODUCTS -eq 0 ]] || fail "--no-fold-product-casts left $PLAIN_PRODUCTS bf16 products"
[[ $FOLDED_PRODUCTS -gt 0 ]] || fail "the pass folded no cast"
[[ $FOLDED_CASTS -eq $((PLAIN_CASTS - FOLDED_PRODUCTS)) ]] ||
  fail "expected one cast fewer per folded product ($PLAIN_CASTS - $FOLDED_PRODUCTS), got $FOLDED_CASTS"

expect_same_training folded plain
echo "PASS: $MODEL trains bitwise-identically with and without mt-fold-product-casts"
