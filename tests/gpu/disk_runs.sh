#!/usr/bin/env bash
# disk_runs.sh - the disk tier on the CUDA backend (docs/tiering.md "State homes"): the tiny Llama
# compiled with every parameter's optimizer state on disk trains 20 steps on cuda to the losses and
# weights of the all-host plan, bitwise (the same kernels, the same host AdamW; the disk only moves
# bytes), with its disk copies on the disk I/O thread and again serialized (MEGATRAIN_CUDA_SYNC=1,
# the copies on the executor's thread); its trace times the copies on a `disk` track. A run SIGKILLed in step 8,
# after it issued part of its write-back, resumes from its step-5 checkpoint (which holds the disk
# state, read through the backend) to the losses and final checkpoint of a run never killed.
# usage: disk_runs.sh BIN SRC   (BIN: megatrain-compile, megatrain-run, megatrain-inspect)
#   DISK_DIR: where the state files go (default: the scratch directory; it must take O_DIRECT)
set -euo pipefail
BIN=$1
SRC=$2
MODEL=${MODEL:-llama_opt}
LLM_PRECISION=${LLM_PRECISION:-bf16}
source "$SRC/tests/e2e/bitwise_common.sh"

compile() {
  local name=$1; shift
  "$BIN/megatrain-compile" "$ONNX" -o "$name.plan" "${COMPILE[@]}" "$@" > "$name.log" 2>&1 ||
    { cat "$name.log"; fail "$name: compile failed"; }
}
compile host --state-home host
compile disk --state-home disk --disk-memory 1GiB
"$BIN/megatrain-inspect" disk.plan --max-steps 1 > disk.inspect
grep -q "'disk' DISK" disk.inspect || fail "no DISK pool in the disk plan"

run() {  # run PLAN TAG [flags...]
  local plan=$1 tag=$2; shift 2
  "$BIN/megatrain-run" "$plan.plan" --backend cuda --weights "$ONNX" "${FEED[@]}" --steps 20 --quiet \
    --metrics "$tag.jsonl" "$@" > "$tag.log" 2>&1
}
losses() { python3 -c "
import json, sys
for line in open(sys.argv[1]): print(repr(json.loads(line)['loss']))" "$1.jsonl"; }

if run disk nodir; then fail "a disk plan ran on cuda without --disk-dir"; fi
grep -q -- "--disk-dir" nodir.log || { cat nodir.log; fail "no --disk-dir in the error"; }

run host host --export-safetensors host.safetensors || { cat host.log; fail "host run"; }
DISK=$(mktemp -d "${DISK_DIR:-$PWD}/disk_runs.XXXXXX")
trap 'rm -rf "$TMP" "$DISK"' EXIT
mkdir -p "$DISK"/d0 "$DISK"/d1 "$DISK"/d2 "$DISK"/d3
run disk disk --disk-dir "$DISK/d0" --export-safetensors disk.safetensors --trace disk.trace.json ||
  { cat disk.log; fail "disk run"; }
MEGATRAIN_CUDA_SYNC=1 run disk serial --disk-dir "$DISK/d1" --export-safetensors serial.safetensors ||
  { cat serial.log; fail "serialized disk run"; }
losses host > host.losses; losses disk > disk.losses; losses serial > serial.losses
cmp -s host.losses disk.losses || { paste host.losses disk.losses; fail "disk: losses differ from all-host"; }
cmp -s host.safetensors disk.safetensors || fail "disk: trained weights differ from all-host"
cmp -s disk.losses serial.losses || { paste disk.losses serial.losses; fail "serialized disk run: losses differ"; }
cmp -s disk.safetensors serial.safetensors || fail "serialized disk run: weights differ"
ls "$DISK"/d0/*.state > /dev/null || fail "no state file under --disk-dir"
python3 - disk.trace.json <<'PY' || fail "trace"
import json, sys
trace = json.load(open(sys.argv[1]))
tids = {e["args"]["name"]: e["tid"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
assert "disk" in tids, tids
spans = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["tid"] == tids["disk"]]
assert spans and all(e["dur"] >= 0 for e in spans) and any(e["dur"] > 0 for e in spans), spans[:4]
PY

run disk full --disk-dir "$DISK/d2" --save-every 5 --save full || { cat full.log; fail "full run"; }
set +e
MEGATRAIN_TEST_KILL_IN_STEP=8 run disk crash --disk-dir "$DISK/d3" --save-every 5 --save crash
rc=$?
set -e
[[ $rc -eq 137 ]] || { cat crash.log; fail "expected death by SIGKILL (137) in step 8, got $rc"; }
[[ $(cat crash/latest) == step-5.ckpt ]] || fail "latest is $(cat crash/latest)"
run disk crash --disk-dir "$DISK/d3" --save-every 5 --save crash --resume crash || { cat crash.log; fail "resumed run"; }
python3 - full.jsonl crash.jsonl <<'PY'
import json, sys
rows = [{r["step"]: r["loss"] for r in map(json.loads, open(p))} for p in sys.argv[1:]]
for step in range(1, 21):
    if repr(rows[0][step]) != repr(rows[1][step]):
        sys.exit(f"step {step}: loss {rows[0][step]!r} vs {rows[1][step]!r}")
PY
cmp full/step-20.ckpt crash/step-20.ckpt || fail "the final checkpoints differ"
echo "PASS: $MODEL ($LLM_PRECISION) on cuda with optimizer state on disk: 20 losses and weights bitwise equal to" \
  "all-host, threaded and serialized; killed in step 8 (exit $rc), resumed from step 5, final state identical" \
  "(last loss $(tail -1 disk.losses))"
