#!/usr/bin/env bash
# fold_head_transposes_bitwise.sh - mt-fold-head-transposes never changes the math: an LLM export
# compiled with the pass (the default) and with --no-fold-head-transposes trains 20 steps on the
# CPU backend to bitwise-identical losses and weights (attention, attention_grad, rotary and
# rotary_grad compute every element the same way in either layout; only memory order differs),
# and the folded plan has fewer transpose steps, its attention and rotary steps the bshd layout.
# usage: fold_head_transposes_bitwise.sh BIN SRC MODEL   (MODEL: a tests/models/llm/*.onnx stem)
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
LLM_PRECISION=bf16
source "$(dirname "$0")/bitwise_common.sh"

compile() {
  local name=$1; shift
  compile_plan "$name" plan-text txt "$@" || return 1
  grep -c 'kernel: "transpose"' "$name.txt" || true
}

FOLDED=$(compile folded) || fail "compile with mt-fold-head-transposes"
PLAIN=$(compile plain --no-fold-head-transposes) || fail "compile with --no-fold-head-transposes"
echo "transpose steps: $PLAIN without the pass, $FOLDED with it"
[[ $FOLDED -lt $PLAIN ]] || fail "the pass folded no transpose ($PLAIN -> $FOLDED)"
grep -q 'name: "bshd"' folded.txt || fail "no step of the folded plan has the bshd layout"
! grep -q 'name: "bshd"' plain.txt || fail "a step of the plain plan has the bshd layout"

expect_same_training folded plain
echo "PASS: $MODEL trains bitwise-identically with and without mt-fold-head-transposes"
