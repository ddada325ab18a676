#!/usr/bin/env python3
"""soak.py - the soak phase of bench/soak.sh: calibrate, train, SIGKILL, resume, check, report.

    python3 bench/soak.py --bin BIN --plan P --weights M.onnx --tokens T.bin --backend cuda \\
        --out OUT --ckpt DIR --duration 480 [--deadline EPOCH] [...]

bench/soak.sh prepares the model, plan and tokens and documents the settings; this script
runs the processes and judges them:

1. calibrate: megatrain-run for --cal-steps steps from the weights, without checkpoints.
   The median step time (steps after the first) sets --save-every to --save-interval
   seconds of steps, unless --save-every or --step-time is given (--step-time skips this).
2. run A: from the weights with --save DIR --save-every N --keep-checkpoints 1. Once
   --kill-at seconds have passed (default half of --duration), it is SIGKILLed when its
   metrics file shows step c + K, c its newest checkpoint (DIR/latest), K = --kill-after
   (default N / 2), so the kill lands between two checkpoints.
3. run B: --resume DIR with the same flags, to a step count that ends the soak about
   --duration seconds after A started (estimated from A's step time, its checkpoint
   saves and its start-up). It recomputes A's steps after c.

While A and B run, their memory is sampled every --sample-every seconds into
OUT/memory.csv: VmRSS (and VmHWM, RssAnon, RssFile, RssShmem) from /proc/PID/status, and
on cuda nvidia-smi's used_memory for the process (--query-compute-apps) and the GPU's
memory.used. A process's memory is flat when, over the samples after its first
checkpoint and before its last step completes (then it saves, frees its pools and
exits), max - min <= max(--flat-pct % of max, --flat-mib MiB).

Every figure goes to OUT/soak.json; the table goes to OUT/summary.txt and is printed
last. Exit status 1 when a check fails.
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

MIB = 1 << 20
POLL_S = 0.05
MARGIN_S = 10  # kept free before --deadline for the checks and the report


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--plan", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--tokens", required=True)
    p.add_argument("--backend", default="cuda")
    p.add_argument("--out", required=True)
    p.add_argument("--ckpt", required=True, help="checkpoint directory (emptied first)")
    p.add_argument("--duration", type=float, default=480)
    p.add_argument("--deadline", type=float, default=None, help="epoch seconds by which everything must be done")
    p.add_argument("--started", type=float, default=None, help="epoch seconds the command started")
    p.add_argument("--save-interval", type=float, default=60)
    p.add_argument("--save-every", type=int, default=None)
    p.add_argument("--step-time", type=float, default=None)
    p.add_argument("--cal-steps", type=int, default=10)
    p.add_argument("--kill-at", type=float, default=None)
    p.add_argument("--kill-after", type=int, default=None)
    p.add_argument("--sample-every", type=float, default=2)
    p.add_argument("--flat-pct", type=float, default=2)
    p.add_argument("--flat-mib", type=float, default=64)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gpu-memory", choices=["auto", "on", "off"], default="auto",
                   help="sample and check device memory with nvidia-smi (auto: with --backend cuda)")
    p.add_argument("--title", default="soak")
    return p.parse_args(argv)


class Metrics:
    """Rows of a megatrain-run --metrics file as it grows: parsed, and the loss's text as written."""

    def __init__(self, path):
        self.path, self.pos, self.partial = path, 0, ""
        self.rows = {}  # step -> row
        self.loss_text = {}  # step -> the loss exactly as written (%.17g, or null)
        self.lines = {}  # step -> the row as written
        self.last = 0
        self.malformed = []  # lines that are not a metrics row
        if os.path.exists(path):
            os.remove(path)  # a file from an earlier soak must not be read as this run's

    def poll(self):
        try:
            with open(self.path) as f:
                if os.fstat(f.fileno()).st_size < self.pos:  # rewritten from the start
                    self.pos, self.partial = 0, ""
                f.seek(self.pos)
                data = f.read()
                self.pos = f.tell()
        except FileNotFoundError:
            return
        lines = (self.partial + data).split("\n")
        self.partial = lines.pop()
        for line in lines:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                int(row["step"])
            except (ValueError, KeyError, TypeError):
                self.malformed.append(line)
                continue
            m = re.search(r'"loss": ([^,}]+)', line)
            self.rows[row["step"]] = row
            self.lines[row["step"]] = line
            self.loss_text[row["step"]] = m.group(1) if m else None
            self.last = max(self.last, row["step"])


def latest_checkpoint(ckpt):
    """The step DIR/latest names, or None."""
    try:
        name = open(os.path.join(ckpt, "latest")).read().strip()
    except OSError:
        return None
    m = re.fullmatch(r"step-(\d+)\.ckpt", name)
    return int(m.group(1)) if m else None


def checkpoint_files(ckpt):
    steps, temps = {}, []
    for name in sorted(os.listdir(ckpt)) if os.path.isdir(ckpt) else []:
        m = re.fullmatch(r"step-(\d+)\.ckpt", name)
        if m:
            steps[int(m.group(1))] = os.path.getsize(os.path.join(ckpt, name))
        elif ".tmp." in name:
            temps.append(name)
    return steps, temps


def proc_memory(pid):
    """VmRSS, VmHWM, RssAnon, RssFile, RssShmem of a live process, in bytes (None when gone)."""
    try:
        text = open(f"/proc/{pid}/status").read()
    except OSError:
        return None
    out = {}
    for key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
        m = re.search(rf"^{key}:\s+(\d+) kB", text, re.M)
        out[key] = int(m.group(1)) * 1024 if m else None
    return out if out["VmRSS"] is not None else None


def smi(query):
    try:
        r = subprocess.run(["nvidia-smi", query, "--format=csv,noheader,nounits"], capture_output=True, text=True,
                           timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


def gpu_memory(pid):
    """(the process's used_memory in MiB or None, the number of compute apps listed, GPU 0's memory.used in MiB)."""
    apps = smi("--query-compute-apps=pid,used_memory")
    own, listed = None, 0
    if apps is not None:
        entries = [line.split(",") for line in apps.strip().splitlines() if line.strip()]
        listed = len(entries)
        for entry in entries:
            try:
                if int(entry[0]) == pid:
                    own = float(entry[1])
            except (ValueError, IndexError):
                pass
        # In a container the driver may list the process under the host's pid: the only one listed is ours.
        if own is None and listed == 1:
            try:
                own = float(entries[0][1])
            except (ValueError, IndexError):
                pass
    used = smi("--query-gpu=memory.used")
    total = None
    if used:
        try:
            total = float(used.strip().splitlines()[0])
        except ValueError:
            pass
    return own, listed, total


class Soak:
    def __init__(self, args):
        self.a = args
        self.out = args.out
        self.t0 = None  # monotonic time run A started
        self.samples = []
        self.next_sample = 0
        self.want_gpu = args.gpu_memory == "on" or (args.gpu_memory == "auto" and args.backend == "cuda")
        self.gpu = self.want_gpu and shutil.which("nvidia-smi") is not None
        self.csv = open(os.path.join(self.out, "memory.csv"), "w")
        self.csv.write("t_s,run,pid,step,rss_mib,hwm_mib,rss_anon_mib,rss_file_mib,rss_shmem_mib,"
                       "gpu_proc_mib,gpu_used_mib,after_first_ckpt\n")
        self.notes = []
        self.procs = []  # every megatrain-run started, killed on the way out if still running
        self.deadline = None
        if args.deadline:  # epoch -> monotonic
            self.deadline = time.monotonic() + (args.deadline - time.time()) - MARGIN_S

    def t(self):
        return time.monotonic() - self.t0 if self.t0 is not None else 0.0

    def command(self, steps, metrics, resume=False, save=None):
        a = self.a
        cmd = [os.path.join(a.bin, "megatrain-run"), a.plan, "--backend", a.backend, "--data", a.tokens,
               "--seed", str(a.seed), "--steps", str(steps), "--metrics", metrics, "--log-every", str(a.log_every),
               # the lr schedule is constant; a fixed decay length keeps the checkpoints' schedule identical
               "--decay-steps", "1000000000"]
        cmd += ["--resume", a.ckpt] if resume else ["--weights", a.weights]
        if save:
            cmd += ["--save", a.ckpt, "--save-every", str(save), "--keep-checkpoints", "1"]
        return cmd

    def launch(self, name, cmd, report=None):
        if report:
            if os.path.exists(report):
                os.remove(report)
            cmd = cmd + ["--report", report]
        log = open(os.path.join(self.out, f"{name}.log"), "w")
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        print(f"== {name}: {' '.join(cmd)}", flush=True)
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc, log

    def sample(self, name, proc, step, first_ckpt_t):
        now = time.monotonic()
        if now < self.next_sample:
            return
        self.next_sample = now + self.a.sample_every
        mem = proc_memory(proc.pid)
        if mem is None:
            return
        own = listed = used = None
        if self.gpu:
            own, listed, used = gpu_memory(proc.pid)
        s = {"t_s": round(self.t(), 3), "run": name, "pid": proc.pid, "step": step,
             "rss_mib": mem["VmRSS"] / MIB, "hwm_mib": mem["VmHWM"] / MIB if mem["VmHWM"] is not None else None,
             "rss_anon_mib": mem["RssAnon"] / MIB if mem["RssAnon"] is not None else None,
             "rss_file_mib": mem["RssFile"] / MIB if mem["RssFile"] is not None else None,
             "rss_shmem_mib": mem["RssShmem"] / MIB if mem["RssShmem"] is not None else None,
             "gpu_proc_mib": own, "gpu_used_mib": used,
             "after_first_ckpt": first_ckpt_t is not None and now >= first_ckpt_t}
        self.samples.append(s)
        cols = ["t_s", "run", "pid", "step", "rss_mib", "hwm_mib", "rss_anon_mib", "rss_file_mib", "rss_shmem_mib",
                "gpu_proc_mib", "gpu_used_mib", "after_first_ckpt"]

        def fmt(v):
            if v is None:
                return ""
            if isinstance(v, bool):
                return "1" if v else "0"
            if isinstance(v, float):
                return f"{v:.2f}"
            return str(v)

        self.csv.write(",".join(fmt(s[c]) for c in cols) + "\n")
        self.csv.flush()

    def past_deadline(self):
        return self.deadline is not None and time.monotonic() > self.deadline


def median_step(rows):
    times = [r["step_time_s"] for _, r in sorted(rows.items())]
    return statistics.median(times[1:] if len(times) > 2 else times)


def step_stats(rows):
    times = sorted(r["step_time_s"] for r in rows.values())
    if not times:
        return None
    return {"steps": len(times), "median_s": statistics.median(times), "p90_s": times[int(0.9 * (len(times) - 1))],
            "max_s": times[-1], "min_s": times[0]}


def save_seconds(rows):
    """Checkpoint saves as seen in the metrics: the wall time between two rows beyond the second's step."""
    out = {}
    steps = sorted(rows)
    for s, n in zip(steps, steps[1:]):
        if n == s + 1:
            gap = rows[n]["elapsed_s"] - rows[n]["step_time_s"] - rows[s]["elapsed_s"]
            out[s] = gap
    return out


def flatness(samples, key, pct, mib):
    values = [s[key] for s in samples if s[key] is not None]
    if len(values) < 3 or len(values) < 0.8 * len(samples):
        return {"samples": len(values), "flat": None, "why": f"{len(values)} samples (3 or more needed)"}
    lo, hi = min(values), max(values)
    bound = max(pct / 100 * hi, mib)
    ts = [s["t_s"] for s in samples if s[key] is not None]
    mt, mv = statistics.fmean(ts), statistics.fmean(values)
    var = sum((t - mt) ** 2 for t in ts)
    slope = sum((t - mt) * (v - mv) for t, v in zip(ts, values)) / var * 60 if var > 0 else 0.0
    return {"samples": len(values), "min_mib": lo, "max_mib": hi, "spread_mib": hi - lo,
            "spread_pct": 100 * (hi - lo) / hi if hi else 0.0, "first_mib": values[0], "last_mib": values[-1],
            "slope_mib_per_min": slope, "bound_mib": bound, "flat": hi - lo <= bound,
            "from_t_s": ts[0], "to_t_s": ts[-1]}


def compare(a_text, b_text, steps):
    """Losses of two runs at these steps: bitwise (text and float) and the largest absolute difference."""
    diffs, same_text, same_bits, first_diff = [], True, True, None
    for s in steps:
        ta, tb = a_text.get(s), b_text.get(s)
        fa = float(ta) if ta not in (None, "null") else math.nan
        fb = float(tb) if tb not in (None, "null") else math.nan
        if ta != tb:
            same_text = False
        if not (fa == fb):
            same_bits = False
            if first_diff is None:
                first_diff = {"step": s, "a": ta, "b": tb}
        diffs.append(abs(fa - fb))
    worst = max(diffs) if diffs else None
    return {"steps": len(steps), "first": steps[0] if steps else None, "last": steps[-1] if steps else None,
            "bitwise_equal": bool(steps) and same_text and same_bits, "text_equal": same_text,
            "max_abs_diff": worst, "first_difference": first_diff}


def finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def fmt_s(x):
    return f"{x:.1f}" if x is not None else "-"


def run(a, soak):
    result = {"title": a.title, "backend": a.backend, "plan": a.plan, "weights": a.weights, "tokens": a.tokens,
              "checkpoint_dir": a.ckpt, "duration_requested_s": a.duration, "save_interval_s": a.save_interval,
              "flat_pct": a.flat_pct, "flat_mib": a.flat_mib, "sample_every_s": a.sample_every,
              "nvidia_smi": soak.gpu, "command_started_epoch": a.started}
    try:
        result["plan_header"] = json.load(open(os.path.join(a.out, "plan.json")))
    except (OSError, ValueError):
        pass
    rows = []  # the table: (check, result, detail)
    failed = False

    def row(check, status, detail):
        nonlocal failed
        rows.append((check, status, detail))
        if status == "FAIL":
            failed = True
        print(f"-- {check:<18} {status:<5} {detail}", flush=True)

    def finish():
        soak.csv.close()
        result["checks"] = [{"check": c, "result": s, "detail": d} for c, s, d in rows]
        result["passed"] = not failed
        result["notes"] = soak.notes
        with open(os.path.join(a.out, "soak.json"), "w") as f:
            json.dump(result, f, indent=1, default=str)
            f.write("\n")
        lines = [f"{'check':<18} {'result':<6} detail"] + [f"{c:<18} {s:<6} {d}" for c, s, d in rows]
        with open(os.path.join(a.out, "summary.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print()
        for note in soak.notes:
            print("note:", note)
        print(f"== bench/soak.sh: {a.title} ({'PASS' if not failed else 'FAIL'}); {a.out}/soak.json")
        print("\n".join(lines))
        return 1 if failed else 0

    # The preparation's phases (bench/soak.sh writes them) open the table.
    try:
        for line in open(os.path.join(a.out, "phases.txt")):
            m = re.match(r"(\S+)\s+(\S+)\s+([\d.]+) s  (.*)$", line.rstrip("\n"))
            if m:
                result.setdefault("prepare", []).append({"phase": m.group(1), "result": m.group(2),
                                                         "wall_s": float(m.group(3)), "detail": m.group(4)})
                rows.append((m.group(1), m.group(2), f"{m.group(3)} s, {m.group(4)}"))
    except OSError:
        pass
    if soak.want_gpu and not soak.gpu:
        row("nvidia-smi", "FAIL", "not found: device memory cannot be sampled")

    # ---- 1. calibration ----
    cal = None
    step_time = a.step_time
    if step_time is None:
        path = os.path.join(a.out, "metrics-calibrate.jsonl")
        cal = Metrics(path)
        start = time.monotonic()
        proc, log = soak.launch("calibrate", soak.command(a.cal_steps, path),
                                report=os.path.join(a.out, "report-calibrate.json"))
        while proc.poll() is None:
            if soak.past_deadline():
                proc.kill()
                proc.wait()
                soak.notes.append("the calibration was still running at the deadline")
            time.sleep(POLL_S)
        log.close()
        cal.poll()
        wall = time.monotonic() - start
        if proc.returncode != 0 or cal.last != a.cal_steps:
            row("calibrate", "FAIL", f"exit {proc.returncode} after {cal.last} of {a.cal_steps} steps "
                                     f"({a.out}/calibrate.log)")
            return finish()
        step_time = median_step(cal.rows)
        result["calibration"] = {"steps": a.cal_steps, "wall_s": wall, "median_step_s": step_time,
                                 "startup_s": wall - cal.rows[cal.last]["elapsed_s"]}
        row("calibrate", "ok", f"{a.cal_steps} steps in {wall:.1f} s, median step {step_time:.4f} s")
    save_every = a.save_every or max(2, round(a.save_interval / step_time))
    kill_after = a.kill_after or max(1, save_every // 2)
    result.update({"step_time_s": step_time, "step_time_from": "given" if a.step_time else "calibration",
                   "save_every": save_every, "kill_after": kill_after})

    # ---- what time there is ----
    duration = a.duration
    if soak.deadline is not None:
        # Run B's length is an estimate: leave it some slack before the hard stop.
        room = soak.deadline - time.monotonic()
        room -= min(30.0, 0.1 * room)
        if room < duration:
            soak.notes.append(f"DURATION {a.duration:.0f} s shrunk to {room:.0f} s to fit the command's BUDGET "
                              f"(prepare and calibration took their share; PHASE=prepare in a separate command "
                              f"leaves the whole budget)")
            duration = room
    result["duration_s"] = duration
    kill_at = a.kill_at if a.kill_at is not None else duration / 2
    result["kill_at_s"] = kill_at
    if duration <= 0:
        row("time", "FAIL", "no time left for the soak (run PHASE=prepare first, or raise BUDGET)")
        return finish()

    # ---- 2. run A: from the weights, killed between two checkpoints ----
    if os.path.isdir(a.ckpt):
        shutil.rmtree(a.ckpt)
    os.makedirs(a.ckpt)
    path_a = os.path.join(a.out, "metrics-a.jsonl")
    ma = Metrics(path_a)
    soak.t0 = time.monotonic()
    result["started_epoch"] = time.time()
    proc_a, log_a = soak.launch("run-a", soak.command(1000000000, path_a, save=save_every))
    first_ckpt_a = None  # monotonic time A's first checkpoint was seen complete
    ckpts_a = []  # (step, t_s seen)
    killed = None
    first_row_t = None
    why = None
    while True:
        ma.poll()
        if first_row_t is None and ma.last >= 1:
            first_row_t = soak.t()
        c = latest_checkpoint(a.ckpt)
        if c is not None and (not ckpts_a or ckpts_a[-1][0] != c):
            ckpts_a.append((c, soak.t()))
            if first_ckpt_a is None:
                first_ckpt_a = time.monotonic()
        if proc_a.poll() is not None:
            break
        soak.sample("A", proc_a, ma.last, first_ckpt_a)
        if soak.t() >= kill_at and c is not None and c + kill_after <= ma.last <= c + max(kill_after, save_every - 2):
            proc_a.send_signal(signal.SIGKILL)
            killed = {"t_s": soak.t(), "step_seen": ma.last, "checkpoint": c}
            proc_a.wait()
            break
        if soak.t() > 0.8 * duration or soak.past_deadline():
            why = (f"no kill point (a checkpoint, then {kill_after} more steps) after {kill_at:.0f} s and before "
                   f"{0.8 * duration:.0f} s")
            proc_a.kill()
            proc_a.wait()
            break
        time.sleep(POLL_S)
    log_a.close()
    ma.poll()
    t_a_end = soak.t()
    steps_ckpt, temps = checkpoint_files(a.ckpt)
    run_a = {"exit": proc_a.returncode, "killed": killed, "last_step": ma.last, "checkpoints_seen": ckpts_a,
             "startup_s": (first_row_t - ma.rows[1]["elapsed_s"]) if first_row_t and 1 in ma.rows else None,
             "wall_s": t_a_end, "checkpoints_left": steps_ckpt, "temp_files_left": temps}
    result["run_a"] = run_a
    if killed is None:
        row("run A", "FAIL", why or f"exited by itself (exit {proc_a.returncode}) at step {ma.last} ({a.out}/run-a.log)")
        return finish()
    c = max(steps_ckpt) if steps_ckpt else None
    run_a["median_step_s"] = median_step(ma.rows) if ma.rows else None
    run_a["step_time"] = step_stats(ma.rows)
    saves = save_seconds(ma.rows)
    save_list = [saves[s] for s in sorted(saves) if s % save_every == 0]
    run_a["save_s"] = save_list
    row("run A", "ok" if proc_a.returncode == -signal.SIGKILL else "FAIL",
        f"SIGKILL at {killed['t_s']:.1f} s, step {ma.last} (checkpoint {killed['checkpoint']} + {ma.last - killed['checkpoint']}); "
        f"{len(ckpts_a)} checkpoints, save {statistics.median(save_list) if save_list else 0:.2f} s")
    if c is None:
        row("resume", "FAIL", f"no checkpoint in {a.ckpt} after the kill")
        return finish()

    # ---- 3. run B: resumed, to the end ----
    step_s = run_a["median_step_s"] or step_time
    save_s = statistics.median(save_list) if save_list else 0.0
    startup = (run_a["startup_s"] or 0.0) + save_s  # loading the checkpoint: about as long as writing it
    left = duration - soak.t() - startup - save_s
    n = int(left / (step_s + save_s / save_every)) if left > 0 else 0
    minimum = (ma.last - c) + save_every + 1  # past A's last step, with a checkpoint on the way
    if n < minimum:
        soak.notes.append(f"run B needs {minimum} steps to pass A's last step and save once; "
                          f"the {n} that fit in DURATION would not: it runs {minimum}")
        n = minimum
    steps_b = c + n
    path_b = os.path.join(a.out, "metrics-b.jsonl")
    mb = Metrics(path_b)
    t_b_start = soak.t()
    proc_b, log_b = soak.launch("run-b", soak.command(steps_b, path_b, resume=True, save=save_every),
                                report=os.path.join(a.out, "report-b.json"))
    first_ckpt_b = None
    ckpts_b = []
    stopped = False
    first_row_t = None
    while proc_b.poll() is None:
        mb.poll()
        if first_row_t is None and mb.rows:
            first_row_t = soak.t()
        latest = latest_checkpoint(a.ckpt)
        if latest is not None and latest > c and (not ckpts_b or ckpts_b[-1][0] != latest):
            ckpts_b.append((latest, soak.t()))
            if first_ckpt_b is None:
                first_ckpt_b = time.monotonic()
        soak.sample("B", proc_b, mb.last, first_ckpt_b)
        if soak.past_deadline():
            proc_b.kill()
            stopped = True
        time.sleep(POLL_S)
    log_b.close()
    mb.poll()
    latest = latest_checkpoint(a.ckpt)
    if latest is not None and latest > c and (not ckpts_b or ckpts_b[-1][0] != latest):
        ckpts_b.append((latest, soak.t()))
    t_end = soak.t()
    log_text = open(os.path.join(a.out, "run-b.log"), errors="replace").read()
    m = re.search(r"^resumed\s+(\S+) \(step (\d+)", log_text, re.M)
    resumed_from = int(m.group(2)) if m else None
    first_b = min(mb.rows) if mb.rows else None
    run_b = {"exit": proc_b.returncode, "steps": steps_b, "start_t_s": t_b_start, "end_t_s": t_end,
             "resumed_from": resumed_from, "first_step": first_b, "last_step": mb.last, "checkpoints_seen": ckpts_b,
             "startup_s": (first_row_t - t_b_start - mb.rows[first_b]["elapsed_s"]) if first_row_t and first_b else None,
             "median_step_s": median_step(mb.rows) if mb.rows else None, "stopped_at_deadline": stopped,
             "estimate": {"step_s": step_s, "save_s": save_s, "startup_s": startup, "steps": n}}
    run_b["step_time"] = step_stats(mb.rows)
    result["run_b"] = run_b
    result["soak_wall_s"] = t_end
    ok_b = proc_b.returncode == 0 and mb.last == steps_b and resumed_from == c and first_b == c + 1
    row("run B", "ok" if ok_b else "FAIL",
        f"resumed from step {resumed_from} (newest checkpoint {c}), steps {first_b}..{mb.last} of {steps_b}, "
        f"exit {proc_b.returncode}{', killed at the deadline' if stopped else ''}; ended at {t_end:.1f} s "
        f"(DURATION {duration:.0f} s)")

    # ---- 4. checks ----
    every = [("calibration", cal)] if cal else []
    every += [("A", ma), ("B", mb)]
    bad = [(name, s, m.loss_text[s]) for name, m in every for s in sorted(m.rows)
           if not finite(m.rows[s]["loss"])]
    total = sum(len(m.rows) for _, m in every)
    result["losses"] = {name: {"rows": len(m.rows), "first": m.rows[min(m.rows)]["loss"] if m.rows else None,
                               "last": m.rows[max(m.rows)]["loss"] if m.rows else None} for name, m in every}
    result["nonfinite_losses"] = bad[:20]
    malformed = [(name, line) for name, m in every for line in m.malformed]
    if malformed:
        result["malformed_metrics_lines"] = malformed[:20]
        row("metrics rows", "FAIL", f"{len(malformed)} lines are not metrics rows, first {malformed[0]}")
    row("losses finite", "PASS" if not bad and total else "FAIL",
        f"{total} rows ({', '.join(f'{name} {len(m.rows)}' for name, m in every)})" +
        (f"; {len(bad)} not finite, first {bad[0]}" if bad else ""))

    overlap = [s for s in sorted(ma.rows) if s > c and s in mb.rows]
    cmp_resume = compare(ma.loss_text, mb.loss_text, overlap)
    result["resume_comparison"] = cmp_resume
    detail = (f"{cmp_resume['steps']} steps {cmp_resume['first']}..{cmp_resume['last']} recomputed after the kill, "
              f"max |diff| {cmp_resume['max_abs_diff']!r}" if overlap else "no step of A after its checkpoint to compare")
    if overlap and not cmp_resume["bitwise_equal"]:
        detail += f"; first difference {cmp_resume['first_difference']}"
    row("resume bitwise", "PASS" if cmp_resume["bitwise_equal"] else "FAIL", detail)

    if cal:
        same = [s for s in sorted(cal.rows) if s in ma.rows]
        cmp_fresh = compare(cal.loss_text, ma.loss_text, same)
        result["fresh_comparison"] = cmp_fresh
        detail = (f"calibration vs run A, steps {cmp_fresh['first']}..{cmp_fresh['last']}, "
                  f"max |diff| {cmp_fresh['max_abs_diff']!r}")
        if same and not cmp_fresh["bitwise_equal"]:
            detail += f"; first difference {cmp_fresh['first_difference']}"
        row("fresh runs equal", "PASS" if cmp_fresh["bitwise_equal"] else "FAIL", detail)

    # Memory: each process after its first checkpoint.
    memory = {}
    for name, first in (("A", first_ckpt_a), ("B", first_ckpt_b)):
        # From the first checkpoint until the last step completes: after it the
        # process saves, frees its pools and exits, which is not a leak.
        last_step = max((s["step"] for s in soak.samples if s["run"] == name and s["step"] is not None),
                        default=None)
        window = [s for s in soak.samples if s["run"] == name and s["after_first_ckpt"]
                  and s["step"] is not None and s["step"] < last_step]
        entry = {"samples_total": sum(1 for s in soak.samples if s["run"] == name), "samples_after_first_ckpt": len(window),
                 "host_rss": flatness(window, "rss_mib", a.flat_pct, a.flat_mib)}
        hwm = [s["hwm_mib"] for s in soak.samples if s["run"] == name and s["hwm_mib"] is not None]
        entry["host_hwm_mib_last"] = hwm[-1] if hwm else None
        if soak.gpu:
            proc_key = "gpu_proc_mib" if window and all(s["gpu_proc_mib"] is not None for s in window) else "gpu_used_mib"
            entry["device_source"] = proc_key
            entry["device"] = flatness(window, proc_key, a.flat_pct, a.flat_mib)
        memory[name] = entry
    result["memory"] = memory

    def memory_row(check, key):
        parts, ok = [], True
        for name in ("A", "B"):
            f = memory[name].get(key)
            if f is None:
                continue
            if f["flat"] is None:
                ok = False
                parts.append(f"{name}: {f['why']} after its first checkpoint")
                continue
            ok = ok and f["flat"]
            parts.append(f"{name} {f['min_mib']:.0f}..{f['max_mib']:.0f} MiB (spread {f['spread_mib']:.1f}, "
                         f"bound {f['bound_mib']:.0f}, slope {f['slope_mib_per_min']:+.1f}/min, {f['samples']} samples)")
        src = f" [{memory['A'].get('device_source', '')}]" if key == "device" else ""
        row(check, "PASS" if ok else "FAIL", "; ".join(parts) + src)

    memory_row("host RSS flat", "host_rss")
    if soak.gpu:
        memory_row("device mem flat", "device")

    steps_end, temps_end = checkpoint_files(a.ckpt)
    result["checkpoints_end"] = {"files": steps_end, "temp_files": temps_end, "latest": latest_checkpoint(a.ckpt)}
    size = max(steps_end.values()) if steps_end else 0
    ok = list(steps_end) == [steps_b] and not temps_end and latest_checkpoint(a.ckpt) == steps_b
    row("checkpoints", "ok" if ok else "FAIL",
        f"{len(steps_end)} left ({', '.join(f'step-{s}.ckpt' for s in steps_end)}, {size / 1e9:.2f} GB), "
        f"every {save_every} steps; A saved {len(ckpts_a)}, B {len(ckpts_b)}")

    for name in ("calibrate", "b"):
        try:
            result[f"report_{name}"] = json.load(open(os.path.join(a.out, f"report-{name}.json")))
        except (OSError, ValueError):
            pass

    # The whole history, as one unbroken run would have written it: A up to the checkpoint, then B.
    with open(os.path.join(a.out, "metrics.jsonl"), "w") as f:
        for s in sorted(ma.rows):
            if s <= c:
                f.write(ma.lines[s] + "\n")
        for s in sorted(mb.rows):
            f.write(mb.lines[s] + "\n")
    timing = (f"soak {t_end:.0f} s of {duration:.0f} (A {t_a_end:.0f} s, B {t_end - t_b_start:.0f} s, "
              f"start-up A {fmt_s(run_a['startup_s'])} s B {fmt_s(run_b['startup_s'])} s); step {step_s:.4f} s, "
              f"checkpoint every {save_every} steps, save {save_s:.2f} s")
    row("timing", "ok", timing)
    return finish()


def main(argv):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    soak = Soak(a)
    # A SIGTERM (a timeout around this script) unwinds like an exception, so no megatrain-run outlives it.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        return run(a, soak)
    finally:
        for proc in soak.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
