#!/usr/bin/env bash
# homes_7b.sh - state homes at the 7B scale, compile only (docs/tiering.md "State homes"): the
# graph-only Llama-2-7B export at 8 x 2048 tokens compiled with --device-memory 64GiB
# --host-memory 48GiB (the CI check of issue 13) has device and host pools within those sizes
# and state in both tiers, none on disk; with --device-memory 64GiB --host-memory 24GiB
# --disk-memory 100GiB it has a disk tier, every tier within its capacity. megatrain-inspect's
# bytes per parameter per tier are checked against the pools, and the host's against what the
# homes imply: no persistent gradient (the gradient staging ring), no compute copy on the device.
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

check hostdev $((64 * GiB)) $((48 * GiB)) 0 --device-memory 64GiB --host-memory 48GiB
positive "$(bytes hostdev device)" || fail "hostdev: no state on the device"
positive "$(bytes hostdev host)" || fail "hostdev: no state on the host"
[[ $(bytes hostdev disk) == 0.00 ]] || fail "hostdev: state on disk without --disk-memory"
# Per parameter at home on the device: master, m, v (12 bytes); on the host: those and the
# bf16 copy (14), no gradient: every home line of a matrix says so.
grep -q "'grad_stage' HOST_PINNED" hostdev.inspect || fail "hostdev: no gradient staging ring"
python3 - hostdev.inspect <<'PY' || fail "hostdev: state bytes per parameter"
import re, sys
units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
seen = set()
for line in open(sys.argv[1]):
    m = re.match(r"  home +(\w+) +(\S+) \(([\d,]+) elements, ([\d.]+) (\w+) of state\)", line)
    if not m or "proj" not in m.group(2):
        continue
    per = float(m.group(4)) * units[m.group(5)] / int(m.group(3).replace(",", ""))
    want = {"device": 12, "host": 14}[m.group(1)]
    assert abs(per - want) < 0.1, (line, per, want)
    seen.add(m.group(1))
assert seen == {"device", "host"}, seen
PY

check disk $((64 * GiB)) $((24 * GiB)) $((100 * GiB)) --device-memory 64GiB --host-memory 24GiB --disk-memory 100GiB
grep -q "'disk' DISK" disk.inspect || fail "disk: no DISK pool"
positive "$(bytes disk disk)" || fail "disk: no state on disk"
grep -q '^  home *disk ' disk.inspect || fail "disk: no parameter at home on disk"

# Not enough anywhere: the error names the capacities and their flags.
if "$BIN/megatrain-compile" step.mlir -o none.plan --device-memory 64GiB --host-memory 8GiB > none.log 2>&1; then
  fail "7B state fit in 64 GiB of device and 8 GiB of host"
fi
grep -q -- "--host-memory" none.log || { cat none.log; fail "the error names no flag"; }
echo "PASS"
