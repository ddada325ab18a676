#!/usr/bin/env bash
# bench/train_defaults.sh - `megatrain train` with its defaults on the GPU machine: it must pick
# the CUDA backend, measure the device profile, compile a plan that fits the GPU and train.
#
#   OUT=$OUT bash bench/train_defaults.sh      # binaries staged by scripts/stage_device.sh
#
# Trains the committed tiny Hugging Face Llama (tests/models/hf/tiny_llama, bf16 safetensors)
# on a text file made here, with no flag but --model, --data, --out and --steps, then checks
# the run's own words: the progress stages, `--backend auto: a GPU is present`, the profile
# measured into RUN_DIR/profile.json, the plan's pools within the profile's device memory, a
# finite loss every step and RUN_DIR/hf written. Prints a short table last.
# Settings (environment): BIN (default build-gpu/bin), OUT (default runs/train_defaults),
# MODEL (default tests/models/hf/tiny_llama), STEPS (default 20).
# Exit status: 0 when every check passed.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build-gpu/bin}
OUT=${OUT:-runs/train_defaults}
MODEL=${MODEL:-tests/models/hf/tiny_llama}
STEPS=${STEPS:-20}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
rm -rf "$OUT"
mkdir -p "$OUT"
passed=0
failed=0
check() {
  local name=$1
  shift
  if "$@"; then echo "ok    $name"; passed=$((passed + 1)); else echo "FAIL  $name"; failed=$((failed + 1)); fi
}

for i in $(seq 200); do
  echo "Line $i: weights stream in per layer, gradients stream out, and the optimizer runs where its state lives."
done >"$OUT/notes.txt"
RUN=$OUT/run
start=$(date +%s)
"$BIN/megatrain" train --model "$MODEL" --data "$OUT/notes.txt" --out "$RUN" --steps "$STEPS" >"$OUT/train.log" 2>&1
rc=$?
seconds=$(( $(date +%s) - start ))
check "megatrain train exits 0 (exit $rc)" test $rc -eq 0 || tail -20 "$OUT/train.log" | sed 's/^/      /'
check "the backend is cuda, chosen by --backend auto" grep -q "cuda backend (--backend auto: a GPU is present)" "$OUT/train.log"
check "the device profile was measured into RUN_DIR/profile.json" test -s "$RUN/profile.json"
device_bytes=$(python3 -c 'import json, sys; print(int(json.load(open(sys.argv[1]))["device_memory_bytes"]))' "$RUN/profile.json" 2>/dev/null || echo 0)
pool_bytes=$("$BIN/megatrain-inspect" "$RUN/train.plan" 2>/dev/null | sed -n 's/^  pool bytes *device \([0-9]*\).*/\1/p')
check "the plan's device state pools ($pool_bytes B) fit the GPU ($device_bytes B)" \
  bash -c '[[ -n $1 && $2 -gt 0 && $1 -lt $2 ]]' _ "$pool_bytes" "$device_bytes"
rows=$(grep -c '"step"' "$RUN/metrics.jsonl" 2>/dev/null || echo 0)
check "$STEPS metrics rows" test "$rows" -eq "$STEPS"
check "every loss finite" python3 -c '
import json, math, sys
losses = [json.loads(line)["loss"] for line in open(sys.argv[1]) if line.strip()]
sys.exit(0 if losses and all(math.isfinite(x) for x in losses) else 1)' "$RUN/metrics.jsonl"
check "RUN_DIR/hf written" test -s "$RUN/hf/config.json"

first=$(head -1 "$RUN/metrics.jsonl" 2>/dev/null | python3 -c 'import json, sys; print("%.4f" % json.loads(sys.stdin.read())["loss"])' 2>/dev/null)
last=$(tail -1 "$RUN/metrics.jsonl" 2>/dev/null | python3 -c 'import json, sys; print("%.4f" % json.loads(sys.stdin.read())["loss"])' 2>/dev/null)
echo
echo "== bench/train_defaults.sh: megatrain train with defaults"
echo "| model | steps | loss first -> last | wall s | device state pool | GPU memory (profile) |"
echo "| --- | --- | --- | --- | --- | --- |"
echo "| $MODEL | $rows | ${first:-?} -> ${last:-?} | $seconds | ${pool_bytes:-?} B | $device_bytes B |"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
