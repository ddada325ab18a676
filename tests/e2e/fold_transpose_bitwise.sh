#!/usr/bin/env bash
# fold_transpose_bitwise.sh - mt-fold-transpose never changes the math: a model compiled with
# the pass (the default) and with --no-fold-transpose trains 20 steps on the CPU backend to
# bitwise-identical losses and weights (the CPU matmul sums the same products in the same order
# whatever the transpose flags), and the folded plan has fewer transpose steps (the LLM
# exports) or as many (the demo, whose products read no transposed operand).
# usage: fold_transpose_bitwise.sh BIN SRC MODEL   (MODEL: demo, demo_bf16, or a tests/models/llm/*.onnx stem)
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
LLM_PRECISION=bf16
source "$(dirname "$0")/bitwise_common.sh"

# --no-fuse-linear-ce: GPT-2's only x @ W^T is its tied output projection, which
# mt-fuse-linear-ce would otherwise take (with its transpose) before this pass runs.
compile() {
  local name=$1; shift
  set -- --no-fuse-linear-ce "$@"
  compile_plan "$name" plan-text txt "$@" || return 1
  grep -c 'kernel: "transpose"' "$name.txt" || true
}

FOLDED=$(compile folded) || fail "compile with mt-fold-transpose"
PLAIN=$(compile plain --no-fold-transpose) || fail "compile with --no-fold-transpose"
echo "transpose steps: $PLAIN without the pass, $FOLDED with it"
[[ $FOLDED -le $PLAIN ]] || fail "the pass added transposes ($PLAIN -> $FOLDED)"
# The demo's products read no transposed operand; every LLM export's x @ W^T does.
if [[ $MODEL != demo* && $FOLDED -ge $PLAIN ]]; then fail "the pass folded no transpose ($PLAIN -> $FOLDED)"; fi

expect_same_training folded plain
echo "PASS: $MODEL trains bitwise-identically with and without mt-fold-transpose"
