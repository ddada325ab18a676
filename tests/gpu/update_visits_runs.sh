#!/usr/bin/env bash
# update_visits_runs.sh - update visits on the GPU (docs/tiering.md, "Update visits"): the
# llama_opt test LLM compiled with every state on the host (--state-home host) and with every
# update visiting the device (--state-home visit, and visit-master: the moments on the device), without micro-batches (the arena's gradient),
# with 2 micro-batches summed in device accumulators, and with 2 whose sums visit the device
# (read in place by the update), trains 20 steps on cuda: each visiting plan's losses and weights
# (the CUDA AdamW kernel's) are bitwise those of its host plan (the host AdamW's).
# The GPU machine has no megatrain-compile (it links MLIR), so the plans are compiled first:
#   update_visits_runs.sh compile BIN SRC DIR   (on the CPU machine: DIR/{host,visit,visit-master}_{a1,d2,v2}.plan)
#   update_visits_runs.sh run BIN SRC DIR       (on the GPU machine; absolute paths)
set -euo pipefail
MODE=$1 BIN=$2 SRC=$3 DIR=$4
ONNX=$SRC/tests/models/llm/llama_opt.onnx
source "$(dirname "$0")/cuda_pair.sh"
CASES=("a1:" "d2:--microbatches 2 --no-accumulator-visits"
       "v2:--microbatches 2 --accumulator-visits --visit-slots 3 --all-accumulators-visit")
if [[ $MODE == compile ]]; then
  mkdir -p "$DIR"
  for case in "${CASES[@]}"; do
    name=${case%%:*}
    read -ra flags <<< "${case#*:}"
    for home in host visit visit-master; do
      compile_llm_plan "$BIN" "$DIR" "${home}_$name" --state-home "$home" "${flags[@]}"
    done
  done
  echo "compiled: $(cd "$DIR" && echo *.plan)"
  exit 0
fi
[[ $MODE == run ]] || fail "usage: update_visits_runs.sh compile|run BIN SRC DIR"
for case in "${CASES[@]}"; do
  name=${case%%:*}
  for visit in visit visit-master; do
    cuda_pair "$name" "$BIN" "$DIR" host "$visit"
    echo "PASS: $name $visit (${PAIR_BACKEND:-cuda}): updates visiting the device train bitwise as host updates"
  done
done
