#!/usr/bin/env bash
# bf16_attention_bitwise.sh - mt-bf16-attention never changes the math: a Llama-family model
# compiled at bf16 with the pass (the default: attention on bf16 q, k, v, y) and with
# --no-bf16-attention (f32 tensors, the kernels rounding them to bf16 and their results back)
# trains 20 steps to bitwise-identical losses and weights, and the default plan's attention
# steps read and write bf16 with fewer casts in the step. On the CPU backend, or on a GPU where
# megatrain-run's auto backend finds one (bitwise_common.sh asks for cuDNN's deterministic
# attention backward).
# usage: bf16_attention_bitwise.sh BIN SRC MODEL   (MODEL: a tests/models/llm/*.onnx stem)
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
LLM_PRECISION=bf16
source "$(dirname "$0")/bitwise_common.sh"

# Compiles NAME.plan; prints its cast steps and its attention steps on bf16 tensors.
compile() {
  local name=$1; shift
  compile_plan "$name" scheduled mlir "$@" || return 1
  echo "$(grep -c ' = mt.cast ' "$name.mlir" || true)" \
    "$(grep -c 'mt.attention\(_grad\)\? .* : (tensor<[0-9x]*xbf16>' "$name.mlir" || true)"
}

compile_counts narrow "with mt-bf16-attention"
compile_counts plain "with --no-bf16-attention" --no-bf16-attention
read -r BF16_CASTS BF16_ATTENTION < narrow.counts
read -r PLAIN_CASTS PLAIN_ATTENTION < plain.counts
echo "$MODEL: $BF16_ATTENTION attention steps on bf16 tensors; casts in the step:" \
  "$PLAIN_CASTS without mt-bf16-attention, $BF16_CASTS with it"
[[ $PLAIN_ATTENTION -eq 0 ]] || fail "--no-bf16-attention left $PLAIN_ATTENTION bf16 attention steps"
[[ $BF16_ATTENTION -gt 0 ]] || fail "the pass gave no attention step bf16 tensors"
[[ $BF16_CASTS -lt $PLAIN_CASTS ]] || fail "expected fewer casts with the pass ($BF16_CASTS vs $PLAIN_CASTS)"

expect_same_training narrow plain
echo "PASS: $MODEL trains bitwise-identically with and without mt-bf16-attention"
