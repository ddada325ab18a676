#!/usr/bin/env python3
"""Fits a device profile's kernel_efficiency (and, with --disk, its disk rates) to traced steps.

    python3 bench/fit_profile.py bench/profiles/h200.json TRACE-measured.json.gz... [--skip a,b] [--no-kernels] [--disk] [--links] [--host] [--write]

Each trace is megatrain-run --trace output (bench/llama1b3.sh writes OUT/<setting>/trace-measured.json.gz);
its events carry the measured time and the time the plan predicted with the profile it was compiled
with. Per kernel family (the plan's kernel name, recomputes included), the measured time over the
predicted, summed over every trace, divides the family's efficiency: a family that took 1.5x its
prediction runs at 1/1.5 of its old efficiency. Launch overheads are inside both sums (a family of
tiny kernels fits its launches too). Families whose predicted total is under --min-ms, and those in
--skip (kernels changed since the traces were taken), keep their efficiency. --disk sets
disk_read_bytes_per_s and disk_write_bytes_per_s to the bytes over the time of the disk track's
copies (reads fill `stage_` tensors); --links sets h2d_bytes_per_s and d2h_bytes_per_s to what the
h2d and d2h tracks' copies reached in the steps (both directions and the host at work, below what
megatrain-profile measures one direction at a time). --host scales host_adamw_params_per_s by the
host AdamW tasks' predicted time over their measured time (the host at work in a training step,
beside the links' copies, below what megatrain-profile measures on an idle host). Prints old and
new figures; --write updates the profile.
The traces must come from plans compiled with the profile being fitted (the same efficiencies).
"""
import argparse
import collections
import json
import sys

from trace_events import load_trace


def events_of(path):
    return load_trace(path)


def family(event):
    name = event.get("name", "")
    words = name.split()
    if not words:
        return None
    kernel = words[1] if words[0] == "kernel" and len(words) > 1 else words[0]
    # A matmul_add into a gradient accumulator (its output grad:<param>) is priced as the matmul
    # family (plan/lib/Simulate.cpp), so it is fitted with it.
    if kernel == "matmul_add" and name.partition(" -> ")[2].startswith("grad:"):
        return "matmul"
    return kernel


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--skip", default="", help="comma-separated kernel families to leave as they are")
    parser.add_argument("--min-ms", type=float, default=2.0, help="fit a family only above this predicted total")
    parser.add_argument("--disk", action="store_true", help="fit the disk rates too")
    parser.add_argument("--links", action="store_true", help="fit the h2d and d2h rates too")
    parser.add_argument("--host", action="store_true", help="fit the host AdamW rate too")
    parser.add_argument("--no-kernels", action="store_true", help="leave every kernel efficiency as it is")
    parser.add_argument("--write", action="store_true", help="write the fitted profile back")
    args = parser.parse_args()
    with open(args.profile) as f:
        profile = json.load(f)
    skip = {s for s in args.skip.split(",") if s}
    kernels = collections.defaultdict(lambda: [0, 0.0, 0.0])  # count, measured us, predicted us
    disk = {"read": [0, 0.0], "write": [0, 0.0]}  # bytes, measured us
    links = {"h2d": [0, 0.0], "d2h": [0, 0.0]}
    host = [0, 0.0, 0.0]  # AdamW tasks, measured us, predicted us
    for path in args.traces:
        events, tracks = events_of(path)
        for e in events:
            if e.get("ph") != "X":
                continue
            a = e.get("args", {})
            track = tracks.get(e["tid"])
            if e.get("cat") == "kernel" and track == "compute":
                row = kernels[family(e)]
                row[0] += 1
                row[1] += e.get("dur", 0.0)
                row[2] += a.get("predicted_end_us", 0.0) - a.get("predicted_start_us", 0.0)
            elif e.get("cat") == "copy" and track in ("h2d", "fetch", "d2h"):
                # The parameters' fetches (stream `fetch`) cross the h2d link too.
                link = "d2h" if track == "d2h" else "h2d"
                links[link][0] += a.get("bytes", 0)
                links[link][1] += e.get("dur", 0.0)
            elif e.get("cat") == "host_task" and track == "host" and e.get("name", "").startswith("adamw"):
                host[0] += 1
                host[1] += e.get("dur", 0.0)
                host[2] += a.get("predicted_end_us", 0.0) - a.get("predicted_start_us", 0.0)
            elif e.get("cat") == "copy" and track == "disk":
                kind = "read" if " -> stage_" in e.get("name", "") else "write"
                disk[kind][0] += a.get("bytes", 0)
                disk[kind][1] += e.get("dur", 0.0)
    efficiency = dict(profile.get("kernel_efficiency", {}))
    print(f"{'kernel':<22} {'count':>6} {'measured ms':>12} {'predicted ms':>13} {'ratio':>6} {'efficiency':>10} {'fitted':>7}")
    for name, (count, measured, predicted) in sorted(kernels.items(), key=lambda kv: -kv[1][1]):
        old = efficiency.get(name, 1.0)
        ratio = measured / predicted if predicted > 0 else float("nan")
        fit = not args.no_kernels and name not in skip and predicted / 1e3 >= args.min_ms and measured > 0
        new = min(4.0, old / ratio) if fit else old
        if fit:
            efficiency[name] = round(new, 4)
        note = "" if fit else ("  (skipped)" if name in skip or args.no_kernels else "  (too little to fit)")
        print(f"{name:<22} {count:>6} {measured / 1e3:>12.2f} {predicted / 1e3:>13.2f} {ratio:>6.2f} {old:>10.3f} {new:>7.3f}{note}")
    profile["kernel_efficiency"] = dict(sorted(efficiency.items()))
    if args.disk:
        for kind, key in (("read", "disk_read_bytes_per_s"), ("write", "disk_write_bytes_per_s")):
            size, us = disk[kind]
            if size and us:
                rate = size / (us / 1e6)
                print(f"disk {kind}: {size / 1e9:.2f} GB in {us / 1e6:.3f} s = {rate / 1e9:.2f} GB/s (profile had {profile.get(key, 0) / 1e9:.2f})")
                profile[key] = rate
            else:
                print(f"disk {kind}: no copies in the traces; {key} stays")
    if args.links:
        for track, key in (("h2d", "h2d_bytes_per_s"), ("d2h", "d2h_bytes_per_s")):
            size, us = links[track]
            # Below a GB the launch and small copies dominate: too little to fit a rate.
            if size >= 1e9 and us:
                rate = size / (us / 1e6)
                print(f"{track}: {size / 1e9:.2f} GB in {us / 1e6:.3f} s = {rate / 1e9:.2f} GB/s (profile had {profile.get(key, 0) / 1e9:.2f})")
                profile[key] = rate
            else:
                print(f"{track}: under 1 GB copied in the traces; {key} stays")
    if args.host:
        count, measured, predicted = host
        key = "host_adamw_params_per_s"
        # Below 10 ms of updates the tasks' launch dominates: too little to fit a rate.
        if measured >= 1e4 and predicted > 0:
            rate = profile.get(key, 0) * predicted / measured
            print(f"host adamw: {count} tasks, {measured / 1e3:.2f} ms measured, {predicted / 1e3:.2f} ms "
                  f"predicted: {rate / 1e9:.2f} G params/s (profile had {profile.get(key, 0) / 1e9:.2f})")
            profile[key] = rate
        else:
            print(f"host adamw: under 10 ms of updates in the traces; {key} stays")
    if args.write:
        with open(args.profile, "w") as f:
            json.dump(profile, f, indent=2)
            f.write("\n")
        print(f"wrote {args.profile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
