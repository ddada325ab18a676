#!/usr/bin/env bash
# product_accumulation_bitwise.sh - a weight gradient's product writing its micro-batch part
# straight into the device accumulator (part 0 as the product's output, parts k >= 1 as a
# matmul_add with the accumulator as addend and output; docs/tiering.md "Micro-batches") never
# changes the math: the model compiled with 2 micro-batches, with the products accumulating (the
# default) and with --no-product-accumulation (each part its own tensor, copied or ACCUMULATEd
# into the accumulator after its product), trains 20 steps to bitwise-identical losses and
# weights, with the state on the device and on the host (its sums on the device, copied out
# once for the host AdamW). The accumulating plan must have fewer ACCUMULATE steps, fewer steps
# in all and more matmul_add steps, and its products must write grad:<param> tensors.
# usage: product_accumulation_bitwise.sh BIN SRC MODEL HOME [PRECISION]
#   MODEL: demo, demo_bf16, or a tests/models/llm/*.onnx stem; HOME: device or host (--state-home);
#   PRECISION: the LLM's --precision (default bf16).
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
HOME_TIER=$4
LLM_PRECISION=${5:-bf16}
source "$(dirname "$0")/bitwise_common.sh"

# Compiles NAME.plan and prints its steps, ACCUMULATE steps, matmul_add steps and the steps
# whose output is a grad:<param> accumulator.
compile() {
  local name=$1; shift
  compile_plan "$name" plan-text txt --microbatches 2 --state-home "$HOME_TIER" "$@" || return 1
  python3 - "$name.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
names = {int(i): n for i, n in re.findall(r'tensors \{\s*id: (\d+)\s*name: "([^"]*)"', text)}
steps = re.findall(r'\nsteps \{(.*?)\n\}', text, re.S)
accumulate = sum('kind: ACCUMULATE' in s for s in steps)
matmul_add = sum('kernel: "matmul_add"' in s for s in steps)
into = sum(1 for s in steps if re.search(r'kernel: "matmul(_add)?"', s)
           and any(names.get(int(o), '').startswith('grad:') for o in re.findall(r'outputs: (\d+)', s)))
print(len(steps), accumulate, matmul_add, into)
PY
}

compile_counts fused "with the products accumulating"
compile_counts plain "with --no-product-accumulation" --no-product-accumulation
read -r FUSED_STEPS FUSED_ACC FUSED_ADD FUSED_INTO < fused.counts
read -r PLAIN_STEPS PLAIN_ACC PLAIN_ADD PLAIN_INTO < plain.counts
echo "$MODEL, state on the $HOME_TIER, 2 micro-batches: steps $PLAIN_STEPS -> $FUSED_STEPS," \
  "ACCUMULATE $PLAIN_ACC -> $FUSED_ACC, matmul_add $PLAIN_ADD -> $FUSED_ADD," \
  "products into an accumulator $PLAIN_INTO -> $FUSED_INTO"
[[ $PLAIN_INTO -eq 0 ]] || fail "--no-product-accumulation left $PLAIN_INTO products writing an accumulator"
[[ $FUSED_INTO -gt 0 ]] || fail "no product writes its accumulator"
[[ $FUSED_ACC -lt $PLAIN_ACC ]] || fail "ACCUMULATE steps did not fall ($PLAIN_ACC -> $FUSED_ACC)"
[[ $FUSED_ADD -gt $PLAIN_ADD ]] || fail "matmul_add steps did not rise ($PLAIN_ADD -> $FUSED_ADD)"
[[ $FUSED_STEPS -lt $PLAIN_STEPS ]] || fail "the plan has no fewer steps ($PLAIN_STEPS -> $FUSED_STEPS)"

expect_same_training fused plain
echo "PASS: $MODEL trains bitwise-identically with and without the products accumulating ($HOME_TIER)"
