#!/usr/bin/env bash
# bench/device.sh - one round on the GPU machine: the CUDA tests, then the demo model on cuda vs cpu; a short table last.
#
# Runs binaries built on the CPU machine (docs/cuda.md says how to build and
# carry them); nothing is compiled here. Settings (environment):
#   BIN    where the binaries are (default build/bin): gpu_kernel_tests,
#          gpu_executor_tests, megatrain-run, and megatrain-compile if the
#          demo plan is to be compiled here
#   PLAN   a demo plan compiled elsewhere (default: compile MODEL with BIN's
#          megatrain-compile into $OUT/demo.plan)
#   MODEL  the ONNX model (default frontends/models/tiny_transformer.onnx)
#   DATA   uint16 token file (default data/fortunes.bin; made from
#          /usr/share/games/fortunes, or from docs/ when that is missing)
#   STEPS  demo training steps per backend (default 50)
#   OUT    where logs and metrics go (default runs/device)
#   BENCH=1     also time every kernel family at the Llama-1.36B shapes
#          (gpu_kernel_bench; seconds)
#   PROFILE=1   also measure the device profile (megatrain-profile in BIN) into
#          $OUT/profile.json, for megatrain-compile --device-profile; its
#          figures join the table. PROFILE_DISK=DIR adds the disk figures
#          (a scratch file in DIR; a minute for 4 GiB each way)
#   TIERED  directory of tiered plans made here (tiny Llama and GPT-2 exports,
#          no budget and the smallest budget; see docs/cuda.md): each pair
#          trains 20 steps on cuda and must give bitwise-equal losses and weights
#   VISITS  directory of accumulator-visit plans made here (`bash tests/gpu/visits_runs.sh
#          compile build/bin $PWD DIR`): each visiting plan trains 20 steps on cuda and must give
#          its whole-accumulator plan's losses and weights bit for bit
#   UPDATE_VISITS  directory of update-visit plans made here (`bash tests/gpu/update_visits_runs.sh
#          compile build/bin $PWD DIR`): each plan whose updates visit the device trains 20 steps
#          on cuda and must give its host plan's losses and weights bit for bit
#   LLM    1 (default) trains the tiny LLM exports on cuda at fp32, tf32 and bf16
#          against PyTorch's loss trajectories (tests/gpu/llm_vs_pytorch.sh;
#          needs megatrain-compile in BIN); 0 skips it
#   DISK   1 (default) trains the tiny Llama with its optimizer state on disk on
#          cuda against the all-host plan, bitwise, and resumes a SIGKILLed run
#          (tests/gpu/disk_runs.sh; needs megatrain-compile in BIN); 0 skips it
#   COPY_QUEUE=1  also print how copies to the device on two streams share the link
#          (gpu_copy_queue_probe in BIN, tests/gpu/CopyQueueProbe.cpp) into $OUT/copy_queue.txt
#   SANITIZE=1  also run the kernel tests under compute-sanitizer's memcheck
#          and racecheck (minutes, not seconds)
# Exit status: 0 when every check passed.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin}
# The test scripts run in scratch folders of their own: the binaries by an absolute path.
[[ -d $BIN ]] && BIN=$(cd "$BIN" && pwd)
MODEL=${MODEL:-frontends/models/tiny_transformer.onnx}
DATA=${DATA:-data/fortunes.bin}
STEPS=${STEPS:-50}
OUT=${OUT:-runs/device}
PLAN=${PLAN:-}
mkdir -p "$OUT"
# cuBLAS comes from the machine's CUDA; the CUDA runtime is inside the binaries.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

rows=()
failed=0
row() { rows+=("$(printf '%-22s %-5s %s' "$1" "$2" "$3")"); [[ $2 == FAIL ]] && failed=1; return 0; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

{
  echo "date    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit  $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "gpu     $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
  echo "host    $(nproc) cores, $(uname -r)"
} | tee "$OUT/machine.txt"

# ---- 1. the GPU tests: every kernel against the CPU backend, then whole plans ----
# gtest_row LABEL LOG TEST [ARGS...]: runs one gtest binary and adds its row.
gtest_row() {
  local label=$1 log=$OUT/$2.log test=$3
  shift 3
  if [[ ! -x $BIN/$test ]]; then row "$label" FAIL "not found in $BIN"; return; fi
  echo "== $label"
  local start status passed failures
  start=$(now)
  "$BIN/$test" --gtest_brief=1 "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  passed=$(grep -oE '\[  PASSED  \] [0-9]+ tests?' "$log" | grep -oE '[0-9]+' | head -1)
  failures=$(grep -cE '^\[  FAILED  \] [A-Za-z]' "$log")
  if [[ $status == 0 ]]; then row "$label" PASS "${passed:-?} passed ($(since "$start") s)"
  else row "$label" FAIL "$failures failed, exit $status ($(since "$start") s; $log)"; fi
}
gtest_row gpu_kernel_tests gpu_kernel_tests gpu_kernel_tests
# The strided kernels again with 32-bit index arithmetic off: the 64-bit path
# that tensors of 2^31 elements or more take (StridedSpace::narrowBelow).
MEGATRAIN_CUDA_WIDE_INDEX=1 gtest_row "gpu_kernel_tests, 64-bit indices" gpu_kernel_tests_wide gpu_kernel_tests \
  --gtest_filter='CudaKernels.*'
gtest_row gpu_executor_tests gpu_executor_tests gpu_executor_tests
# Every host pool registered (mmap + cudaHostRegister), as only large ones are by default.
MEGATRAIN_HOST_REGISTER=1 gtest_row "gpu_executor_tests, registered host pools" gpu_executor_tests_registered \
  gpu_executor_tests

# ---- 1b. out-of-bounds accesses and shared-memory races, on request ----
if [[ ${SANITIZE:-0} == 1 ]]; then
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool gpu_kernel_tests"
    start=$(now)
    # racecheck without cuDNN's attention kernels: their Hopper pipelines order
    # shared memory with mbarriers, which racecheck does not follow, so it reports
    # hazards inside them (none in ours); memcheck runs them too.
    filter=() attention=${MEGATRAIN_ATTENTION:-}
    if [[ $tool == racecheck ]]; then filter=(--gtest_filter='-CudnnAttentionTest.*'); attention=gemm; fi
    MEGATRAIN_ATTENTION=$attention "$sanitizer" --tool "$tool" --error-exitcode 3 "$BIN/gpu_kernel_tests" \
      --gtest_brief=1 "${filter[@]}" > "$OUT/sanitize-$tool.log" 2>&1
    status=$?
    tail -3 "$OUT/sanitize-$tool.log"
    if [[ $status == 0 ]]; then row "sanitize $tool" PASS "$(grep -m1 -oE 'ERROR SUMMARY: [0-9]+ errors?|RACECHECK SUMMARY: .*' "$OUT/sanitize-$tool.log") ($(since "$start") s)"
    else row "sanitize $tool" FAIL "exit $status ($OUT/sanitize-$tool.log)"; fi
  done
fi

# ---- 1c. kernel timings, on request ----
if [[ ${BENCH:-0} == 1 ]]; then
  echo "== gpu_kernel_bench"
  if "$BIN/gpu_kernel_bench" 2>&1 | tee "$OUT/kernel_bench.log"; [[ ${PIPESTATUS[0]} == 0 ]]; then
    row "gpu_kernel_bench" ok "$(($(wc -l < "$OUT/kernel_bench.log") - 1)) kernels timed ($OUT/kernel_bench.log)"
  else row "gpu_kernel_bench" FAIL "see $OUT/kernel_bench.log"; fi
fi

# ---- 1d. the device profile, on request (docs/tiering.md "Device profile") ----
if [[ ${PROFILE:-0} == 1 ]]; then
  echo "== megatrain-profile"
  if [[ ! -x $BIN/megatrain-profile ]]; then row "profile" FAIL "megatrain-profile not found in $BIN"
  else
    start=$(now)
    disk=()
    [[ -n ${PROFILE_DISK:-} ]] && disk=(--disk "$PROFILE_DISK")
    if "$BIN/megatrain-profile" -o "$OUT/profile.json" "${disk[@]}" 2>&1 | tee "$OUT/profile.log"; [[ ${PIPESTATUS[0]} == 0 ]]; then
      checked=$(python3 tests/gpu/check_profile.py "$OUT/profile.json" ${PROFILE_DISK:+--disk} --rows)
      status=$?
      if [[ $status == 0 ]]; then
        row "profile" PASS "$OUT/profile.json ($(since "$start") s)"
        while IFS=$'\t' read -r label detail; do row "$label" "" "$detail"; done < <(tail -n +2 <<< "$checked")
      else row "profile" FAIL "$(head -1 <<< "$checked")"; fi
    else row "profile" FAIL "megatrain-profile failed ($OUT/profile.log)"; fi
  fi
fi

# ---- 1e. copies on two streams, on request ----
if [[ ${COPY_QUEUE:-0} == 1 ]]; then
  if [[ ! -x $BIN/gpu_copy_queue_probe ]]; then row "copy queue" FAIL "gpu_copy_queue_probe not found in $BIN"
  elif { "$BIN/gpu_copy_queue_probe" 0 && "$BIN/gpu_copy_queue_probe" 0 b-first && "$BIN/gpu_copy_queue_probe" 7 &&
         CUDA_DEVICE_MAX_CONNECTIONS=32 "$BIN/gpu_copy_queue_probe" 7; } > "$OUT/copy_queue.txt" 2>&1; then
    cat "$OUT/copy_queue.txt"
    row "copy queue" PASS "$OUT/copy_queue.txt"
  else row "copy queue" FAIL "$(tail -1 "$OUT/copy_queue.txt")"; fi
fi

# ---- 2. the demo model: the same plan, weights and data on cpu and cuda ----
demo() {
  if [[ -z $PLAN ]]; then
    if [[ ! -x $BIN/megatrain-compile ]]; then row "demo plan" FAIL "no PLAN given and no $BIN/megatrain-compile"; return; fi
    PLAN=$OUT/demo.plan
    "$BIN/megatrain-compile" "$MODEL" -o "$PLAN" --shape input_ids=8x64 --lr 3e-3 --weight-decay 0.01 \
      > "$OUT/compile.log" 2>&1 || { row "demo plan" FAIL "megatrain-compile failed ($OUT/compile.log)"; return; }
  fi
  if [[ ! -f $DATA ]]; then
    DATA=$OUT/tokens.bin
    local source=/usr/share/games/fortunes
    [[ -d $source ]] || source=docs
    python3 frontends/python/make_corpus.py --source "$source" --out "$DATA" > /dev/null \
      || { row "demo data" FAIL "cannot make $DATA"; return; }
  fi
  local backend
  for backend in cpu cuda; do
    echo "== demo on $backend ($STEPS steps)"
    local start
    start=$(now)
    "$BIN/megatrain-run" "$PLAN" --weights "$MODEL" --data "$DATA" --steps "$STEPS" --backend "$backend" \
      --metrics "$OUT/demo-$backend.jsonl" 2>&1 | tee "$OUT/demo-$backend.log"
    if [[ ${PIPESTATUS[0]} != 0 ]]; then row "demo $backend" FAIL "megatrain-run failed ($OUT/demo-$backend.log)"; continue; fi
    row "demo $backend" ok "$(tail -1 "$OUT/demo-$backend.log" | sed 's/^done *//') ($(since "$start") s)"
  done
  [[ -f $OUT/demo-cpu.jsonl && -f $OUT/demo-cuda.jsonl ]] || return
  # Losses step by step, against the bar of the plan's precision (tests/gpu/homes_runs.sh's):
  # an fp32 plan's losses agree to about 1e-5 relative, a bf16 plan's products round their
  # operands, where the two backends' reduction orders part, to 2e-3 (megatrain-compile's
  # default precision is bf16). A plan whose precision cannot be read gets the fp32 bar.
  local verdict precision
  precision=$("$BIN/megatrain-inspect" "$PLAN" --max-steps 1 2>/dev/null | awk '$1 == "precision" && !p { print $2; p = 1 }')
  # Said so in the row: the bar of an unread precision is fp32's.
  [[ -n $precision ]] || precision="fp32 (precision unread: no $BIN/megatrain-inspect)"
  verdict=$(python3 - "$OUT/demo-cpu.jsonl" "$OUT/demo-cuda.jsonl" "$precision" <<'EOF'
import json, sys
cpu, cuda = ([json.loads(line) for line in open(path)] for path in sys.argv[1:3])
precision = sys.argv[3]
bar = 2e-3 if precision == "bf16" else 1e-4
worst = max(abs(a["loss"] - b["loss"]) / max(abs(a["loss"]), 1e-30) for a, b in zip(cpu, cuda))
speed = [sum(r["tokens_per_s"] for r in runs[1:]) / max(len(runs) - 1, 1) for runs in (cpu, cuda)]
ok = len(cpu) == len(cuda) and worst <= bar
print(("PASS" if ok else "FAIL"),
      f"max relative loss difference {worst:.2e} over {len(cuda)} steps ({precision} plan, bar {bar:.0e}); "
      f"cuda {speed[1] / max(speed[0], 1e-9):.1f}x cpu tokens/s")
EOF
)
  row "demo cuda vs cpu" "${verdict%% *}" "${verdict#* }"
}
demo

# ---- 3. offloading never changes the math, on the GPU too ----
tiered() {
  local dir=${TIERED:-}
  [[ -n $dir && -d $dir ]] || return 0
  local full
  for full in "$dir"/*.full.plan; do
    local stem=${full%.full.plan} name kind
    name=$(basename "$stem")
    [[ -f $stem.min.plan ]] || continue
    for kind in full min; do
      "$BIN/megatrain-run" "$stem.$kind.plan" --weights "$dir/$name.onnx" --backend cuda --steps 20 \
        --input "input_ids=$dir/input_ids.npy" --metrics "$OUT/tiered-$name-$kind.jsonl" --quiet \
        --export-safetensors "$OUT/tiered-$name-$kind.safetensors" > "$OUT/tiered-$name-$kind.log" 2>&1 \
        || { row "tiered $name" FAIL "$kind run failed ($OUT/tiered-$name-$kind.log)"; continue 2; }
    done
    local verdict
    verdict=$(python3 - "$OUT/tiered-$name-full.jsonl" "$OUT/tiered-$name-min.jsonl" \
      "$OUT/tiered-$name-full.safetensors" "$OUT/tiered-$name-min.safetensors" <<'EOF'
import json, sys
full, small = ([json.loads(line)["loss"] for line in open(path)] for path in sys.argv[1:3])
same_w = open(sys.argv[3], "rb").read() == open(sys.argv[4], "rb").read()
ok = len(full) == 20 and full == small and same_w
print(("PASS" if ok else "FAIL"), f"20 cuda steps, smallest budget vs none: losses {'bitwise equal' if full == small else 'DIFFER'}, weights {'bitwise equal' if same_w else 'DIFFER'}")
EOF
)
    row "tiered $name" "${verdict%% *}" "${verdict#* }"
  done
}
tiered

# ---- 3b. accumulator visits never change the math on cuda either ----
if [[ -n ${VISITS:-} && -d ${VISITS:-} ]]; then
  echo "== tests/gpu/visits_runs.sh"
  start=$(now)
  bash tests/gpu/visits_runs.sh run "$BIN" "$PWD" "$(cd "$VISITS" && pwd)" 2>&1 | tee "$OUT/visits_runs.log"
  if [[ ${PIPESTATUS[0]} == 0 ]]; then row "accumulator visits" PASS "bitwise vs whole sums, $(grep -c PASS "$OUT/visits_runs.log") plans ($(since "$start") s)"
  else row "accumulator visits" FAIL "$(grep -m1 FAIL "$OUT/visits_runs.log") ($OUT/visits_runs.log)"; fi
fi

# ---- 3c. update visits: the CUDA AdamW on the visiting state gives the host AdamW's bits ----
if [[ -n ${UPDATE_VISITS:-} && -d ${UPDATE_VISITS:-} ]]; then
  echo "== tests/gpu/update_visits_runs.sh"
  start=$(now)
  bash tests/gpu/update_visits_runs.sh run "$BIN" "$PWD" "$(cd "$UPDATE_VISITS" && pwd)" 2>&1 |
    tee "$OUT/update_visits_runs.log"
  if [[ ${PIPESTATUS[0]} == 0 ]]; then row "update visits" PASS "bitwise vs host updates, $(grep -c PASS "$OUT/update_visits_runs.log") plans ($(since "$start") s)"
  else row "update visits" FAIL "$(grep -m1 FAIL "$OUT/update_visits_runs.log") ($OUT/update_visits_runs.log)"; fi
fi

# ---- 4. the tiny LLM exports on cuda against PyTorch's loss trajectory, per precision ----
if [[ ${LLM:-1} == 1 ]]; then
  if [[ ! -x $BIN/megatrain-compile ]]; then row "llm vs pytorch" FAIL "needs megatrain-compile in $BIN"
  else
    echo "== tests/gpu/llm_vs_pytorch.sh"
    bash tests/gpu/llm_vs_pytorch.sh "$BIN" . "$OUT/llm" 2>&1 | tee "$OUT/llm_vs_pytorch.log"
    status=${PIPESTATUS[0]}
    while read -r model prec worst bar result; do
      [[ $result == pass ]] && row "llm $model $prec" PASS "loss vs PyTorch $worst (bar $bar)"
      [[ $result == FAIL ]] && row "llm $model $prec" FAIL "loss vs PyTorch $worst (bar $bar)"
    done < <(grep -E ' (pass|FAIL)$' "$OUT/llm_vs_pytorch.log")
    [[ $status == 0 ]] || row "llm vs pytorch" FAIL "exit $status ($OUT/llm_vs_pytorch.log)"
  fi
fi

# ---- 5. the disk tier on cuda: bitwise against all-host, and a SIGKILLed run resumed ----
if [[ ${DISK:-1} == 1 ]]; then
  if [[ ! -x $BIN/megatrain-compile ]]; then row "disk tier" FAIL "needs megatrain-compile in $BIN"
  else
    echo "== tests/gpu/disk_runs.sh"
    start=$(now)
    bash tests/gpu/disk_runs.sh "$BIN" "$PWD" 2>&1 | tee "$OUT/disk_runs.log"
    if [[ ${PIPESTATUS[0]} == 0 ]]; then row "disk tier" PASS "bitwise vs all-host, resumed bitwise ($(since "$start") s)"
    else row "disk tier" FAIL "$(grep -m1 FAIL "$OUT/disk_runs.log") ($OUT/disk_runs.log)"; fi
  fi
fi

echo
echo "== bench/device.sh: $(cat "$OUT/machine.txt" | tr '\n' ' ')"
printf '%-22s %-5s %s\n' check result detail
printf '%s\n' "${rows[@]}" | tee "$OUT/summary.txt"
exit $failed
