#!/usr/bin/env bash
# visits_runs.sh - accumulator visits on the GPU (docs/tiering.md, "Accumulator visits"): the
# llama_opt test LLM with its state on the host, compiled with its accumulators whole on the
# device and visiting it through a ring of 3 slots (--accumulator-visits --visit-slots 3
# --all-accumulators-visit), with 2 micro-batches (the products writing into the visits) and
# with 3 and --no-product-accumulation (ACCUMULATE into the visits on compute), trains 20 steps
# on cuda: each visiting plan's losses and weights are bitwise those of its whole plan.
# The GPU machine has no megatrain-compile (it links MLIR), so the plans are compiled first:
#   visits_runs.sh compile BIN SRC DIR   (on the CPU machine: DIR/{whole,visit}_{p2,a3}.plan)
#   visits_runs.sh run BIN SRC DIR       (on the GPU machine; absolute paths)
set -euo pipefail
MODE=$1 BIN=$2 SRC=$3 DIR=$4
ONNX=$SRC/tests/models/llm/llama_opt.onnx
source "$(dirname "$0")/cuda_pair.sh"
CASES=("p2:--microbatches 2" "a3:--microbatches 3 --no-product-accumulation")
if [[ $MODE == compile ]]; then
  mkdir -p "$DIR"
  for case in "${CASES[@]}"; do
    name=${case%%:*}
    read -ra flags <<< "${case#*:}"
    compile_llm_plan "$BIN" "$DIR" "whole_$name" --state-home host "${flags[@]}"
    compile_llm_plan "$BIN" "$DIR" "visit_$name" --state-home host "${flags[@]}" --accumulator-visits \
      --visit-slots 3 --all-accumulators-visit
  done
  echo "compiled: $(cd "$DIR" && echo *.plan)"
  exit 0
fi
[[ $MODE == run ]] || fail "usage: visits_runs.sh compile|run BIN SRC DIR"
for case in "${CASES[@]}"; do
  name=${case%%:*}
  cuda_pair "$name" "$BIN" "$DIR" whole visit
  echo "PASS: $name (${PAIR_BACKEND:-cuda}): visiting accumulators train bitwise as whole ones"
done
