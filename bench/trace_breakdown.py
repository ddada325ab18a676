#!/usr/bin/env python3
"""Where a measured step's time goes: megatrain-run --trace output grouped by kernel (or copy
direction / host task), measured beside predicted (the plan's cost model), per track. A
window of several steps (megatrain-run --trace-steps) is summed per step: its mean.

    python3 bench/trace_breakdown.py trace-measured.json[.gz] [--top N]
"""
import argparse
import collections

from trace_events import load_trace


def group_of(event):
    name = event.get("name", "")
    words = name.split()
    # step labels read "<kind> <what> ..." (tools/StepLabels.cpp); keep the kernel or task name
    if event.get("cat") == "kernel" and len(words) >= 2:
        key = words[1] if words[0] == "kernel" else words[0]
    elif event.get("cat") == "host_task" and len(words) >= 2:
        key = "host " + (words[1] if words[0] == "host_task" else words[0])
    else:
        key = event.get("cat", "?")
    if key == "matmul_add" and name.partition(" -> ")[2].startswith("grad:"):
        key += " (into accumulator)"  # a weight gradient's part added in place
    if event.get("args", {}).get("recompute"):
        key += " (recompute)"
    return key


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    events, tracks = load_trace(args.trace)
    rows = collections.defaultdict(lambda: [0, 0.0, 0.0])
    busy = collections.defaultdict(lambda: [0.0, 0.0])
    steps = len({e.get("args", {}).get("train_step", 0) for e in events if e.get("ph") == "X"}) or 1
    for e in events:
        if e.get("ph") != "X":
            continue
        a = e.get("args", {})
        measured = e.get("dur", 0.0) / 1e3
        predicted = (a.get("predicted_end_us", 0.0) - a.get("predicted_start_us", 0.0)) / 1e3
        track = tracks.get(e["tid"], str(e["tid"]))
        what = group_of(e)
        if what.startswith("host ") and track != "host":
            what = "device " + what[len("host "):]  # the task's kernel on a device stream (device-resident state)
        key = (track, what)
        rows[key][0] += 1 / steps
        rows[key][1] += measured / steps
        rows[key][2] += predicted / steps
        busy[track][0] += measured / steps
        busy[track][1] += predicted / steps
    if steps > 1:
        print(f"a step's mean over the {steps} steps of the trace")
    print(f"{'track':<8} {'what':<34} {'count':>6} {'measured ms':>12} {'predicted ms':>13} {'ratio':>6}")
    for (track, what), (count, m, p) in sorted(rows.items(), key=lambda kv: -kv[1][1])[: args.top]:
        ratio = f"{m / p:.2f}" if p > 0 else "-"
        print(f"{track:<8} {what:<34} {count:>6g} {m:>12.2f} {p:>13.2f} {ratio:>6}")
    print()
    for track, (m, p) in sorted(busy.items()):
        print(f"busy {track:<8} measured {m:9.2f} ms, predicted {p:9.2f} ms")


if __name__ == "__main__":
    main()
