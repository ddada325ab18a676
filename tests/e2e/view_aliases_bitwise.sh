#!/usr/bin/env bash
# view_aliases_bitwise.sh - views never change the math (docs/compiler.md "Views"): a model
# compiled with mt-view-aliases (the default) and with --no-view-aliases trains 20 steps on the
# CPU backend, which poisons every dead arena tensor, to bitwise-identical losses and weights
# (a reshape copy is exact). The plan with views has as many fewer reshape and transpose
# steps as megatrain-inspect counts views, and at least one.
# usage: view_aliases_bitwise.sh BIN SRC MODEL   (MODEL: demo, demo_bf16, or a tests/models/llm/*.onnx stem)
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
LLM_PRECISION=bf16
source "$(dirname "$0")/bitwise_common.sh"

# compile NAME [flags]: writes NAME.plan, prints its reshape and transpose kernel steps.
compile() {
  local name=$1; shift
  compile_plan "$name" plan-text txt "$@" || return 1
  grep -cE 'kernel: "(reshape|transpose)"' "$name.txt" || true
}

VIEWED=$(compile views) || fail "compile with mt-view-aliases"
COPIED=$(compile copies --no-view-aliases) || fail "compile with --no-view-aliases"
"$BIN/megatrain-inspect" views.plan > views.inspect || fail "megatrain-inspect views.plan"
VIEWS=$(sed -n 's/^ *views *\([0-9]*\) tensors.*/\1/p' views.inspect)
"$BIN/megatrain-inspect" copies.plan > copies.inspect || fail "megatrain-inspect copies.plan"
grep -q '^ *views ' copies.inspect && fail "--no-view-aliases still made views"
grep -q 'format *1\.8' copies.inspect && fail "--no-view-aliases wrote a minor 8 plan"
echo "reshape and transpose steps: $COPIED with --no-view-aliases, $VIEWED with views ($VIEWS views)"
[[ -n $VIEWS && $VIEWS -gt 0 ]] || fail "no views in the plan"
[[ $((COPIED - VIEWED)) -eq $VIEWS ]] || fail "$VIEWS views but $((COPIED - VIEWED)) fewer copy steps"

expect_same_training views copies
echo "PASS: $MODEL trains bitwise-identically with views and with copies"
