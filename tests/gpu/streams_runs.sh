#!/usr/bin/env bash
# streams_runs.sh - whole plans on the GPU with real streams: every PLAN in DIR (the demo plan,
# and tiered plans compiled with a --device-memory small enough to offload and prefetch) trains
# 10 steps on cuda with its streams concurrent and poisoning on, and again serialized
# (MEGATRAIN_CUDA_SYNC=1): losses and weights must be bitwise equal, and the losses within
# 1e-4 relative of the cpu backend's. The concurrent run's --trace must be JSON with a track
# for every stream of the plan, and its --report must hold the memory report within the
# plan's budget plus the fixed workspace.
# usage: streams_runs.sh BIN DIR   (DIR: NAME.plan files, model.onnx, corpus.bin)
set -euo pipefail
BIN=$1
DIR=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
shopt -s nullglob
plans=("$DIR"/*.plan)
[[ ${#plans[@]} -gt 0 ]] || fail "no plans in $DIR"
for plan in "${plans[@]}"; do
  name=$(basename "$plan" .plan)
  run() {  # run TAG [env...] -- [flags...]
    local tag=$1; shift
    env "$@" "$BIN/megatrain-run" "$plan" --weights "$DIR/model.onnx" --data "$DIR/corpus.bin" --steps 10 --quiet \
      --metrics "$TMP/$name.$tag.jsonl" --export-safetensors "$TMP/$name.$tag.safetensors" \
      ${EXTRA[@]+"${EXTRA[@]}"} > "$TMP/$name.$tag.log" 2>&1 || { cat "$TMP/$name.$tag.log"; fail "$name: $tag run"; }
  }
  EXTRA=(--backend cuda --poison --trace "$TMP/$name.trace.json" --report "$TMP/$name.report.json"); run streams MEGATRAIN_X=0
  EXTRA=(--backend cuda); run serial MEGATRAIN_CUDA_SYNC=1
  EXTRA=(--backend cpu); run cpu MEGATRAIN_X=0
  cmp -s "$TMP/$name.streams.safetensors" "$TMP/$name.serial.safetensors" || fail "$name: weights differ from the serialized run"
  python3 - "$plan" "$TMP" "$name" <<'PY' || fail "$name"
import json, sys
plan, tmp, name = sys.argv[1:4]
def losses(tag):
    return [json.loads(l)["loss"] for l in open(f"{tmp}/{name}.{tag}.jsonl")]
streams, serial, cpu = losses("streams"), losses("serial"), losses("cpu")
assert len(streams) == 10, streams
assert [repr(x) for x in streams] == [repr(x) for x in serial], (streams, serial)
for a, b in zip(streams, cpu):
    assert abs(a - b) <= 1e-4 * abs(b), (a, b)
trace = json.load(open(f"{tmp}/{name}.trace.json"))
tracks = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
spans = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
assert spans and all("predicted_start_us" in e["args"] for e in spans), "spans lack predictions"
log = open(f"{tmp}/{name}.streams.log").read()
report = json.load(open(f"{tmp}/{name}.report.json"))
for key in ("median_step_time_s", "predicted_step_s", "device_arena_bytes", "device_scratch_bytes",
            "device_workspace_bytes", "device_context_bytes", "device_used_after_first_step_bytes"):
    assert key in report, key
ours = report["device_arena_bytes"] + report["device_scratch_bytes"] + report["device_workspace_bytes"]
budget = report["device_budget_bytes"] or report["device_arena_bytes"]
assert ours <= budget + report["device_fixed_workspace_bytes"], report
assert "over the prediction most" in log, log
# megatrain-run's summary has a busy line for every stream of the plan: each one a track.
streams = {line.split(":")[0].split()[-1] for line in log.splitlines() if line.startswith("  busy    ")}
assert streams and streams <= tracks, (streams, tracks)
print(f"{name}: 10 losses bitwise equal serialized, within 1e-4 of cpu; {len(spans)} spans on "
      f"{len(tracks)} tracks ({', '.join(sorted(tracks))}); median step {report['median_step_time_s']*1e3:.3f} ms "
      f"vs {report['predicted_step_s']*1e3:.3f} ms predicted")
PY
done
echo "PASS: ${#plans[@]} plans"
