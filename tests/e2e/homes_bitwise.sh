#!/usr/bin/env bash
# homes_bitwise.sh - a parameter's home never changes the math (docs/tiering.md "State homes"):
# the model compiled with every parameter's state forced to the host (the plan of before homes),
# to the device, to disk (optimizer state in a file under --disk-dir), mixed (matrices on the
# device, the rest on the host), mixed over all three tiers, and with the homes the compiler
# chooses, trains 20 steps on the CPU backend (every tier emulated in host memory,
# dead tensors poisoned) to bitwise-identical losses and weights; so does the all-host plan with
# --keep-gradients (persistent gradients instead of the staging ring; with micro-batches the
# accumulators on the host instead of the device). The device plans must have
# the device_state pool, run their updates on the compute stream and keep no compute copy (a bf16
# fetch is a cast of the master); the host plans' gradients pass through the grad_stage ring;
# `megatrain-inspect` must show the bytes per parameter of each tier that the homes imply.
# usage: homes_bitwise.sh BIN SRC MODEL [compile flags...]
#   (MODEL: demo, demo_bf16, or a tests/models/llm/*.onnx stem)
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
shift 3
EXTRA=("$@")
LLM_PRECISION=fp32
source "$(dirname "$0")/bitwise_common.sh"

compile() {
  local name=$1; shift
  "$BIN/megatrain-compile" "$ONNX" -o "$name.plan" "${COMPILE[@]}" "${EXTRA[@]}" "$@" > "$name.log" 2>&1 ||
    { cat "$name.log"; fail "$name: compile failed"; }
  "$BIN/megatrain-inspect" "$name.plan" --max-steps 1 > "$name.inspect" || fail "$name: inspect failed"
}
# bytes NAME TIER: the inspect's bytes per parameter in TIER.
bytes() { sed -n "s/.*bytes\/param.* $2 \([0-9.]*\).*/\1/p" "$1.inspect"; }

compile host --state-home host
compile keep --state-home host --keep-gradients
compile device --state-home device
compile mixed --state-home 'device:.*weight' --state-home host
compile disk --state-home disk --disk-memory 1GiB
compile three --state-home 'device:.*(weight|val_1)' --state-home 'disk:.*(bias|val_2|layer)' --state-home host \
  --disk-memory 1GiB
compile auto

[[ $(bytes device host) == 0.00 ]] || fail "device: $(bytes device host) bytes/param on the host"
# The device plan keeps master, m and v (12 bytes, more for the 256-byte padding of small
# tensors), no compute copy, and no gradient unless micro-batches accumulate one (4 bytes).
MB=0
[[ " ${EXTRA[*]} " == *microbatches* ]] && MB=1
DEVICE_BYTES=$(bytes device device)
awk -v b="$DEVICE_BYTES" -v mb=$MB 'BEGIN { exit !(b >= 12 + 4 * mb && b < 14 + 4 * mb) }' ||
  fail "device: $DEVICE_BYTES bytes/param"
# The host plan keeps master, m, v (and the bf16 copy, and the micro-batch accumulator); its
# gradients pass through the ring. --keep-gradients keeps them: 4 bytes more without micro-batches.
# With micro-batches the host plan accumulates on the device (4 bytes there), keep on the host.
awk -v h="$(bytes host host)" -v k="$(bytes keep host)" 'BEGIN { exit !(k >= h + 4) }' ||
  fail "host $(bytes host host), keep $(bytes keep host) bytes/param"
awk -v d="$(bytes host device)" -v mb=$MB 'BEGIN { exit !(mb ? d >= 4 : d == 0) }' ||
  fail "host: $(bytes host device) bytes/param on the device"
grep -q "'grad_stage' HOST_PINNED" host.inspect || fail "host: no grad_stage pool"
if [[ $MB == 0 ]] && grep -q "'grad_stage'" keep.inspect; then fail "keep: a grad_stage pool"; fi
awk -v d="$(bytes mixed device)" -v h="$(bytes mixed host)" 'BEGIN { exit !(d > 0 && h > 0) }' ||
  fail "mixed: device $(bytes mixed device), host $(bytes mixed host) bytes/param"
# The default capacities hold these models on the device.
[[ $(bytes auto host) == 0.00 ]] || fail "auto: $(bytes auto host) bytes/param left on the host"
grep -q "'device_state' DEVICE" device.inspect || fail "device: no device_state pool"
if [[ $MB == 0 ]] && grep -q "'device_state'" host.inspect; then fail "host: a device_state pool"; fi
if [[ $MB == 1 ]] && ! grep -q "'device_state'" host.inspect; then fail "host: no device accumulators"; fi
"$BIN/megatrain-compile" "$ONNX" -o - --emit=plan-text "${COMPILE[@]}" "${EXTRA[@]}" --state-home device > device.txt
grep -B2 -A3 'kind: ADAMW' device.txt | grep -q 'stream: "compute"' || fail "device: ADAMW not on the compute stream"
if grep -q 'name: "grad:' device.txt && [[ " ${EXTRA[*]} " != *microbatches* ]]; then
  fail "device: a kept gradient without micro-batches"
fi
if grep -q 'name: "compute:' device.txt; then fail "device: a compute copy"; fi
if grep -q 'precision bf16' <<< "${COMPILE[*]}"; then
  grep -q 'kernel: "cast"' device.txt || fail "device: no cast from the master"
fi

# Every run gets a directory for its disk state (a plan without a DISK pool ignores it).
train() {
  mkdir -p "$1.disk"
  "$BIN/megatrain-run" "$1.plan" --weights "$ONNX" "${FEED[@]}" --steps 20 --quiet --disk-dir "$1.disk" \
    --metrics "$1.jsonl" --export-safetensors "$1.safetensors" >/dev/null
  python3 -c "
import json
for line in open('$1.jsonl'):
    print(repr(json.loads(line)['loss']))" > "$1.losses"
}
awk -v d="$(bytes disk disk)" 'BEGIN { exit !(d >= 8) }' || fail "disk: $(bytes disk disk) bytes/param on disk"

train host
# Clipping needs every gradient at once: a plan whose updates read the ring is refused, naming
# the flag that keeps them; the keep plan clips.
if "$BIN/megatrain-run" host.plan --weights "$ONNX" "${FEED[@]}" --steps 1 --quiet --clip-grad-norm 1 \
  > clip.log 2>&1; then
  fail "host: --clip-grad-norm ran with the gradients in the staging ring"
fi
grep -q -- "--keep-gradients" clip.log || { cat clip.log; fail "host: the clipping error names no --keep-gradients"; }
"$BIN/megatrain-run" keep.plan --weights "$ONNX" "${FEED[@]}" --steps 1 --quiet --clip-grad-norm 1 > /dev/null ||
  fail "keep: --clip-grad-norm refused"
for run in keep device disk mixed three auto; do
  train "$run"
  cmp -s host.losses "$run.losses" || { paste host.losses "$run.losses"; fail "$run: losses differ"; }
  cmp -s host.safetensors "$run.safetensors" || fail "$run: trained weights differ"
  echo "$MODEL ${EXTRA[*]}: $run (device $(bytes "$run" device), host $(bytes "$run" host), disk $(bytes "$run" disk) bytes/param) bitwise equal to all-host over 20 steps"
done
echo "PASS $MODEL"
