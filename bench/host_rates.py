#!/usr/bin/env python3
"""How fast the host's AdamW ran, by what ran beside it: each host update of a measured trace
(megatrain-run --trace, best a window of steps: --trace-steps 3) against its predicted time,
grouped by where it ran and by how busy the links were meanwhile.

    python3 bench/host_rates.py trace-measured.json[.gz] [--rate G]

Where an update ran: `backward` (before its own step's device work ended), `next step` (after
that, while the next step of the window runs: an update carried past the loss), `alone` (after
its step's device work, with no later step traced: a one-step trace's tail, or a window's last
step). Links: the fraction of the update's time that h2d (with the `fetch` track) and d2h
copied, averaged over the group's time. The ratio is measured over predicted time; with
`--rate` (the profile's host_adamw_params_per_s in G/s, which the prediction used) the rate the
updates reached, that rate over the ratio.
"""
import argparse
import collections

from trace_events import load_trace


def union(intervals):
    """Sorted, disjoint cover of the (start, end) intervals."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def covered(cover, start, end):
    """How much of [start, end) the cover holds."""
    total = 0.0
    for a, b in cover:
        if b <= start:
            continue
        if a >= end:
            break
        total += min(b, end) - max(a, start)
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--rate", type=float, help="the profile's host AdamW rate, G parameters/s")
    args = parser.parse_args()
    events, tracks = load_trace(args.trace)
    timed = [e for e in events if e.get("ph") == "X" and "step" in e.get("args", {})]
    if not timed:
        parser.error(f"{args.trace}: no timed steps")
    links = {"h2d": [], "d2h": []}
    step_start, device_end = {}, {}
    updates = []
    for e in timed:
        track = tracks.get(e["tid"], "")
        w = e["args"].get("train_step", 0)
        start, end = e["ts"], e["ts"] + e.get("dur", 0.0)
        step_start[w] = min(step_start.get(w, start), start)
        if track == "host":
            if e.get("cat") == "host_task" and "adamw" in e.get("name", "").lower():
                updates.append((w, start, end, e["args"]))
            continue
        device_end[w] = max(device_end.get(w, end), end)
        if e.get("cat") == "copy" and track in ("h2d", "fetch"):
            links["h2d"].append((start, end))
        elif e.get("cat") == "copy" and track == "d2h":
            links["d2h"].append((start, end))
    cover = {name: union(intervals) for name, intervals in links.items()}
    groups = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])
    for w, start, end, a in updates:
        if start < device_end.get(w, start):
            where = "backward"
        elif w + 1 in step_start and step_start[w + 1] <= start:
            where = "next step"
        else:
            where = "alone"
        predicted = a.get("predicted_end_us", 0.0) - a.get("predicted_start_us", 0.0)
        g = groups[where]
        g[0] += 1
        g[1] += end - start
        g[2] += predicted
        g[3] += covered(cover["h2d"], start, end)
        g[4] += covered(cover["d2h"], start, end)
    steps = len(step_start)
    print(f"{len(updates)} host updates over {steps} traced step{'s' if steps > 1 else ''}")
    header = f"{'where':<10} {'updates':>7} {'measured ms':>12} {'predicted ms':>13} {'ratio':>6} {'h2d busy':>9} {'d2h busy':>9}"
    if args.rate:
        header += f" {'G params/s':>11}"
    print(header)
    for where in ("backward", "next step", "alone"):
        if where not in groups:
            continue
        count, measured, predicted, h2d, d2h = groups[where]
        ratio = measured / predicted if predicted > 0 else float("nan")
        row = (f"{where:<10} {count:>7} {measured / 1e3:>12.2f} {predicted / 1e3:>13.2f} {ratio:>6.2f} "
               f"{h2d / measured if measured else 0:>9.2f} {d2h / measured if measured else 0:>9.2f}")
        if args.rate:
            row += f" {args.rate / ratio:>11.2f}"
        print(row)


if __name__ == "__main__":
    main()
