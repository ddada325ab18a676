#!/usr/bin/env bash
# tiering_bitwise.sh - offloading never changes the math (docs/tiering.md): a model compiled
# with no budget, with 50% and 25% of its unconstrained device arena, and with the smallest
# budget the planner reaches, trains 20 steps on the CPU backend to bitwise-identical losses
# and weights. A fraction below that smallest budget must fail with the error that names it
# (a model whose single largest op needs more than the fraction cannot fit it). The 50% and
# 25% budgets are also compiled without mt-tier's fill (--no-tiering-fill), and the checkpoint
# policy with and without the fill (checkpoint+fill), and with the spill alone
# (checkpoint+spill): the same bits.
# Every model compiles in exact fp32 (--precision fp32) except demo_bf16, the demo under
# --precision bf16: bf16 fetches from the host compute copies must not change the math either.
# usage: tiering_bitwise.sh BIN SRC MODEL   (MODEL: demo, demo_bf16, or a tests/models/llm/*.onnx stem)
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
LLM_PRECISION=fp32
source "$(dirname "$0")/bitwise_common.sh"
# Reshapes as copies: mt-tier plans before mt-view-aliases, so the budgets this test derives
# from final arenas must be arenas of the plans mt-tier sees (views are tested bitwise by
# e2e.view_aliases.*).
COMPILE+=(--no-view-aliases)

# compile NAME [flags]: writes NAME.plan, prints the device arena in bytes.
compile() {
  local name=$1; shift
  "$BIN/megatrain-compile" "$ONNX" -o "$name.plan" "${COMPILE[@]}" "$@" > "$name.log" 2>&1 ||
    { cat "$name.log"; return 1; }
  sed -n 's/.*device arena .*(\([0-9]*\) bytes).*/\1/p' "$name.log"
}

FULL=$(compile full) || fail "compile without a budget"
[[ -n $FULL ]] || fail "no arena size in the compile summary"
# The smallest budget the planner reaches: what a 1-byte budget's error names.
if "$BIN/megatrain-compile" "$ONNX" -o none.plan "${COMPILE[@]}" --device-memory 1 > tiny.log 2>&1; then
  fail "a 1-byte budget compiled"
fi
grep -q "cannot be met: the smallest budget that fits is" tiny.log || { cat tiny.log; fail "no smallest budget named"; }
MIN=$(sed -n 's/.*the smallest budget that fits is [^(]*(\([0-9]*\) bytes).*/\1/p' tiny.log)
[[ -n $MIN && $MIN -le $FULL ]] || fail "smallest budget '$MIN' is not below the unconstrained $FULL"

train full
RUNS=()
for pct in 50 25; do
  budget=$((FULL * pct / 100))
  if (( budget >= MIN )); then
    arena=$(compile "p$pct" --device-memory "$budget") || fail "$pct% ($budget bytes) should fit (smallest $MIN)"
    (( arena <= budget )) || fail "$pct%: arena $arena over the budget $budget"
    # The same budget without the fill (docs/tiering.md "The fill"): the same bits too.
    arena=$(compile "p$pct.nofill" --device-memory "$budget" --no-tiering-fill) ||
      fail "$pct% without the fill should fit"
    (( arena <= budget )) || fail "$pct% without the fill: arena $arena over the budget $budget"
    RUNS+=("p$pct" "p$pct.nofill")
  else
    if "$BIN/megatrain-compile" "$ONNX" -o x.plan "${COMPILE[@]}" --device-memory "$budget" > "p$pct.log" 2>&1; then
      fail "$pct% ($budget bytes) is below the smallest budget $MIN yet compiled"
    fi
    grep -q "the smallest budget that fits is .*($MIN bytes)" "p$pct.log" || { cat "p$pct.log"; fail "$pct%: wrong error"; }
    echo "$MODEL: $pct% of $FULL bytes is below the smallest budget $MIN: $(cut -c1-160 "p$pct.log")"
  fi
done
arena=$(compile min --device-memory "$MIN") || fail "the smallest budget $MIN does not compile"
(( arena <= MIN )) || fail "min: arena $arena over $MIN"
RUNS+=(min)
grep -q "OFFLOADED\|recompute: true" <("$BIN/megatrain-compile" "$ONNX" -o - --emit=plan-text "${COMPILE[@]}" --device-memory "$MIN") ||
  grep -q 'name: "dev:.*#' <("$BIN/megatrain-compile" "$ONNX" -o - --emit=plan-text "${COMPILE[@]}" --device-memory "$MIN") ||
  fail "the smallest budget's plan neither offloads, recomputes nor fetches again"

# The fill alone (docs/tiering.md "The fill"): the checkpoint policy's plan, and the same plan
# filled within a budget halfway between its arena and the unconstrained one, which keeps
# some of what the checkpoint plan recomputes but (on the LLMs) not all of it.
recomputes() { "$BIN/megatrain-inspect" "$1.plan" | grep -c "(recompute)" || true; }
CK=$(compile ck --device-memory "$FULL" --tiering-policy checkpoint) || fail "checkpoint at $FULL bytes"
MID=$(( (CK + FULL) / 2 ))
arena=$(compile ckfill --device-memory "$MID" --tiering-policy checkpoint+fill) ||
  fail "checkpoint+fill at $MID bytes"
(( arena <= MID )) || fail "checkpoint+fill: arena $arena over the budget $MID"
before=$(recomputes ck) after=$(recomputes ckfill)
echo "$MODEL: checkpoint ($CK bytes) recomputes $before steps; filled within $MID bytes ($arena) $after"
if [[ $MODEL == *_opt || $MODEL == *_noopt ]]; then
  (( before > 0 )) || fail "the checkpoint plan of $MODEL recomputes nothing: the fill is not tested"
  (( after < before )) || fail "the fill kept none of the checkpoint plan's recompute within $MID bytes"
fi
RUNS+=(ck ckfill)

# The spill (docs/tiering.md "The spill"): the checkpoint plan with its recompute traded for
# offloads and prefetches where the links have room, on a profile whose matmuls are slow and
# links fast (the checkpoint policy and the spill alone, without the fill); the same bits.
SPILL_PROFILE=$SRC/tests/lit/passes/Inputs/tier_spill_profile.json
compile ckslow --device-memory "$FULL" --tiering-policy checkpoint \
  --device-profile "$SPILL_PROFILE" > /dev/null || fail "checkpoint on the spill profile"
arena=$(compile ckspill --device-memory "$FULL" --tiering-policy checkpoint+spill \
  --device-profile "$SPILL_PROFILE") || fail "checkpoint+spill at $FULL bytes"
(( arena <= FULL )) || fail "checkpoint+spill: arena $arena over the budget $FULL"
unspilled=$(recomputes ckslow) spilled=$(recomputes ckspill)
echo "$MODEL: on the spill profile the checkpoint plan recomputes $unspilled steps, $spilled after the spill"
if [[ $MODEL == *_opt || $MODEL == *_noopt ]]; then
  (( spilled < unspilled )) || fail "the spill traded none of the checkpoint plan's recompute"
fi
RUNS+=(ckspill)

for run in "${RUNS[@]}"; do
  train "$run"
  cmp -s full.losses "$run.losses" || { paste full.losses "$run.losses"; fail "$run: losses differ"; }
  cmp -s full.safetensors "$run.safetensors" || fail "$run: trained weights differ"
  echo "$MODEL: $run ($(sed -n 's/.*device arena *\(.*\)/\1/p' "$run.log")) bitwise equal to no budget ($FULL bytes) over 20 steps"
done
echo "PASS $MODEL"
