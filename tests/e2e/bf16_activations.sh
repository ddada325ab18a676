#!/usr/bin/env bash
# bf16_activations.sh - --bf16-activations (mt-bf16-activations): the bf16 products that only
# elementwise programs read write bf16, as torch.autocast rounds them. A Llama compiled at bf16
# with and without the flag: the flagged step has more products writing bf16 (the gate and up
# projections, the MLP activation's gradient and the query and key projections, in every
# layer), a smaller device arena, and trains 20 steps to losses within 1e-2 (relative) of the unflagged step's. Then
# tests/gpu/llm_vs_pytorch.sh's bf16-act rows: the four tiny LLMs against PyTorch's fp32 losses
# inside the bf16 bar. On the CPU backend, or on a GPU where megatrain-run's auto backend finds
# one. A flag that needs --precision bf16 is refused at fp32.
# usage: bf16_activations.sh BIN SRC MODEL   (MODEL: a tests/models/llm/*.onnx stem)
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
LLM_PRECISION=bf16
source "$(dirname "$0")/bitwise_common.sh"

STEP='mt.matmul .*-> tensor<[0-9x]*xbf16>$'
# Compiles NAME.plan; prints its bf16-writing products and its device arena in bytes.
compile() {
  local name=$1; shift
  compile_plan "$name" scheduled mlir "$@" || return 1
  echo "$(grep -c "$STEP" "$name.mlir" || true)" \
    "$(sed -n 's/^  device arena .*(\([0-9]*\) bytes).*/\1/p' "$name.log")"
}

compile_counts act "with --bf16-activations" --bf16-activations
compile_counts plain "without --bf16-activations"
read -r ACT_STEPS ACT_ARENA < act.counts
read -r PLAIN_STEPS PLAIN_ARENA < plain.counts
echo "bf16-writing products in the step of $MODEL: $PLAIN_STEPS without --bf16-activations," \
  "$ACT_STEPS with it; device arena $PLAIN_ARENA -> $ACT_ARENA bytes"
[[ $ACT_STEPS -gt $PLAIN_STEPS ]] || fail "--bf16-activations made no product write bf16"
[[ -n $ACT_ARENA && -n $PLAIN_ARENA ]] || fail "no device arena in the compile summary"
python3 -c "import sys; sys.exit(0 if float('$ACT_ARENA') < float('$PLAIN_ARENA') else 1)" ||
  fail "the arena did not shrink ($PLAIN_ARENA -> $ACT_ARENA)"

train act
train plain
[[ $(wc -l < act.losses) -eq 20 ]] || fail "expected 20 losses"
python3 - act.losses plain.losses <<'PY' || fail "the losses drift apart"
import math, sys
act = [float(l) for l in open(sys.argv[1])]
plain = [float(l) for l in open(sys.argv[2])]
assert all(math.isfinite(a) for a in act), act
worst = max(abs(a - p) / abs(p) for a, p in zip(act, plain))
print(f"losses {plain[0]:.5f} -> {plain[-1]:.5f} without, {act[0]:.5f} -> {act[-1]:.5f} with; "
      f"worst relative gap {worst:.2e}")
assert act[-1] < act[0], "no training progress"
sys.exit(0 if worst <= 1e-2 else 1)
PY
cmp -s act.losses plain.losses && fail "the losses are bitwise equal: the flag changed nothing"

if "$BIN/megatrain-compile" "$ONNX" -o fp32.plan --precision fp32 --bf16-activations > fp32.log 2>&1; then
  fail "--bf16-activations was accepted at --precision fp32"
fi
grep -q "needs --precision bf16" fp32.log || { cat fp32.log; fail "no clear error at fp32"; }

BACKEND=${BACKEND:-auto} bash "$SRC/tests/gpu/llm_vs_pytorch.sh" "$BIN" "$SRC" "$TMP/vs_pytorch" bf16-act
echo "PASS: --bf16-activations rounds $((ACT_STEPS - PLAIN_STEPS)) products of $MODEL to bf16 and trains inside the bars"
