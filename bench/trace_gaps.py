#!/usr/bin/env python3
"""Where a stream of a measured step stands idle: megatrain-run --trace output, each gap between
two of the stream's timed steps charged to what the later one waited for.

    python3 bench/trace_gaps.py trace-measured.json[.gz] [--plan-trace predicted.json] \
        [--stream compute] [--min-us 5] [--top 25]

A gap is charged to the last wait issued on the stream before the step that ends it, named by the
step recorded before that wait's event on its own stream (a copy, a host task, a kernel); a gap
with no wait in between is "issue" (the host had not yet launched the step). The step's start is
the first timed step of any stream, its end the last one's end, so the idle time before the
stream's first step and after its last is shown too. A measured trace holds only the steps
that were timed (no waits or records): `--plan-trace` reads them from the same plan's predicted
trace (megatrain-inspect PLAN --trace predicted.json). A window of several steps on one clock
(megatrain-run --trace-steps) is read one step at a time: `--train-step W` (from 0; default the
last), whose gaps then include those behind the previous step's host tasks.

On a copy stream (`--stream fetch`, `h2d`, `d2h`), the part of a gap after the copy was ready
(its stream's previous step and the step it waited for both done) while copies of another
stream held the same direction of the link is charged to "link: behind STREAM", with how many
of those copies were issued after it (the link served a queue, not the order of issue).
"""
import argparse
import collections

# The direction of the host link each copy stream takes (docs/plan.md, "Streams").
LINKS = {"h2d": "to device", "fetch": "to device", "d2h": "to host"}

from trace_events import load_trace


def kind_of(name):
    """The copy direction, host task or kernel a step label names, for grouping."""
    words = name.split()
    if not words:
        return "?"
    if words[0] == "copy":
        return "copy"
    return words[0] if words[0] not in ("kernel", "host_task") or len(words) < 2 else words[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--plan-trace", help="the plan's predicted trace, for its waits and records")
    parser.add_argument("--stream", default="compute", help="the track to read (default: compute)")
    parser.add_argument("--min-us", type=float, default=5.0, help="smallest gap counted (default 5 us)")
    parser.add_argument("--top", type=int, default=25, help="largest gaps listed (default 25)")
    parser.add_argument("--train-step", type=int, help="of a window of steps, the one to read (default: the last)")
    args = parser.parse_args()

    events, tracks = load_trace(args.trace)
    steps = [e for e in events if e.get("ph") in ("X", "i") and "step" in e.get("args", {})]
    window = sorted({e["args"].get("train_step", 0) for e in steps})
    chosen = window[-1] if args.train_step is None else args.train_step
    if window and chosen not in window:
        parser.error(f"--train-step {chosen}: the trace holds steps {window[0]} to {window[-1]}")
    steps = [e for e in steps if e["args"].get("train_step", 0) == chosen]
    if args.plan_trace:
        # The waits and records, from the predicted trace of the same plan, on the measured
        # trace's tracks (matched by name); each placed at its stream's previous timed step's end.
        planned, plan_tracks = load_trace(args.plan_trace)
        tid_of = {name: tid for tid, name in tracks.items()}
        timed = {e["args"]["step"] for e in steps}
        for e in planned:
            if "step" not in e.get("args", {}) or e["args"]["step"] in timed:
                continue
            if not e.get("name", "").startswith(("wait ", "record ")):
                continue
            stream = plan_tracks.get(e["tid"])
            if stream in tid_of:
                steps.append({"name": e["name"], "ph": "i", "tid": tid_of[stream], "ts": 0.0,
                              "args": {"step": e["args"]["step"]}})
    steps.sort(key=lambda e: e["args"]["step"])
    by_index = {e["args"]["step"]: e for e in steps}

    # Per stream, its steps in plan order; the step before each record, by event name.
    per_stream = collections.defaultdict(list)
    for e in steps:
        per_stream[tracks.get(e["tid"], str(e["tid"]))].append(e)
    recorded_after = {}
    for stream, list_ in per_stream.items():
        previous = None
        for e in list_:
            name = e.get("name", "")
            if name.startswith("record "):
                recorded_after[name.split()[1]] = (stream, previous)
            elif e.get("ph") == "X" and not name.startswith("wait "):
                previous = e
    if args.stream not in per_stream:
        raise SystemExit(f"no stream {args.stream!r} in the trace; streams: {', '.join(sorted(per_stream))}")

    timed = [e for e in steps if e.get("ph") == "X"]
    step_start = min(e["ts"] for e in timed)
    step_end = max(e["ts"] + e["dur"] for e in timed)

    # The copies of other streams on the same direction of the link, for "link: behind".
    link = LINKS.get(args.stream)
    rivals = [e for stream, list_ in per_stream.items() if stream != args.stream and link and LINKS.get(stream) == link
              for e in list_ if e.get("ph") == "X"]

    gaps = []  # (gap us, cause, the step that ended it)
    last_end = step_start
    last_wait = None
    busy = 0.0
    for e in per_stream[args.stream]:
        name = e.get("name", "")
        if name.startswith("wait "):
            last_wait = name.split()[1]
            continue
        if e.get("ph") != "X":
            continue
        gap = e["ts"] - last_end
        if gap >= args.min_us:
            awaited = ""
            ready = last_end
            if last_wait is None:
                cause = "issue"
            else:
                stream, what = recorded_after.get(last_wait, ("?", None))
                cause = f"{stream}: {kind_of(what['name']) if what else 'start'}"
                awaited = what["name"] if what else ""
                if what and what.get("ph") == "X":
                    ready = max(ready, what["ts"] + what["dur"])
            held = [r for r in rivals if r["ts"] < e["ts"] and r["ts"] + r["dur"] > ready]
            if held and e["ts"] - ready >= args.min_us:
                later = sum(1 for r in held if r["args"]["step"] > e["args"]["step"])
                mib = sum(r["args"].get("bytes", 0) for r in held) / 2**20
                streams = "/".join(sorted({tracks.get(r["tid"], str(r["tid"])) for r in held}))
                gaps.append((e["ts"] - ready, f"link: behind {streams}", e,
                             f"{len(held)} copies, {mib:.0f} MiB, {later} issued after it"))
                gap = ready - last_end
            if gap >= args.min_us:
                gaps.append((gap, cause, e, awaited))
        busy += e["dur"]
        last_end = max(last_end, e["ts"] + e["dur"])
        last_wait = None
    tail = step_end - last_end

    total = step_end - step_start
    print(f"step {total / 1e3:.2f} ms: {args.stream} busy {busy / 1e3:.2f} ms, "
          f"gaps of {args.min_us:g} us or more {sum(g[0] for g in gaps) / 1e3:.2f} ms "
          f"({len(gaps)}), after its last step {tail / 1e3:.2f} ms")
    grouped = collections.defaultdict(lambda: [0, 0.0])
    for gap, cause, _, _ in gaps:
        grouped[cause][0] += 1
        grouped[cause][1] += gap
    print(f"\n{'waited for':<34} {'gaps':>6} {'ms':>9}")
    for cause, (count, us) in sorted(grouped.items(), key=lambda kv: -kv[1][1]):
        print(f"{cause:<34} {count:>6} {us / 1e3:>9.2f}")
    print(f"\n{'gap us':>8} {'at ms':>8}  {'waited for':<44} then")
    for gap, cause, e, awaited in sorted(gaps, key=lambda g: -g[0])[: args.top]:
        print(f"{gap:>8.1f} {(e['ts'] - step_start) / 1e3:>8.2f}  {awaited[:44] or cause:<44} {e['name'][:50]}")


if __name__ == "__main__":
    main()
