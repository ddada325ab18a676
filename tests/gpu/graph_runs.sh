#!/usr/bin/env bash
# graph_runs.sh - step graphs on the GPU (docs/runtime.md, "Step graphs"): the demo model in bf16 and
# fp32, with its state on the device (the fused device AdamW: kernel nodes whose step count and lr
# a replay sets), on the host (host AdamW tasks: host nodes reading their slots) and with 2
# micro-batches (accumulators), trains 12 steps on cuda with a warm-up and cosine lr schedule,
# once replaying the second step's CUDA graph (--step-graphs on; auto, the default, records these
# plans too, their steps being a few microseconds each) and once issuing every step
# (--no-step-graphs). A replay runs the recorded launches with the recorded addresses, so the
# losses and the weights must be bitwise equal; the recorded run must say nothing of a failed
# recording. Prints each plan's median step time both ways.
# usage: [CORPUS=/abs/tokens.bin] graph_runs.sh BIN SRC   (absolute paths: the script runs in a scratch folder)
set -euo pipefail
source "$(dirname "$0")/demo_setup.sh" "$@"
# cuDNN's default attention backward adds dq with atomics: two runs differ in their last bits.
export MEGATRAIN_ATTENTION_DETERMINISTIC=1

run() {  # run NAME TAG [flags...]
  local name=$1 tag=$2; shift 2
  "$BIN/megatrain-run" "$name.plan" --weights "$ONNX" --data corpus.bin --steps 12 --backend cuda \
    --lr-schedule cosine --warmup-steps 3 --metrics "$name.$tag.jsonl" --export-safetensors "$name.$tag.safetensors" \
    --report "$name.$tag.report.json" "$@" > "$name.$tag.log" 2>&1 || { cat "$name.$tag.log"; fail "$name: $tag run"; }
}
names=()
for precision in bf16 fp32; do
  compile "device_$precision" $precision --state-home device
  compile "host_$precision" $precision --state-home host
  compile "devicemb_$precision" $precision --state-home device --microbatches 2
  names+=("device_$precision" "host_$precision" "devicemb_$precision")
done
# Which tensors differ between two exports, and by how much.
differ() {
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
def tensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    return {k: data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in header.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
print(" ".join(sorted(k for k in a if a[k] != b.get(k))))
PY
}
for name in "${names[@]}"; do
  run "$name" graph --step-graphs on
  run "$name" issued --no-step-graphs
  if grep -q "could not be recorded" "$name.graph.log"; then cat "$name.graph.log"; fail "$name: not recorded"; fi
  if ! cmp -s "$name.graph.safetensors" "$name.issued.safetensors"; then
    # Two issued runs that differ make the comparison meaningless: say which it is.
    run "$name" again --no-step-graphs
    cmp -s "$name.issued.safetensors" "$name.again.safetensors" ||
      fail "$name: two issued runs differ (in $(differ "$name.issued.safetensors" "$name.again.safetensors"))"
    fail "$name: the replayed run's weights differ from the issued run's (in $(differ "$name.graph.safetensors" "$name.issued.safetensors"))"
  fi
done
python3 - "${names[@]}" <<'PY' || fail "losses"
import json, sys
for name in sys.argv[1:]:
    def losses(tag):
        return [json.loads(l)["loss"] for l in open(f"{name}.{tag}.jsonl")]
    def lrs(tag):
        return [json.loads(l)["lr"] for l in open(f"{name}.{tag}.jsonl")]
    graph, issued = losses("graph"), losses("issued")
    assert len(graph) == 12, (name, graph)
    assert [repr(x) for x in graph] == [repr(x) for x in issued], (name, graph, issued)
    assert len(set(lrs("graph"))) > 6, (name, lrs("graph"))  # the schedule changes the lr of replayed steps
    ms = {tag: json.load(open(f"{name}.{tag}.report.json"))["median_step_time_s"] * 1e3 for tag in ("graph", "issued")}
    print(f"{name}: 12 losses and the weights bitwise equal; median step {ms['graph']:.3f} ms replayed, "
          f"{ms['issued']:.3f} ms issued ({ms['issued'] / ms['graph']:.2f}x)")
PY
echo "PASS: ${#names[@]} plans"
