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
