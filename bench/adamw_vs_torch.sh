#!/usr/bin/env bash
# bench/adamw_vs_torch.sh - the host AdamW against torch's fused CPU AdamW, in one run on the
# same machine: megatrain-profile's host_adamw_params_per_s (the runtime's adamwUpdate over
# 256M f32 parameters) and torch.optim.AdamW(fused=True) over the same count, on every core.
# usage: BIN=build-gpu/bin bash bench/adamw_vs_torch.sh   (prints a short table last)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin}
OUT=${OUT:-runs/adamw}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
"$BIN/megatrain-profile" -o "$OUT/profile.json" 2> "$OUT/profile.log"
ours=$(python3 -c "import json; print(json.load(open('$OUT/profile.json'))['host_adamw_params_per_s'])")
theirs=$(python3 - <<'PY'
import os, time, torch
torch.set_num_threads(os.cpu_count())
n = 256 * 1024 * 1024
p = torch.nn.Parameter(torch.randn(n))
p.grad = torch.randn(n)
opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01, fused=True)
opt.step()  # warm-up (allocates the moments)
best = float("inf")
for _ in range(5):
    start = time.perf_counter()
    opt.step()
    best = min(best, time.perf_counter() - start)
print(n / best)
PY
)
python3 - "$ours" "$theirs" "$(nproc)" <<'PY'
import sys
ours, theirs, cores = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
print(f"host AdamW, 256M f32 parameters, {cores} cores")
print(f"  megatrain adamwUpdate     {ours / 1e9:6.2f} G params/s")
print(f"  torch AdamW(fused=True)   {theirs / 1e9:6.2f} G params/s")
print(f"  ratio                     {ours / theirs:6.2f}x")
PY
