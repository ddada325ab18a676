#!/usr/bin/env bash
# bench/kernels_round.sh - the CUDA kernel tests, compute-sanitizer on the bandwidth kernels, and
# the roofline table, in one command on the GPU machine; a short table last.
#
#   OUT=$OUT bash bench/kernels_round.sh     # binaries staged by scripts/stage_device.sh
#
# Runs, from BIN (default build-gpu/bin): gpu_kernel_tests (every kernel against the CPU
# backend; the pointwise tests on both paths, compiled and interpreted, and the compiled
# kernels bitwise against the interpreter); the norm, pointwise and elementwise tests again on 64-bit indices
# (MEGATRAIN_CUDA_WIDE_INDEX=1), under compute-sanitizer memcheck (with the attention and rotary
# layouts of mt-fold-head-transposes and the norms' bf16 results), and racecheck on the
# kernels with shared memory (the norms); then `gpu_kernel_bench --roofline` (docs/cuda.md,
# "Bandwidth"; each pointwise program twice, interpreted and compiled), whose table is printed last.
# Also the demo plan (PLAN, default build-gpu/tt.plan: its pointwise steps, with MODEL's
# weights and DATA's tokens) trained 20 steps on cuda with MEGATRAIN_POINTWISE=interp and =jit:
# the losses and gradient norms must be bitwise equal (PLAN= empty skips it). Settings: BIN, OUT (default runs/kernels),
# FILTER (the gtest filter of the sanitized tests: the compiled pointwise kernels through
# PointwiseJit.*, whose few dozen programs NVRTC compiles in under a minute, rather than the
# per-opcode tests' hundred-odd). Exit status 0 when every check passed.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build-gpu/bin}
OUT=${OUT:-runs/kernels}
PLAN=${PLAN-build-gpu/tt.plan}
MODEL=${MODEL:-frontends/models/tiny_transformer.onnx}
DATA=${DATA:-build-gpu/fortunes.bin}
FILTER=${FILTER:-'*RmsNorm*:*LayerNorm*:*PointwiseCudaKernel.*/interp:PointwiseJit.*:CudaKernels.BinaryOpsBroadcast:CudaKernels.ScaleAndActivations:CudaKernels.ActivationGradients:CudaKernels.MathFunctions:CudaKernels.ReluAndReluGradPropagateNaN:AttentionLayoutGpu.*:RotaryLayoutGpu.*'}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

rows=()
failed=0
# check LABEL LOG COMMAND...: runs it, logs it, adds a row with the gtest or sanitizer summary.
check() {
  local label=$1 log=$OUT/$2.log
  shift 2
  echo "== $label"
  "$@" > "$log" 2>&1
  local status=$?
  tail -3 "$log"
  local summary
  summary=$(grep -oE '\[  PASSED  \] [0-9]+ tests?|[0-9]+ steps, losses and gradient norms [a-zA-Z ]+|ERROR SUMMARY: [0-9]+ errors?|RACECHECK SUMMARY: .*' "$log" |
    tr '\n' ' ')
  if [[ $status == 0 ]]; then rows+=("$(printf '%-42s PASS  %s' "$label" "$summary")")
  else rows+=("$(printf '%-42s FAIL  exit %s, %s (%s)' "$label" "$status" "$summary" "$log")"); failed=1; fi
}

check "gpu_kernel_tests" kernel_tests "$BIN/gpu_kernel_tests" --gtest_brief=1
MEGATRAIN_CUDA_WIDE_INDEX=1 check "gpu_kernel_tests, 64-bit indices" kernel_tests_wide \
  "$BIN/gpu_kernel_tests" --gtest_brief=1 --gtest_filter="$FILTER"
check "memcheck (norms, pointwise, elementwise, layouts)" memcheck \
  "$sanitizer" --tool memcheck --error-exitcode 3 "$BIN/gpu_kernel_tests" --gtest_brief=1 --gtest_filter="$FILTER"
check "racecheck (norms)" racecheck \
  "$sanitizer" --tool racecheck --error-exitcode 3 "$BIN/gpu_kernel_tests" --gtest_brief=1 \
  --gtest_filter='*RmsNorm*:*LayerNorm*'
# pointwise_paths: the demo plan's losses with the interpreter and with the compiled kernels.
pointwise_paths() {
  local mode
  for mode in interp jit; do
    MEGATRAIN_POINTWISE=$mode "$BIN/megatrain-run" "$PLAN" --weights "$MODEL" --data "$DATA" --steps 20 \
      --backend cuda --metrics "$OUT/plan-$mode.jsonl" || return 1
  done
  python3 - "$OUT/plan-interp.jsonl" "$OUT/plan-jit.jsonl" <<'EOF'
import json, sys
interp, jit = ([json.loads(line) for line in open(path)] for path in sys.argv[1:3])
fields = ("loss", "grad_norm")
same = len(interp) == len(jit) > 0 and all(a.get(f) == b.get(f) for a, b in zip(interp, jit) for f in fields)
print(f"{len(jit)} steps, losses and gradient norms {'bitwise equal' if same else 'DIFFER'}")
sys.exit(0 if same else 1)
EOF
}
if [[ -n $PLAN ]]; then check "demo plan, pointwise jit vs interp" plan_paths pointwise_paths; fi
echo "== gpu_kernel_bench --roofline"
"$BIN/gpu_kernel_bench" --roofline > "$OUT/roofline.txt" 2>&1 || { rows+=("gpu_kernel_bench --roofline               FAIL  ($OUT/roofline.txt)"); failed=1; }

echo
cat "$OUT/roofline.txt"
echo
printf '%s\n' "${rows[@]}"
exit $failed
