#!/usr/bin/env bash
# homes_7b.sh - state homes at the 7B scale, compile only (docs/tiering.md "State homes"): the
# graph-only Llama-2-7B export at 8 x 2048 tokens compiled with --device-memory 64GiB
# --host-memory 56GiB has device and host pools within those sizes and state in both tiers, none
# on disk; with --device-memory 80GiB --host-memory 24GiB --disk-memory 100GiB it has a disk
# tier, every tier within its capacity. megatrain-inspect's bytes per parameter per tier are
# checked against the pools. (64 + 48 GiB does not hold it yet: the host staging of the
# activations the plan offloads, about 10 GiB, competes with the state for host memory.)
# usage: homes_7b.sh BIN SRC
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$SRC/tests/models/graphs/llama_7b_b8s2048.onnx
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
fail() { echo "FAIL: $*"; exit 1; }
GiB=$((1 << 30))

"$BIN/megatrain-compile" "$MODEL" --emit=training -o step.mlir || fail "the 7B training step"

# check NAME DEVICE HOST DISK [flags]: compile, inspect, every tier's pools within its capacity.
check() {
  local name=$1 device=$2 host=$3 disk=$4; shift 4
  "$BIN/megatrain-compile" step.mlir -o "$name.plan" "$@" > "$name.log" 2>&1 || { cat "$name.log"; fail "$name: compile"; }
  "$BIN/megatrain-inspect" "$name.plan" --max-steps 1 > "$name.inspect" || fail "$name: inspect"
  read -r d h k < <(sed -n 's/.*pool bytes *device \([0-9]*\), host \([0-9]*\), disk \([0-9]*\).*/\1 \2 \3/p' "$name.inspect")
  [[ -n ${d:-} ]] || fail "$name: no pool bytes in the inspect output"
  (( d <= device )) || fail "$name: device pools $d over $device"
  (( h <= host )) || fail "$name: host pools $h over $host"
  (( k <= disk )) || fail "$name: disk pools $k over $disk"
  echo "$name: pools device $d <= $device, host $h <= $host, disk $k <= $disk"
  grep "bytes/param" "$name.inspect"
}
# bytes NAME TIER: bytes per parameter in TIER.
bytes() { sed -n "s/.*bytes\/param.* $2 \([0-9.]*\).*/\1/p" "$1.inspect"; }
positive() { awk -v b="$1" 'BEGIN { exit !(b > 0) }'; }

check hostdev $((64 * GiB)) $((56 * GiB)) 0 --device-memory 64GiB --host-memory 56GiB
positive "$(bytes hostdev device)" || fail "hostdev: no state on the device"
positive "$(bytes hostdev host)" || fail "hostdev: no state on the host"
[[ $(bytes hostdev disk) == 0.00 ]] || fail "hostdev: state on disk without --disk-memory"

check disk $((80 * GiB)) $((24 * GiB)) $((100 * GiB)) --device-memory 80GiB --host-memory 24GiB --disk-memory 100GiB
grep -q "'disk' DISK" disk.inspect || fail "disk: no DISK pool"
positive "$(bytes disk disk)" || fail "disk: no state on disk"
grep -q '^  home *disk ' disk.inspect || fail "disk: no parameter at home on disk"

# Not enough anywhere: the error names the capacities and their flags.
if "$BIN/megatrain-compile" step.mlir -o none.plan --device-memory 64GiB --host-memory 8GiB > none.log 2>&1; then
  fail "7B state fit in 64 GiB of device and 8 GiB of host"
fi
grep -q -- "--host-memory" none.log || { cat none.log; fail "the error names no flag"; }
echo "PASS"
