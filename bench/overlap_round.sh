#!/usr/bin/env bash
# bench/overlap_round.sh - the host's updates across steps on the GPU machine, traced over a
# window of steps on one clock (megatrain-run --trace-steps, docs/runtime.md).
#
#   BIN=DIR PLAN_DIR=DIR PLANS="n7b n64" OUT=DIR bash bench/overlap_round.sh
#
# Every log, trace and reading goes to WORK (default /tmp/overlap-round) and, packed, to
# OUT/overlap-round.tar.gz beside OUT/table.md (the GPU machine returns at most 8 files).
#
# BIN holds megatrain-run, megatrain-inspect and gpu_executor_tests built with CUDA;
# PLAN_DIR holds NAME.plan for each NAME in PLANS. For each plan, in turn: an untraced run
# (the median step), the same with --no-host-overlap (each step waits for its updates), the
# same with one host thread fewer for the AdamW (MEGATRAIN_HOST_THREADS: a core left to the
# thread that issues the next step while the updates run), then
# a traced window of the last three steps of a run: its summary (the time from one step's
# start to the next's, how far each step's host updates ran into the next), the trace, and
# bench/trace_breakdown.py, bench/trace_gaps.py of its last step (whose gaps include the
# waits on the previous step's updates; and of its `fetch` stream, whose gaps show a link held
# by another stream's queue) and bench/host_rates.py (the host AdamW's rate in the
# backward, beside the next step and alone). The window test of gpu_executor_tests runs first.
# Prints a table last.
set -uo pipefail
BIN=${BIN:?BIN=DIR with megatrain-run, megatrain-inspect, gpu_executor_tests}
PLAN_DIR=${PLAN_DIR:?PLAN_DIR=DIR with NAME.plan}
PLANS=${PLANS:-n7b n64}
OUT=${OUT:-/tmp/overlap-round-out}
WORK=${WORK:-/tmp/overlap-round}
STEPS=${STEPS:-8}
mkdir -p "$OUT" "$WORK"
tokens=${TOKENS:-/tmp/overlap-round-tokens.bin}  # outside WORK: 8 MiB that need not come back
python3 bench/make_tokens.py --vocab 32000 --tokens 4194304 --out "$tokens" > /dev/null

tests="not run"
if [[ -x $BIN/gpu_executor_tests ]]; then
  if "$BIN/gpu_executor_tests" --gtest_filter='CudaExecutor.*Trace*:CudaExecutor.HostTasks*' \
      > "$WORK/gpu_executor_tests.log" 2>&1; then tests="PASS"; else tests="FAIL"; fi
  tests="$tests ($(grep -c '^\[       OK \]' "$WORK/gpu_executor_tests.log") passed)"
fi

run() { # name log [flags...]
  local name=$1 log=$2; shift 2
  timeout 400 "$BIN/megatrain-run" "$PLAN_DIR/$name.plan" --init normal:0.02 --data "$tokens" \
    --steps "$STEPS" --backend cuda "$@" > "$log" 2>&1 || echo "$name ($*): failed, $(tail -1 "$log")"
}
median() { grep -ho "median step [0-9.]* ms" "$1" | grep -o "[0-9.]* ms" || echo "-"; }

rows=()
for name in $PLANS; do
  run "$name" "$WORK/$name.log"
  run "$name" "$WORK/$name.no-overlap.log" --no-host-overlap
  threads=$(( $(nproc) - 1 ))
  MEGATRAIN_HOST_THREADS=$threads run "$name" "$WORK/$name.threads.log"
  run "$name" "$WORK/$name.window.log" --trace "$WORK/$name.window.json" --trace-steps 3
  "$BIN/megatrain-inspect" "$PLAN_DIR/$name.plan" --max-steps 1 --trace "$WORK/$name.predicted.json" > /dev/null
  python3 bench/trace_breakdown.py "$WORK/$name.window.json" > "$WORK/$name.breakdown.txt" 2>&1
  python3 bench/trace_gaps.py "$WORK/$name.window.json" --plan-trace "$WORK/$name.predicted.json" \
    > "$WORK/$name.gaps.txt" 2>&1
  python3 bench/trace_gaps.py "$WORK/$name.window.json" --plan-trace "$WORK/$name.predicted.json" --stream fetch \
    > "$WORK/$name.fetch_gaps.txt" 2>&1  # the weights' fetches, and what held the link from them
  rate=$(python3 bench/plan_header.py "$PLAN_DIR/$name.plan" | python3 -c \
    "import json,sys; print(json.loads(json.load(sys.stdin)['device_profile'])['host_adamw_params_per_s'] / 1e9)")
  python3 bench/host_rates.py "$WORK/$name.window.json" --rate "$rate" > "$WORK/$name.host_rates.txt" 2>&1
  gzip -f "$WORK/$name.window.json" "$WORK/$name.predicted.json"
  period=$(grep -o "on one clock, [0-9.]* ms" "$WORK/$name.window.log" | grep -o "[0-9.]* ms" || echo "-")
  into=$(grep -o "[0-9.-]* ms into the next step" "$WORK/$name.window.log" | sed 's/ into the next step//' | paste -sd, -)
  predicted=$(grep -o "predicted [0-9.]* ms" "$WORK/$name.log" | head -1 | grep -o "[0-9.]* ms")
  rows+=("| $name | $(median "$WORK/$name.log") | $(median "$WORK/$name.no-overlap.log") | $(median "$WORK/$name.threads.log") | $period | ${into:--} | ${predicted:--} |")
done

{
echo "gpu_executor_tests (trace, host tasks): $tests"
echo "| plan | median step | --no-host-overlap | $(( $(nproc) - 1 )) host threads | traced window, start to start | updates into the next step | predicted |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
for name in $PLANS; do echo "$name:"; cat "$WORK/$name.host_rates.txt"; done
} | tee "$OUT/table.md"
tar czf "$OUT/overlap-round.tar.gz" -C "$WORK" --exclude '*.bin' --exclude '*.bin.json' .
