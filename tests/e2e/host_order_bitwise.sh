#!/usr/bin/env bash
# host_order_bitwise.sh - the host update order (docs/tiering.md, "The host update order") moves
# the host AdamW tasks after the loss earliest deadline first, and never changes the math: the
# tiny Llama export with every home on the host (--state-home host) and a profile whose host
# AdamW is slow (2e7 parameters/s, so the next step waits on it) compiles with the order
# (the summary's `host order` line, a shorter predicted step than --no-host-update-order's, the
# token embedding's update, which the next step's forward waits for first, earlier than last)
# and trains 20 steps to the same losses and weights, bit
# for bit, as the plan in plan order.
# usage: host_order_bitwise.sh BIN SRC MODEL   (MODEL: a tests/models/llm/*.onnx stem)
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
LLM_PRECISION=fp32
source "$(dirname "$0")/bitwise_common.sh"

python3 - "$SRC/bench/profiles/h200.json" slow.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["name"] = "H200, host AdamW 2e7 parameters/s"
p["host_adamw_params_per_s"] = 2e7
json.dump(p, open(sys.argv[2], "w"))
PY
COMPILE+=(--device-profile slow.json --state-home host)
compile_plan ordered plan-text txt || fail "compile with the host update order"
compile_plan planorder plan-text txt --no-host-update-order || fail "compile with --no-host-update-order"

line=$(grep "^  host order" ordered.log) || { cat ordered.log; fail "no 'host order' line"; }
echo "$MODEL: $line"
moved=$(sed -n 's/^  host order *\([0-9]*\) of the .*/\1/p' ordered.log)
(( moved > 0 )) || fail "no host task moved"
! grep -q "^  host order" planorder.log || fail "--no-host-update-order still ordered the host tasks"
step() { sed -n 's/^  predicted step \([0-9.]*\) ms.*/\1/p' "$1.log"; }
a=$(step ordered) b=$(step planorder)
echo "$MODEL: predicted $a ms with the order, $b ms in plan order"
awk -v a="$a" -v b="$b" 'BEGIN { exit !(a < b) }' || fail "the order predicts $a ms, plan order $b ms"

# The host stream's updates, in order: the embedding's (the next step's forward reads it first,
# the backward hands it over last) is the last in plan order and comes earlier in the new one.
updates() { "$BIN/megatrain-inspect" "$1.plan" | awk '$2 == "host" && $3 == "adamw" { print $4 }'; }
for plan in ordered planorder; do
  updates "$plan" > "$plan.updates"
  [[ -s $plan.updates ]] || fail "$plan: no host updates listed"
done
rank() { grep -n -m1 -F model.embed_tokens.weight "$1.updates" | cut -d: -f1; }
e=$(rank ordered) e0=$(rank planorder) n=$(wc -l < planorder.updates)
echo "$MODEL: the embedding's update is $e of $n with the order, $e0 in plan order"
(( e0 == n )) || fail "plan order updates the embedding $e0th of $n, not last"
(( e < e0 )) || fail "the order updates the embedding $e th, plan order $e0 th"

expect_same_training ordered planorder

# With a staging ring of fewer slots than gradients (a host of 1.8 MB: the ring's copies reuse
# bytes the updates read), the tasks move only where no copy into their bytes lies between:
# the same bits again.
compile_plan ring plan-text txt --host-memory 1800000 || fail "compile with a partial ring"
compile_plan ringorder plan-text txt --host-memory 1800000 --no-host-update-order ||
  fail "compile with a partial ring in plan order"
grep "^  host order" ring.log || { cat ring.log; fail "no 'host order' line with the partial ring"; }
ring_size() { "$BIN/megatrain-inspect" "$1.plan" | sed -n "s/.*'grad_stage' HOST_PINNED \([0-9.]* [KMG]\{0,1\}i\{0,1\}B\).*/\1/p"; }
echo "$MODEL: staging ring $(ring_size ring) with 1.8 MB of host, $(ring_size ordered) without"
[[ $(ring_size ring) != "$(ring_size ordered)" ]] || fail "the 1.8 MB host did not shrink the ring"
expect_same_training ring ringorder
echo "host_order_bitwise $MODEL: PASS"
