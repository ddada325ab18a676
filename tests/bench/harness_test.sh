#!/usr/bin/env bash
# tests/bench/harness_test.sh BIN SRC - bench/plan_header.py, make_tokens.py and bench_table.py
# on a real plan and a real CPU run of the tiny transformer (no torch needed):
#   - plan_header.py reads the same predicted step time, pools and budget as megatrain-inspect;
#   - make_tokens.py writes ids below the vocabulary with a sidecar megatrain-run accepts;
#   - bench_table.py's megatrain row is the median of the measured steps after warm-up,
#     tokens/s and 6PT TFLOP/s follow from it, and a peer's speed-up is the tokens/s ratio.
set -euo pipefail
BIN=$1
SRC=$2
cd "$SRC"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PYTHONPATH=$SRC/tests/bench${PYTHONPATH:+:$PYTHONPATH}  # trace_fixture.py
out=$tmp/out
mkdir -p "$out/16k"

"$BIN/megatrain-compile" frontends/models/tiny_transformer.onnx -o "$tmp/tt.plan" --shape input_ids=8x64 \
  --device-memory 64MiB --lr 3e-3 > /dev/null
python3 bench/plan_header.py "$tmp/tt.plan" > "$out/16k/plan.json"
"$BIN/megatrain-inspect" "$tmp/tt.plan" --max-steps 1 > "$tmp/inspect.txt"
python3 - "$out/16k/plan.json" "$tmp/inspect.txt" <<'PY'
import json, re, sys
h = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
m = re.search(r"predicted step\s+([\d.]+) (s|ms|us):", text)
assert m, "inspect printed no predicted step"
scale = {"s": 1, "ms": 1e-3, "us": 1e-6}[m.group(2)]
want = float(m.group(1)) * scale
digits = len(m.group(1).split(".")[1]) if "." in m.group(1) else 0
tolerance = 0.51 * 10 ** -digits * scale  # half a unit of the last digit inspect printed
assert h["predicted_step_s"] > 0 and abs(h["predicted_step_s"] - want) <= tolerance, (h["predicted_step_s"], want)
# The arena's budget: the capacity, less the state planned beside it (the joint choice).
assert 0 < h["device_budget_bytes"] <= 64 << 20, h["device_budget_bytes"]
assert "64.00 MiB" in text or "64.0 MiB" in text
# every pool inspect lists: id, name, size
listed = re.findall(r"^\s+(?:pools)?\s+(\d+) '([^']+)' (\S+) ", text, re.M)
assert listed and len(listed) == len(h["pools"]), (listed, h["pools"])
for (pid, name, tier), pool in zip(listed, h["pools"]):
    assert int(pid) == pool["id"] and name == pool["name"], (pid, name, pool)
assert h["device_pool_bytes"] > 0 and h["tokens_per_step"] == 8 * 64
print("plan_header.py agrees with megatrain-inspect:", h["predicted_step_s"], "s,", len(h["pools"]), "pools")
PY

python3 bench/make_tokens.py --vocab 256 --tokens 20000 --out "$tmp/tokens.bin" > /dev/null
python3 - "$tmp/tokens.bin" <<'PY'
import array, json, sys
a = array.array("H"); a.frombytes(open(sys.argv[1], "rb").read())
meta = json.load(open(sys.argv[1] + ".json"))
assert len(a) == 20000 == meta["tokens"] and meta["vocab"] == 256 and meta["dtype"] == "uint16"
assert max(a) < 256 and len(set(a)) > 200, "ids must cover the vocabulary"
PY
"$BIN/megatrain-run" "$tmp/tt.plan" --weights frontends/models/tiny_transformer.onnx --data "$tmp/tokens.bin" \
  --steps 6 --metrics "$out/16k/megatrain.jsonl" --log-every 1 > "$out/16k/megatrain.log"
# A peer result in peers.py's format, as a peer 1.5 times slower than megatrain's median.
python3 - "$out/16k" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/megatrain.jsonl")]
median = statistics.median([r["step_time_s"] for r in rows][2:])
peer = {"median_step_s": 1.5 * median, "tokens_per_step": 512, "tokens_per_s": 512 / (1.5 * median),
        "params": 1000, "peak_allocated_bytes": 3 << 30, "peak_reserved_bytes": 4 << 30}
open(sys.argv[1] + "/pytorch-gpu.json", "w").write(json.dumps(peer) + "\n")
PY
# A peer that ran and failed leaves a log and no result; one not run this round leaves nothing.
echo "Killed" > "$out/16k/pytorch-fsdp2-offload.log"
python3 bench/bench_table.py "$out" --settings 16k --warmup 2 > "$tmp/table.md"
python3 - "$out/16k" "$tmp/table.md" <<'PY'
import json, re, statistics, sys
folder, table = sys.argv[1], open(sys.argv[2]).read()
rows = [json.loads(l) for l in open(folder + "/megatrain.jsonl")]
times = [r["step_time_s"] for r in rows]
median = statistics.median(times[2:])
mt = json.load(open(folder + "/megatrain.json"))
assert mt["steps"] == 6 and abs(mt["median_step_s"] - median) < 1e-12, (mt, median)
assert abs(mt["tokens_per_s"] - 512 / median) < 1e-6 * mt["tokens_per_s"]
assert abs(mt["model_tflops"] - 6 * 1000 * 512 / median / 1e12) < 1e-9
assert mt["device_bytes"] > 0 and mt["predicted_step_s"] > 0
line = next(l for l in table.splitlines() if l.startswith("| megatrain"))
assert f"{median:.3f} s" in line and f"{512 / median:,.0f}" in line, line
peer = next(l for l in table.splitlines() if l.startswith("| PyTorch, all on GPU"))
assert peer.rstrip().endswith("| 1.50x |"), peer
assert "3.0 GiB allocated, 4.0 GiB reserved" in peer, peer
assert re.search(r"measured / predicted = [\d.]+", table), table
assert "pytorch-fsdp2-offload: no result" in table
assert "DeepSpeed" not in table and "pytorch-deepspeed-offload" not in table, table
print("bench_table.py: megatrain row and speed-up as computed here")
PY
# trace_gaps.py: a measured trace (no waits) and its plan's predicted trace (the waits and
# records): the compute stream's idle 6 us before k1 is charged to the h2d copy it waited for,
# the 3 us before k2 to the host's issue (no wait in between).
python3 - "$tmp" <<'PY'
import sys
from trace_fixture import instant, timed, tracks, write
folder = sys.argv[1]
meta = tracks("compute", "h2d")
measured = meta + [timed("kernel k0", 1, 0, 100, 10), timed("copy w -> dev:w", 2, 1, 100, 16),
                   timed("kernel k1", 1, 4, 116, 10), timed("kernel k2", 1, 5, 129, 1)]
write(folder + "/measured.json", measured)
write(folder + "/planned.json", meta + [instant("record e1", 2, 2), instant("wait e1", 1, 3)])
PY
python3 bench/trace_gaps.py "$tmp/measured.json" --plan-trace "$tmp/planned.json" --min-us 1 > "$tmp/gaps.txt"
python3 - "$tmp/gaps.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
assert re.search(r"step 0\.03 ms: compute busy 0\.02 ms, gaps of 1 us or more 0\.01 ms \(2\)", text), text
assert re.search(r"^h2d: copy\s+1\s+0\.01$", text, re.M), text
assert re.search(r"^issue\s+1\s+0\.00$", text, re.M), text
assert re.search(r"^\s+6\.0\s+0\.02\s+copy w -> dev:w\s+kernel k1$", text, re.M), text
print("trace_gaps.py: each gap charged to what it waited for")
PY
# trace_gaps.py --stream fetch: the fetch copy f waits for the kernel that ends at 110 us, yet
# starts at 140, after two h2d copies issued after it held the link: 10 us charged to the
# kernel, 30 to the link.
python3 - "$tmp" <<'PY'
import sys
from trace_fixture import instant, timed, tracks, write
folder = sys.argv[1]
meta = tracks("compute", "h2d", "fetch")
def x(name, tid, step, ts, dur):
    return timed(name, tid, step, ts, dur, cat="copy", bytes=1 << 20)
measured = meta + [x("matmul", 1, 1, 100, 10), x("copy f -> dev:f", 3, 4, 140, 5),
                   x("copy a -> visit:a", 2, 5, 105, 20), x("copy b -> visit:b", 2, 7, 125, 15)]
write(folder + "/link.json", measured)
write(folder + "/link_planned.json", meta + [instant("record e9", 1, 2), instant("wait e9", 3, 3)])
PY
python3 bench/trace_gaps.py "$tmp/link.json" --plan-trace "$tmp/link_planned.json" --stream fetch --min-us 1 \
  > "$tmp/gaps.txt"
python3 - "$tmp/gaps.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
assert re.search(r"^link: behind h2d\s+1\s+0\.03$", text, re.M), text
assert re.search(r"^compute: matmul\s+1\s+0\.01$", text, re.M), text
assert re.search(r"^\s+30\.0\s+0\.04\s+2 copies, 2 MiB, 2 issued after it\s+copy f -> dev:f$", text, re.M), text
print("trace_gaps.py --stream fetch: the wait for a link another stream's queue held")
PY
# A window of two steps on one clock (megatrain-run --trace-steps 2): the same events again,
# 200 us later, `train_step` 1. trace_gaps.py reads the last step unless told, and finds the
# one-step gaps in each; trace_breakdown.py gives a step's mean.
python3 - "$tmp" <<'PY'
import json, sys
folder = sys.argv[1]
events = json.load(open(folder + "/measured.json"))["traceEvents"]
window = []
for w in (0, 1):
    for e in events:
        e = json.loads(json.dumps(e))
        if e.get("ph") == "X":
            e["ts"] += 200 * w
            e["args"]["train_step"] = w
            e["args"]["predicted_start_us"] = 0
            e["args"]["predicted_end_us"] = 5
        if e.get("ph") == "X" or w == 0:
            window.append(e)
json.dump({"traceEvents": window}, open(folder + "/window.json", "w"))
PY
for w in "" "--train-step 0"; do
  python3 bench/trace_gaps.py "$tmp/window.json" --plan-trace "$tmp/planned.json" --min-us 1 $w > "$tmp/gaps.txt"
  python3 - "$tmp/gaps.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
assert re.search(r"step 0\.03 ms: compute busy 0\.02 ms, gaps of 1 us or more 0\.01 ms \(2\)", text), text
assert re.search(r"^\s+6\.0\s+0\.(02|22)\s+copy w -> dev:w\s+kernel k1$", text, re.M), text
PY
done
if python3 bench/trace_gaps.py "$tmp/window.json" --train-step 2 > "$tmp/gaps.txt" 2>&1; then
  echo "trace_gaps.py accepted a step the window lacks"; exit 1
fi
grep -q -- "--train-step 2: the trace holds steps 0 to 1" "$tmp/gaps.txt"
python3 bench/trace_breakdown.py "$tmp/window.json" > "$tmp/breakdown.txt"
python3 - "$tmp/breakdown.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
assert "a step's mean over the 2 steps of the trace" in text, text
assert re.search(r"^compute\s+k1\s+1\s+0\.01\s+0\.01\s+2\.00$", text, re.M), text
print("trace_gaps.py and trace_breakdown.py: a window read one step at a time, and per step")
PY
# host_rates.py: a window of two steps. Step 0's device work ends at 100 us; its update u0
# runs in its backward (90-100, h2d copying all of it), u1 after it while step 1 runs
# (110-130, d2h copying half); step 1's update u2 runs alone at its end (250-260). Each
# predicted 8 us: ratios 10/8, 20/8 and 10/8.
python3 - "$tmp" <<'PY'
import sys
from trace_fixture import timed, tracks, write
folder = sys.argv[1]
meta = tracks("compute", "h2d", "d2h", "host")
def x(name, cat, tid, w, step, ts, dur):
    return timed(name, tid, step, ts, dur, cat=cat, predicted_start_us=0, predicted_end_us=8, train_step=w)
events = meta + [
    x("kernel k0", "kernel", 1, 0, 0, 0, 100), x("copy a -> dev:a", "copy", 2, 0, 1, 85, 15),
    x("adamw u0", "host_task", 4, 0, 2, 90, 10), x("adamw u1", "host_task", 4, 0, 3, 110, 20),
    x("kernel k0", "kernel", 1, 1, 0, 105, 140), x("copy g -> host:g", "copy", 3, 1, 4, 120, 10),
    x("adamw u2", "host_task", 4, 1, 3, 250, 10)]
write(folder + "/rates.json", events)
PY
python3 bench/host_rates.py "$tmp/rates.json" --rate 4 > "$tmp/rates.txt"
python3 - "$tmp/rates.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
assert "3 host updates over 2 traced steps" in text, text
assert re.search(r"^backward\s+1\s+0\.01\s+0\.01\s+1\.25\s+1\.00\s+0\.00\s+3\.20$", text, re.M), text
assert re.search(r"^next step\s+1\s+0\.02\s+0\.01\s+2\.50\s+0\.00\s+0\.50\s+1\.60$", text, re.M), text
assert re.search(r"^alone\s+1\s+0\.01\s+0\.01\s+1\.25\s+0\.00\s+0\.00\s+3\.20$", text, re.M), text
print("host_rates.py: each update by where it ran and the links beside it")
PY
echo "bench harness: PASS"
