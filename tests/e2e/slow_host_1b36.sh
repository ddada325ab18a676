#!/usr/bin/env bash
# slow_host_1b36.sh - a plan compiled for a machine's own profile is no slower there than one
# compiled for another (docs/tiering.md, "The passes", mt-tier step 6), compile only: the 1.36B
# Llama export at 8 x 2048 tokens within --device-memory 16GiB, with bench/profiles/h200.json and
# with the same profile but the host AdamW lease AI measured with the links copying (3.37 G/s).
# megatrain-inspect --device-profile predicts both plans on the slow profile: the slow profile's
# own plan must be within 0.5% of the other's there (the entries timed with every parameter on
# the host chose a plan 3.3% slower), and its tiering log must name the spilled entry.
# usage: slow_host_1b36.sh BIN SRC
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$SRC/tests/models/graphs/llama_1b36_b8s2048.onnx
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
fail() { echo "FAIL: $*"; exit 1; }

python3 - "$SRC/bench/profiles/h200.json" slow.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["name"] = "H200, host AdamW 3.37 G/s"
p["host_adamw_params_per_s"] = 3.37e9
json.dump(p, open(sys.argv[2], "w"))
PY
flags=(--precision bf16 --bf16-activations --device-memory 16GiB --shape input_ids=8x2048)
"$BIN/megatrain-compile" "$MODEL" -o fast.plan "${flags[@]}" --device-profile "$SRC/bench/profiles/h200.json" \
  > fast.log 2>&1 || { cat fast.log; fail "compile with bench/profiles/h200.json"; }
"$BIN/megatrain-compile" "$MODEL" -o slow.plan "${flags[@]}" --device-profile slow.json \
  --tiering-log slow.tiering > slow.log 2>&1 || { cat slow.log; fail "compile with the slow host"; }
step_ms() {
  "$BIN/megatrain-inspect" "$1" --max-steps 1 --device-profile slow.json |
    sed -n 's/^  predicted step *\([0-9.]*\) \(m\{0,1\}s\):.*/\1 \2/p' |
    awk '{ print ($2 == "s" ? $1 * 1000 : $1) }'
}
fast=$(step_ms fast.plan)
slow=$(step_ms slow.plan)
echo "on the slow host: its own plan $slow ms, the plan for bench/profiles/h200.json $fast ms"
[[ -n $fast && -n $slow ]] || fail "no predicted step"
awk -v a="$slow" -v b="$fast" 'BEGIN { exit !(a <= 1.005 * b) }' ||
  fail "the slow host's own plan predicts $slow ms there, the other plan $fast ms"
chosen=$(sed -n 's/^chosen //p' slow.tiering | tail -1)
[[ $chosen == *+spill ]] || fail "chose '$chosen', not the spilled entry"
echo "slow_host_1b36: PASS (chosen $chosen)"
