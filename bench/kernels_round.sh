#!/usr/bin/env bash
# bench/kernels_round.sh - the CUDA kernel tests, compute-sanitizer on the bandwidth kernels, and
# the roofline table, in one command on the GPU machine; a short table last.
#
#   OUT=$OUT bash bench/kernels_round.sh     # binaries staged by scripts/stage_device.sh
#
# Runs, from BIN (default build-gpu/bin): gpu_kernel_tests (every kernel against the CPU
# backend; the pointwise tests on both paths, compiled and interpreted, and the compiled
# kernels bitwise against the interpreter); the norm, pointwise and elementwise tests again on 64-bit indices
# (MEGATRAIN_CUDA_WIDE_INDEX=1), under compute-sanitizer memcheck, and racecheck on the
# kernels with shared memory (the norms); then `gpu_kernel_bench --roofline` (docs/cuda.md,
# "Bandwidth"; each pointwise program twice, interpreted and compiled), whose table is printed last. Settings: BIN, OUT (default runs/kernels),
# FILTER (the gtest filter of the sanitized tests). Exit status 0 when every check passed.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build-gpu/bin}
OUT=${OUT:-runs/kernels}
FILTER=${FILTER:-'*RmsNorm*:*LayerNorm*:*PointwiseCudaKernel.*:PointwiseJit.*:CudaKernels.BinaryOpsBroadcast:CudaKernels.ScaleAndActivations:CudaKernels.ActivationGradients:CudaKernels.MathFunctions:CudaKernels.ReluAndReluGradPropagateNaN'}
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
  summary=$(grep -oE '\[  PASSED  \] [0-9]+ tests?|ERROR SUMMARY: [0-9]+ errors?|RACECHECK SUMMARY: .*' "$log" |
    tr '\n' ' ')
  if [[ $status == 0 ]]; then rows+=("$(printf '%-42s PASS  %s' "$label" "$summary")")
  else rows+=("$(printf '%-42s FAIL  exit %s, %s (%s)' "$label" "$status" "$summary" "$log")"); failed=1; fi
}

check "gpu_kernel_tests" kernel_tests "$BIN/gpu_kernel_tests" --gtest_brief=1
MEGATRAIN_CUDA_WIDE_INDEX=1 check "gpu_kernel_tests, 64-bit indices" kernel_tests_wide \
  "$BIN/gpu_kernel_tests" --gtest_brief=1 --gtest_filter="$FILTER"
check "memcheck (norms, pointwise, elementwise)" memcheck \
  "$sanitizer" --tool memcheck --error-exitcode 3 "$BIN/gpu_kernel_tests" --gtest_brief=1 --gtest_filter="$FILTER"
check "racecheck (norms)" racecheck \
  "$sanitizer" --tool racecheck --error-exitcode 3 "$BIN/gpu_kernel_tests" --gtest_brief=1 \
  --gtest_filter='*RmsNorm*:*LayerNorm*'
echo "== gpu_kernel_bench --roofline"
"$BIN/gpu_kernel_bench" --roofline > "$OUT/roofline.txt" 2>&1 || { rows+=("gpu_kernel_bench --roofline               FAIL  ($OUT/roofline.txt)"); failed=1; }

echo
cat "$OUT/roofline.txt"
echo
printf '%s\n' "${rows[@]}"
exit $failed
