"""trace_fixture.py - hand-made megatrain-run traces for tests/bench/harness_test.sh: the
tracks, the timed steps, the waits and records a plan's predicted trace holds, and the file."""
import json


def tracks(*names):
    """The thread-name records of tracks 1, 2, ... named in order."""
    return [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}}
            for tid, name in enumerate(names, 1)]


def timed(name, tid, step, ts, dur, cat="kernel", **args):
    """A timed plan step (us); `args` beside its step index."""
    return {"name": name, "cat": cat, "ph": "X", "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": {"step": step, **args}}


def instant(name, tid, step):
    """An untimed step (a wait or a record) of the predicted trace."""
    return {"name": name, "cat": "event", "ph": "i", "pid": 1, "tid": tid, "ts": 0, "s": "t",
            "args": {"step": step}}


def write(path, events):
    with open(path, "w") as f:
        json.dump({"traceEvents": events}, f)
