#!/usr/bin/env bash
# bench/priority_round.sh - the `optimizer` stream's priority on the GPU machine
# (MEGATRAIN_UPDATE_PRIORITY, docs/cuda.md "Stream priorities").
#
#   BIN=DIR PLAN_DIR=DIR RUNS="v7b:auto v7b:low o7b:auto o7b:compute" OUT=DIR bash bench/priority_round.sh
#
# BIN holds megatrain-run and megatrain-inspect built with CUDA; PLAN_DIR holds NAME.plan for
# each NAME in RUNS. Each run NAME:SETTING trains STEPS steps (default 8) of NAME.plan with
# MEGATRAIN_UPDATE_PRIORITY=SETTING, in turn; its log goes to OUT/NAME.SETTING.log. Then
# TRACE=NAME (default the first run's plan, none with TRACE=) is traced over a window of three
# steps at the default setting, and bench/trace_gaps.py reads it against the plan's prediction
# into OUT/NAME.gaps.txt (the compute stream) and OUT/NAME.fetch_gaps.txt (the weights'
# fetches). Prints the medians (after the first step) and the window's busy times last.
set -uo pipefail
BIN=${BIN:?BIN=DIR with megatrain-run and megatrain-inspect}
PLAN_DIR=${PLAN_DIR:?PLAN_DIR=DIR with NAME.plan}
RUNS=${RUNS:?RUNS="NAME:SETTING ..." (SETTING auto, compute or low)}
OUT=${OUT:-/tmp/priority-round}
STEPS=${STEPS:-8}
mkdir -p "$OUT"
tokens=${TOKENS:-/tmp/priority-round-tokens.bin}
python3 bench/make_tokens.py --vocab 32000 --tokens 4194304 --out "$tokens" > /dev/null

rows=()
for run in $RUNS; do
  name=${run%%:*} setting=${run#*:}
  log=$OUT/$name.$setting.log
  MEGATRAIN_UPDATE_PRIORITY=$setting timeout 300 "$BIN/megatrain-run" "$PLAN_DIR/$name.plan" --init normal:0.02 \
    --data "$tokens" --steps "$STEPS" --backend cuda > "$log" 2>&1 || echo "$run: failed, $(tail -1 "$log")"
  rows+=("| $name | $setting | $(grep -ho 'median step [0-9.]* ms' "$log" | grep -o '[0-9.]* ms' || echo -) |")
done

first=${RUNS%% *}
trace=${TRACE-${first%%:*}}
if [[ -n $trace ]]; then
  timeout 300 "$BIN/megatrain-run" "$PLAN_DIR/$trace.plan" --init normal:0.02 --data "$tokens" --steps 6 \
    --backend cuda --trace "$OUT/$trace.window.json" --trace-steps 3 > "$OUT/$trace.window.log" 2>&1
  "$BIN/megatrain-inspect" "$PLAN_DIR/$trace.plan" --max-steps 1 --trace "$OUT/$trace.predicted.json" > /dev/null
  python3 bench/trace_gaps.py "$OUT/$trace.window.json" --plan-trace "$OUT/$trace.predicted.json" \
    > "$OUT/$trace.gaps.txt" 2>&1
  python3 bench/trace_gaps.py "$OUT/$trace.window.json" --plan-trace "$OUT/$trace.predicted.json" --stream fetch \
    > "$OUT/$trace.fetch_gaps.txt" 2>&1
  gzip -f "$OUT/$trace.window.json" "$OUT/$trace.predicted.json"
fi

echo "| plan | MEGATRAIN_UPDATE_PRIORITY | median step |"
echo "| --- | --- | --- |"
printf '%s\n' "${rows[@]}"
[[ -n $trace ]] && grep -E "^trace |^  busy" "$OUT/$trace.window.log"
exit 0
