#!/usr/bin/env bash
# bench/tiering_table.sh - the planner against the three reference policies on the 1.3B
# Llama-shaped graph (compile only, no GPU): for each device budget and each
# --tiering-policy, the predicted step time with its breakdown and the device arena, as
# a markdown table (docs/tiering-1b3.md is this script's output). The graph is imported
# once (--emit=training) and the training step compiled from that.
# usage: bash bench/tiering_table.sh [OUT.md]   (env: BIN, MODEL, BUDGETS, WORK)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin}
MODEL=${MODEL:-tests/models/graphs/llama_1b36_b8s2048.onnx}
BUDGETS=${BUDGETS:-80GiB 40GiB 16GiB 8GiB}
WORK=${WORK:-$(mktemp -d)}
OUT=${1:-/dev/stdout}
mkdir -p "$WORK"

echo "importing $MODEL" >&2
start=$(date +%s)
"$BIN/megatrain-compile" "$MODEL" --emit=training -o "$WORK/step.mlir"
echo "  $(( $(date +%s) - start )) s" >&2

results=$WORK/results.tsv
: > "$results"
for budget in $BUDGETS; do
  for policy in keep checkpoint offload auto; do
    log=$WORK/$budget.$policy.log
    start=$(date +%s)
    if "$BIN/megatrain-compile" "$WORK/step.mlir" -o "$WORK/$budget.$policy.plan" \
         --device-memory "$budget" --tiering-policy "$policy" > "$log" 2>&1; then
      status=ok
    else
      status=fail
    fi
    secs=$(( $(date +%s) - start ))
    printf '%s\t%s\t%s\t%s\t%s\n' "$budget" "$policy" "$status" "$secs" "$log" >> "$results"
    echo "  $budget $policy: $status (${secs} s)" >&2
  done
done

python3 - "$results" "$MODEL" > "$OUT" <<'PY'
import re, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
def parse(log):
    text = open(log).read()
    m = re.search(r"predicted step ([0-9.]+) ms \(compute ([0-9.]+), exposed transfer ([0-9.]+), "
                  r"recompute ([0-9.]+), host optimizer ([0-9.]+), idle ([0-9.]+)\)", text)
    arena = re.search(r"device arena\s+(\S+ \S+)", text)
    links = re.search(r"link bytes\s+h2d (\S+ \S+) \(\d+ bytes\), d2h (\S+ \S+)", text)
    policy = re.search(r"tiering policy\s+(.*)", text)
    return m, arena, links, text
print(f"Model: `{sys.argv[2]}` (hidden 2048, 24 layers, 16 heads, intermediate 5632, vocab 32000, "
      "batch 8 x seq 2048), fp32 compute, default device profile (the H200 of docs/hardware.md). "
      "Predicted by the plan simulator; compile only.\n")
print("| budget | policy | fits | predicted step (ms) | compute | exposed transfer | recompute | host optimizer | idle | device arena | h2d / d2h per step |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
best = {}
for budget, policy, status, secs, log in rows:
    m, arena, links, text = parse(log)
    if status != "ok" or not m:
        why = re.search(r"error: (?:.*?: )?(mt-tier: .*)", text)
        reason = why.group(1) if why else text.strip().splitlines()[-1]
        reason = re.sub(r"\s+\(\d+ bytes\)", "", reason)[:140]
        print(f"| {budget} | {policy} | no | | | | | | | | {reason} |")
        continue
    step = float(m.group(1))
    if policy != "auto":
        best[budget] = min(best.get(budget, float("inf")), step)
    else:
        best[(budget, "auto")] = step
    print(f"| {budget} | {policy} | yes | {step:.1f} | {float(m.group(2)):.1f} | {float(m.group(3)):.1f} | "
          f"{float(m.group(4)):.1f} | {float(m.group(5)):.1f} | {float(m.group(6)):.1f} | {arena.group(1)} | "
          f"{links.group(1)} / {links.group(2)} |")
print()
for budget in dict.fromkeys(r[0] for r in rows):
    a = best.get((budget, "auto")); b = best.get(budget)
    if a is None:
        print(f"- {budget}: the planner finds no plan")
    elif b is None:
        print(f"- {budget}: only the planner fits ({a:.1f} ms)")
    else:
        print(f"- {budget}: planner {a:.1f} ms vs best reference {b:.1f} ms: "
              f"{'not worse' if a <= b * (1 + 1e-9) else 'WORSE'} ({b / a:.2f}x)")
PY
