#!/usr/bin/env bash
# inspect_outputs.sh - the demo plan's predictions drawn by megatrain-inspect: --trace
# writes Chrome trace-event JSON with one named thread per stream and an event per step,
# --memory-plot a well-formed SVG with labelled axes, and the text plot goes to stdout.
set -euo pipefail
BIN=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
TINY=$SRC/frontends/models/tiny_transformer.onnx

"$BIN/megatrain-compile" "$TINY" -o "$TMP/tiny.plan" --shape input_ids=8x64 \
  --loss next-token-ce --logits logits --tokens input_ids --lr 3e-3 >"$TMP/compile.txt"
grep -q "predicted step" "$TMP/compile.txt" || { echo "compile summary lacks the prediction"; exit 1; }

"$BIN/megatrain-inspect" "$TMP/tiny.plan" --trace "$TMP/trace.json" \
  --memory-plot "$TMP/memory.svg" >"$TMP/inspect.txt"
for want in "predicted step" "links          h2d" "live device bytes over predicted time" \
    "trace of "; do
  grep -q -- "$want" "$TMP/inspect.txt" || { echo "inspect output lacks '$want'"; exit 1; }
done

python3 - "$TMP/trace.json" "$TMP/memory.svg" "$TMP/inspect.txt" <<'PY'
import json, re, sys
import xml.etree.ElementTree as ET

trace_path, svg_path, text_path = sys.argv[1:4]
text = open(text_path).read()
m = re.search(r"steps +(\d+) \((\d+) kernels, (\d+) copies, (\d+) events, (\d+) host tasks\)", text)
assert m, "no step counts in the summary"
steps, kernels, copies, events, tasks = map(int, m.groups())
m = re.search(r"streams +(.*)\n", text)
streams = [s.strip() for s in m.group(1).split(",")]

trace = json.load(open(trace_path))
evs = trace["traceEvents"]
threads = {e["tid"]: e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
assert sorted(threads.values()) == sorted(streams), (threads, streams)
assert len(set(threads.values())) == len(threads), "one thread per stream"
spans = [e for e in evs if e["ph"] == "X"]
by_cat = {}
for e in spans:
    assert e["tid"] in threads, e
    assert e["ts"] >= 0 and e["dur"] >= 0, e
    assert isinstance(e["args"]["step"], int) and e["args"]["bytes"] >= 0, e
    by_cat[e["cat"]] = by_cat.get(e["cat"], 0) + 1
assert by_cat.get("kernel") == kernels and by_cat.get("copy") == copies, by_cat
assert by_cat.get("host_task") == tasks, by_cat
assert len({e["args"]["step"] for e in spans}) == len(spans), "one event per step"
compute = [t for t, n in threads.items() if n == "compute"][0]
assert all(threads[e["tid"]] == "compute" for e in spans if e["cat"] == "kernel")
assert any(e["ph"] == "C" for e in evs), "no device memory counter"
end = max(e["ts"] + e["dur"] for e in spans)
print(f"trace: {len(spans)} spans on {len(threads)} threads, {end:.1f} us")

svg = ET.parse(svg_path).getroot()
assert svg.tag == "{http://www.w3.org/2000/svg}svg", svg.tag
labels = [t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}text")]
assert any(l.startswith("predicted time (") for l in labels), labels
assert any(l.startswith("live device memory (") for l in labels), labels
assert any(l.startswith("peak ") for l in labels), labels
paths = list(svg.iter("{http://www.w3.org/2000/svg}path"))
assert len(paths) >= 1 and all(p.get("d", "").startswith("M ") for p in paths)
print(f"svg: {len(paths)} paths, {len(labels)} labels")

rows = [l for l in text.splitlines() if re.match(r"^ {0,11}\S*( \S+)? *\|", l)]
assert len(rows) == 12 and all(len(r.split("|", 1)[1]) == 60 for r in rows), rows
PY
