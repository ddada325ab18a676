#!/usr/bin/env bash
# disk_resume.sh - disk-resident optimizer state (docs/tiering.md "State homes") trains as the
# all-host plan does, and a run SIGKILLed in the middle of a step, after it wrote part of its state
# back to disk, resumes from its last checkpoint (which holds the disk state) bitwise: the same
# losses and the same final checkpoint as a run that was never killed.
# usage: disk_resume.sh BIN SRC
set -euo pipefail
BIN=$1
SRC=$2
MODEL=demo
source "$(dirname "$0")/bitwise_common.sh"
# O_DIRECT needs a filesystem that takes it; the scratch directory's does on CI.
compile() {
  local name=$1; shift
  "$BIN/megatrain-compile" "$ONNX" -o "$name.plan" "${COMPILE[@]}" "$@" > "$name.log" 2>&1 ||
    { cat "$name.log"; fail "$name: compile failed"; }
}
compile host --state-home host
compile disk --state-home disk --disk-memory 1GiB
"$BIN/megatrain-inspect" disk.plan --max-steps 1 > disk.inspect
grep -q "'disk' DISK" disk.inspect || fail "no DISK pool"
grep -q "^  home *disk " disk.inspect || fail "no parameter at home on disk"

# The prediction prices the disk copies with the profile's disk link: on a disk of 1 MB/s each
# way, the step takes at least the time to read and write every byte of disk state once, and
# the breakdown puts it in the optimizer's tail.
echo '{"disk_read_bytes_per_s": 1e6, "disk_write_bytes_per_s": 1e6}' > slow_disk.json
compile slow --state-home disk --disk-memory 1GiB --device-profile slow_disk.json
"$BIN/megatrain-inspect" slow.plan --max-steps 1 > slow.inspect
python3 - disk.inspect slow.inspect <<'PY' || fail "the prediction does not price the disk copies"
import re, sys
unit = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
def figures(path):
    text = open(path).read()
    step = re.search(r"predicted step ([0-9.]+) (us|ms|s): .*host optimizer ([0-9.]+) (us|ms|s)", text)
    size = re.search(r"^  disk +\d+ parameters?, ([0-9.]+) (B|KiB|MiB|GiB) of state", text, re.M)
    scale = {"B": 1, "KiB": 1024, "MiB": 1 << 20, "GiB": 1 << 30}
    return (float(step[1]) * unit[step[2]], float(step[3]) * unit[step[4]], float(size[1]) * scale[size[2]])
fast_step, _, state = figures(sys.argv[1])
slow_step, slow_tail, _ = figures(sys.argv[2])
floor = 2 * state / 1e6  # every byte read once and written once
assert slow_step >= 0.9 * floor and slow_tail >= 0.8 * floor and fast_step < 0.1 * floor, (fast_step, slow_step, slow_tail, floor)
print(f"disk link priced: {state:.0f} bytes of disk state, step {fast_step:.4f} s at the default profile, "
      f"{slow_step:.3f} s at 1 MB/s (optimizer tail {slow_tail:.3f} s)")
PY

# The disk plan needs its directory.
if "$BIN/megatrain-run" disk.plan --weights "$ONNX" "${FEED[@]}" --steps 1 --quiet > nodir.log 2>&1; then
  fail "a disk plan ran without --disk-dir"
fi
grep -q -- "--disk-dir" nodir.log || { cat nodir.log; fail "no --disk-dir in the error"; }

train host
mkdir -p d0 d1 d2
run() { "$BIN/megatrain-run" disk.plan --weights "$ONNX" "${FEED[@]}" --quiet "$@"; }
run --steps 20 --disk-dir d0 --metrics d0.jsonl --export-safetensors disk.safetensors >/dev/null
python3 -c "
import json
for line in open('d0.jsonl'): print(repr(json.loads(line)['loss']))" > disk.losses
cmp -s host.losses disk.losses || { paste host.losses disk.losses; fail "disk: losses differ from all-host"; }
cmp -s host.safetensors disk.safetensors || fail "disk: trained weights differ from all-host"
ls d0/*.state >/dev/null || fail "no state file under --disk-dir"

run --steps 20 --disk-dir d1 --save-every 5 --save full --metrics full.jsonl >/dev/null
set +e
MEGATRAIN_TEST_KILL_IN_STEP=8 run --steps 20 --disk-dir d2 --save-every 5 --save crash --metrics crash.jsonl \
  >/dev/null 2>&1
rc=$?
set -e
[[ $rc -eq 137 ]] || fail "expected death by SIGKILL (137) in step 8, got $rc"
[[ $(cat crash/latest) == step-5.ckpt ]] || fail "latest is $(cat crash/latest)"
run --steps 20 --disk-dir d2 --save-every 5 --save crash --resume crash --metrics crash.jsonl >/dev/null
python3 - full.jsonl crash.jsonl <<'PY'
import json, sys
rows = [{r["step"]: r["loss"] for r in map(json.loads, open(p))} for p in sys.argv[1:]]
for step in range(1, 21):
    if repr(rows[0][step]) != repr(rows[1][step]):
        sys.exit(f"step {step}: loss {rows[0][step]!r} vs {rows[1][step]!r}")
PY
cmp full/step-20.ckpt crash/step-20.ckpt || fail "the final checkpoints differ"
echo "PASS: disk state bitwise equal to all-host; killed in step 8 (exit $rc), resumed from step 5, final state identical"
