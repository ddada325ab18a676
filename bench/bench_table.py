#!/usr/bin/env python3
"""bench_table.py - megatrain against the PyTorch peers: one markdown table from a benchmark run.

    python3 bench/bench_table.py OUT [--settings 16k,64k] [--warmup 2] [--md OUT/bench.md]

Reads what bench/llama1b3.sh left in OUT/SETTING/ for each setting:
  megatrain.jsonl      megatrain-run --metrics (one row per step: step_time_s, ...)
  megatrain.log        megatrain-run's output (per-step lines with `dev SIZE` and `(S s)`,
                       and whatever memory report and summary it prints)
  plan.json            bench/plan_header.py of the plan (predicted step time, budget, pools)
  pytorch-gpu.json, pytorch-fsdp2-offload.json
                       bench/peers.py's result lines
  smi-NAME.txt         nvidia-smi memory.used samples (MiB, one a line) taken while NAME ran
and writes OUT/SETTING/megatrain.json (megatrain's figures, parsed), the table to --md
(default OUT/bench.md), and prints the table. A part that is missing shows as "n/a"
with the reason below the table, so a re-run of one part still gives a table.

megatrain's step time is the median of the per-step times after --warmup steps (the
metrics file, else the per-step log lines). Its device memory is the largest figure of
its own report: the `dev` field of its per-step lines (cudaMemGetInfo: used = total -
free, the whole device, so the CUDA context and cuBLAS workspace are in it) or lines
that say device memory was used or peaked; nvidia-smi's peak is shown beside it for
every system, the one figure measured the same way for all.
"""
import argparse
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import LLAMA_1B3, llama_params  # noqa: E402

GIB = float(1 << 30)
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
         "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
SIZE = r"(\d+(?:\.\d+)?)\s*(TiB|GiB|MiB|KiB|TB|GB|MB|KB|B)\b"
PEERS = [("pytorch-gpu", "PyTorch, all on GPU (bf16 autocast, fused AdamW, SDPA)"),
         ("pytorch-compile", "PyTorch torch.compile, all on GPU (bf16 autocast, fused AdamW, SDPA)"),
         ("pytorch-fsdp2-offload", "PyTorch FSDP2 + CPUOffloadPolicy (bf16 params, fused CPU AdamW)"),
         ("pytorch-fsdp2-offload-default", "PyTorch FSDP2 + CPUOffloadPolicy (bf16 params, default CPU AdamW)"),
         ("pytorch-deepspeed-offload", "DeepSpeed ZeRO-3, parameters and optimizer offloaded to CPU (bf16, CPU AdamW)")]
SETTINGS = {"16k": 1, "64k": 4}


def size_bytes(number, unit):
    return float(number) * UNITS[unit]


def load_json(path):
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    # A result file holds one JSON line; a log may hold others before it.
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


def smi_peak(path):
    """Peak of nvidia-smi memory.used samples (MiB), in bytes, or None."""
    try:
        with open(path) as f:
            values = [float(v) for v in re.findall(r"^\s*(\d+(?:\.\d+)?)", f.read(), re.M)]
    except OSError:
        return None
    return max(values) * (1 << 20) if values else None


def parse_megatrain(folder, warmup):
    """megatrain's figures from its metrics, log and plan header."""
    result = {"system": "megatrain", "notes": []}
    rows = []
    try:
        with open(os.path.join(folder, "megatrain.jsonl")) as f:
            rows = [json.loads(line) for line in f if line.strip().startswith("{")]
    except (OSError, json.JSONDecodeError) as error:
        result["notes"].append(f"metrics: {error}")
    try:
        with open(os.path.join(folder, "megatrain.log"), errors="replace") as f:
            log = f.read().replace("\r", "\n").splitlines()
    except OSError:
        log = []
    step_lines = [line for line in log if re.match(r"\s*step\s+\d+/\d+", line)]

    times = [r["step_time_s"] for r in rows if isinstance(r.get("step_time_s"), (int, float))]
    source = "metrics"
    if not times:  # fall back to the per-step log lines, which end in "(S s)"
        times = [float(m.group(1)) for line in step_lines for m in [re.search(r"\((\d+(?:\.\d+)?) s\)\s*$", line)] if m]
        source = "log"
    result["steps"] = len(times)
    result["step_times_s"] = times
    if len(times) > warmup:
        result["median_step_s"] = statistics.median(times[warmup:])
        result["step_time_source"] = source
    elif times:
        result["median_step_s"] = statistics.median(times)
        result["notes"].append(f"only {len(times)} steps: the median includes warm-up")
    losses = [r.get("loss") for r in rows]
    result["losses"] = losses
    if rows and rows[-1].get("tokens"):
        result["tokens_per_step"] = rows[-1]["tokens"]

    # Device memory from megatrain's own report: metrics keys, then the log.
    own = []
    for r in rows:
        for key, value in r.items():
            if isinstance(value, (int, float)) and re.search(r"device|dev_", key) and re.search(r"bytes", key):
                own.append(float(value))
    reported = []
    for line in log:
        if line in step_lines:
            m = re.search(r"\bdev " + SIZE, line)
            if m:
                own.append(size_bytes(*m.groups()))
        elif re.search(r"(?i)device", line) and re.search(r"(?i)memory|used|peak|cudaMemGetInfo", line):
            reported.append(line.strip())
            if re.search(r"(?i)\b(used|peak)\b", line):
                own.extend(size_bytes(*m) for m in re.findall(SIZE, line))
    if own:
        result["device_bytes"] = max(own)
    result["memory_report"] = reported[:20]
    summary = [line.strip() for line in log if line.startswith("done")]
    if summary:
        result["summary"] = summary[-1]

    plan = load_json_file(os.path.join(folder, "plan.json"))
    if plan:
        result["predicted_step_s"] = plan.get("predicted_step_s") or None
        result["predicted_breakdown"] = plan.get("predicted_breakdown", {})
        result["precision"] = plan.get("precision") or "fp32"
        # The device memory the plan was given: its capacity when state
        # shares the device with the arena, else the arena's budget.
        result["budget_bytes"] = plan.get("device_budget_bytes") and (
            plan.get("device_capacity_bytes") or plan.get("device_budget_bytes"))
        result["arena_bytes"] = plan.get("device_pool_bytes")
        result["host_pinned_bytes"] = plan.get("host_pinned_pool_bytes")
        result["microbatches"] = plan.get("microbatches") or 1
        if plan.get("tokens_per_step"):
            result.setdefault("tokens_per_step", plan["tokens_per_step"] * (plan.get("microbatches") or 1))
    else:
        result["notes"].append("no plan.json (plan header)")
    return result


def load_json_file(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def fmt_bytes(value):
    return "n/a" if not value else f"{value / GIB:.1f} GiB"


def fmt(value, spec, suffix=""):
    return "n/a" if value is None else format(value, spec) + suffix


def setting_table(out, setting, warmup, params):
    folder = os.path.join(out, setting)
    lines, notes = [], []
    mt = parse_megatrain(folder, warmup)
    mt["smi_peak_bytes"] = smi_peak(os.path.join(folder, "smi-megatrain.txt"))
    tokens = mt.get("tokens_per_step") or 8 * 2048 * SETTINGS.get(setting, 1)
    if mt.get("median_step_s"):
        mt["tokens_per_s"] = tokens / mt["median_step_s"]
        mt["model_tflops"] = 6.0 * params * mt["tokens_per_s"] / 1e12
    mt["params"] = params
    if os.path.isdir(folder):
        with open(os.path.join(folder, "megatrain.json"), "w") as f:
            json.dump(mt, f, indent=2)
            f.write("\n")
    notes += [f"megatrain: {n}" for n in mt["notes"]]
    try:
        with open(os.path.join(folder, "precision-note.txt")) as f:
            notes.append("megatrain-compile: " + f.read().strip().removeprefix("note: "))
    except OSError:
        pass
    if not mt.get("median_step_s"):
        notes.append(f"megatrain: no step times in {folder} (megatrain.jsonl / megatrain.log)")

    micro = SETTINGS.get(setting, mt.get("microbatches", 1))
    lines.append(f"### {tokens:,} tokens per optimizer step ({micro} micro-batch{'es' if micro > 1 else ''} "
                 f"of {tokens // micro:,} tokens)")
    lines.append("")
    lines.append("| system | step (median) | tokens/s | model TFLOP/s | peak device memory | nvidia-smi peak | megatrain's speed-up |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- |")
    budget = f", {fmt_bytes(mt.get('budget_bytes'))} budget" if mt.get("budget_bytes") else ""
    lines.append(f"| megatrain ({mt.get('precision', '?')}{budget}) | {fmt(mt.get('median_step_s'), '.3f', ' s')} | "
                 f"{fmt(mt.get('tokens_per_s'), ',.0f')} | {fmt(mt.get('model_tflops'), '.0f')} | "
                 f"{fmt_bytes(mt.get('device_bytes'))} | {fmt_bytes(mt.get('smi_peak_bytes'))} | |")
    for name, label in PEERS:
        peer = load_json(os.path.join(folder, name + ".json"))
        smi = smi_peak(os.path.join(folder, f"smi-{name}.txt"))
        if not peer or "median_step_s" not in peer:
            if not os.path.exists(os.path.join(folder, name + ".log")):
                continue  # not run in this round
            notes.append(f"{name}: no result in {os.path.join(folder, name + '.json')} (skipped or failed; see its log)")
            lines.append(f"| {label} | n/a | n/a | n/a | n/a | {fmt_bytes(smi)} | n/a |")
            continue
        # The same parameter count for every system, so TFLOP/s compare as tokens/s do.
        peer_tps = tokens / peer["median_step_s"] if peer.get("tokens_per_step") == tokens else peer["tokens_per_s"]
        if peer.get("tokens_per_step") != tokens:
            notes.append(f"{name}: {peer.get('tokens_per_step')} tokens per step, megatrain {tokens}")
        ratio = f"{mt['tokens_per_s'] / peer_tps:.2f}x" if mt.get("tokens_per_s") else "n/a"
        memory = (f"{fmt_bytes(peer.get('peak_allocated_bytes'))} allocated, "
                  f"{fmt_bytes(peer.get('peak_reserved_bytes'))} reserved")
        lines.append(f"| {label} | {peer['median_step_s']:.3f} s | {peer_tps:,.0f} | "
                     f"{6.0 * params * peer_tps / 1e12:.0f} | {memory} | {fmt_bytes(smi)} | {ratio} |")
    lines.append("")
    predicted, measured = mt.get("predicted_step_s"), mt.get("median_step_s")
    if predicted and measured:
        b = mt.get("predicted_breakdown", {})
        parts = ", ".join(f"{k[:-2].replace('_', ' ')} {v:.3f} s" for k, v in b.items())
        lines.append(f"megatrain step time: predicted {predicted:.3f} s ({parts}), measured {measured:.3f} s "
                     f"(median of {len(mt['step_times_s']) - warmup} steps after {warmup} warm-up): "
                     f"measured / predicted = {measured / predicted:.2f}")
    else:
        lines.append(f"megatrain step time: predicted {fmt(predicted, '.3f', ' s')}, measured {fmt(measured, '.3f', ' s')}")
    if mt.get("budget_bytes") and mt.get("device_bytes"):
        lines.append(f"megatrain device memory: {fmt_bytes(mt['device_bytes'])} used (device pools, "
                     f"arena and state, {fmt_bytes(mt.get('arena_bytes'))} of the "
                     f"{fmt_bytes(mt['budget_bytes'])} budget, plus CUDA context and workspaces)")
    for line in mt.get("memory_report", [])[:4]:
        lines.append(f"megatrain reports: `{line}`")
    if notes:
        lines.append("")
        lines += [f"- {n}" for n in notes]
    lines.append("")
    return lines


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", help="the benchmark's output folder")
    p.add_argument("--settings", default="16k,64k")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--params", type=int, default=None,
                   help="parameter count for 6PT (default: the peers' count, else the 1.36B formula)")
    p.add_argument("--md", default=None, help="where to write the table (default OUT/bench.md)")
    p.add_argument("--title", default="megatrain vs PyTorch, Llama-shaped 1.36B")
    args = p.parse_args(argv)
    settings = [s for s in args.settings.split(",") if s]
    params = args.params
    if params is None:
        for s in settings:
            for name, _ in PEERS:
                peer = load_json(os.path.join(args.out, s, name + ".json"))
                if peer and peer.get("params"):
                    params = peer["params"]
        params = params or llama_params(**LLAMA_1B3)
    lines = [f"## {args.title}", ""]
    machine = os.path.join(args.out, "machine.txt")
    if os.path.exists(machine):
        with open(machine) as f:
            lines += [f"    {line.rstrip()}" for line in f if line.strip()]
        lines.append("")
    lines.append(f"{params:,} parameters; model TFLOP/s = 6 x parameters x tokens / step time; "
                 f"speed-up = megatrain's tokens/s over the row's.")
    lines.append("")
    for s in settings:
        lines += setting_table(args.out, s, args.warmup, params)
    text = "\n".join(lines).rstrip() + "\n"
    with open(args.md or os.path.join(args.out, "bench.md"), "w") as f:
        f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main(sys.argv[1:])
