#!/usr/bin/env bash
# bench/gpu_round.sh - one round on the GPU machine: the GPU tests (bench/device.sh), the host
# AdamW against torch's (bench/adamw_vs_torch.sh), `megatrain train` with its defaults
# (bench/train_defaults.sh) and the 1.36B benchmark against the PyTorch peers
# (bench/llama1b3.sh), with every summary table printed last.
#
#   OUT=$OUT bash bench/gpu_round.sh          # binaries staged by scripts/stage_device.sh
#
# With SCALE=1 also the scale benchmarks (bench/scale_round.sh; PARTS, PLANS, DEEPSPEED_WHEELS pass
# through), and with HOMES=1 the state homes and the disk tier on cuda (tests/gpu/homes_runs.sh,
# tests/gpu/disk_runs.sh).
# Settings (environment): BIN (default build-gpu/bin), TESTS=0 / ADAMW=0 / TRAIN=0 / LLAMA=0 skip a
# part; SETTINGS (16k,64k) and the other knobs of bench/llama1b3.sh pass through; BENCH=1,
# SANITIZE=1, LLM=0 pass to bench/device.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
export BIN=${BIN:-build-gpu/bin}
OUT=${OUT:-runs/gpu_round}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
start=$(date +%s)
if [[ ${TESTS:-1} == 1 ]]; then
  PLAN=${PLAN:-build-gpu/tt.plan} DATA=${DATA:-build-gpu/fortunes.bin} STEPS=${STEPS_DEMO:-30} \
    OUT=$OUT/device bash bench/device.sh > "$OUT/device.log" 2>&1 || status=1
  echo "device.sh done at +$(( $(date +%s) - start )) s"
fi
if [[ ${TESTS:-1} == 1 && -d build-gpu/streams ]]; then
  bash tests/gpu/streams_runs.sh "$BIN" build-gpu/streams > "$OUT/streams.log" 2>&1 || status=1
  echo "streams_runs.sh done at +$(( $(date +%s) - start )) s (exit ${PIPESTATUS[0]})"
fi
if [[ ${HOMES:-0} == 1 ]]; then
  abs_bin=$(cd "$BIN" && pwd)
  CORPUS=${CORPUS:-$PWD/build-gpu/fortunes.bin} bash tests/gpu/homes_runs.sh "$abs_bin" "$PWD" > "$OUT/homes_runs.log" 2>&1 || status=1
  bash tests/gpu/disk_runs.sh "$abs_bin" "$PWD" > "$OUT/disk_runs.log" 2>&1 || status=1
  echo "homes_runs.sh, disk_runs.sh done at +$(( $(date +%s) - start )) s"
fi
if [[ ${ADAMW:-1} == 1 ]]; then
  "$BIN/runtime_adamw_tests" --gtest_brief=1 > "$OUT/adamw_tests.log" 2>&1 || status=1
  bash bench/adamw_vs_torch.sh > "$OUT/adamw.log" 2>&1 || status=1
  echo "adamw_vs_torch.sh done at +$(( $(date +%s) - start )) s"
fi
if [[ ${TRAIN:-1} == 1 ]]; then
  OUT=$OUT/train_defaults bash bench/train_defaults.sh > "$OUT/train_defaults.log" 2>&1 || status=1
  echo "train_defaults.sh done at +$(( $(date +%s) - start )) s"
fi
if [[ ${LLAMA:-1} == 1 ]]; then
  OUT=$OUT/llama1b3 bash bench/llama1b3.sh > "$OUT/llama1b3.log" 2>&1 || status=1
  echo "llama1b3.sh done at +$(( $(date +%s) - start )) s"
fi
if [[ ${SCALE:-0} == 1 ]]; then
  OUT=$OUT/scale bash bench/scale_round.sh > "$OUT/scale.log" 2>&1 || status=1
  echo "scale_round.sh done at +$(( $(date +%s) - start )) s"
fi
echo
[[ -f $OUT/device.log ]] && { echo "== GPU tests (bench/device.sh)"; sed -n '/^== bench\/device.sh/,$p' "$OUT/device.log"; }
[[ -f $OUT/streams.log ]] && { echo "== streams (tests/gpu/streams_runs.sh)"; tail -12 "$OUT/streams.log"; }
[[ -f $OUT/homes_runs.log ]] && { echo "== state homes on cuda (tests/gpu/homes_runs.sh)"; tail -4 "$OUT/homes_runs.log"; }
[[ -f $OUT/disk_runs.log ]] && { echo "== the disk tier on cuda (tests/gpu/disk_runs.sh)"; tail -4 "$OUT/disk_runs.log"; }
[[ -f $OUT/adamw_tests.log ]] && { echo "== runtime_adamw_tests"; tail -3 "$OUT/adamw_tests.log"; }
[[ -f $OUT/adamw.log ]] && { echo "== host AdamW vs torch"; tail -10 "$OUT/adamw.log"; }
[[ -f $OUT/train_defaults.log ]] && { echo "== megatrain train with defaults"; tail -6 "$OUT/train_defaults.log"; }
[[ -f $OUT/llama1b3.log ]] && { echo "== 1.36B Llama vs PyTorch peers"; tail -40 "$OUT/llama1b3.log"; }
[[ -f $OUT/scale.log ]] && { echo "== scale (bench/scale_round.sh)"; sed -n '/^== 1b3-default/,$p' "$OUT/scale.log"; }
exit $status
