"""The Chrome trace events megatrain-run --trace and megatrain-inspect --trace write, for the
bench/ scripts that read them (trace_breakdown.py, trace_gaps.py, host_rates.py, fit_profile.py)."""
import gzip
import json


def load_trace(path):
    """The trace's events (a .gz file is unpacked) and its track names by thread id."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    tracks = {e["tid"]: e["args"]["name"] for e in events
              if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return events, tracks
