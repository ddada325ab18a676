#!/usr/bin/env bash
# bench/adamw_vs_torch.sh - the host AdamW against torch's fused CPU AdamW, in one run on the
# same machine: runtime_adamw_bench --entry (the runtime's adamwUpdate, best path and default
# chunking, over 256M f32 parameters, without and with the bf16 compute copy) and
# torch.optim.AdamW(fused=True) over the same count, each on every core, best of RUNS steps.
# usage: BIN=build-gpu/bin bash bench/adamw_vs_torch.sh   (prints a short table last)
#        MILLIONS=256 RUNS=5 THREADS=<cores> override the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin}
MILLIONS=${MILLIONS:-256}
RUNS=${RUNS:-5}
THREADS=${THREADS:-$(nproc)}
ours=$(MEGATRAIN_HOST_THREADS=$THREADS "$BIN/runtime_adamw_bench" --entry "$MILLIONS" "$RUNS")
theirs=$(python3 - "$MILLIONS" "$RUNS" "$THREADS" <<'PY'
import sys, time, torch
millions, runs, threads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
n = millions * 1024 * 1024
p = torch.nn.Parameter(torch.randn(n))
p.grad = torch.randn(n)
opt = torch.optim.AdamW([p], lr=1e-4, weight_decay=0.01, fused=True)
opt.step()  # warm-up (allocates the moments)
best = float("inf")
for _ in range(runs):
    start = time.perf_counter()
    opt.step()
    best = min(best, time.perf_counter() - start)
print(n / best)
print(torch.__version__)
PY
)
python3 - "$ours" "$theirs" "$THREADS" "$MILLIONS" <<'PY'
import sys
ours = dict(line.split() for line in sys.argv[1].splitlines())
theirs, version = sys.argv[2].split()
theirs = float(theirs)
plain, copy = float(ours["adamw_params_per_s"]), float(ours["adamw_bf16_copy_params_per_s"])
print(f"host AdamW, {sys.argv[4]}M f32 parameters, {sys.argv[3]} threads each, same run")
print(f"  megatrain adamwUpdate ({ours['adamw_isa']}, {ours['adamw_chunks']} chunks)  "
      f"{plain / 1e9:6.2f} G params/s  ({plain * 28 / 1e9:5.1f} GB/s)")
print(f"  megatrain adamwUpdate + bf16 copy       {copy / 1e9:6.2f} G params/s  ({copy * 30 / 1e9:5.1f} GB/s)")
print(f"  torch {version} AdamW(fused=True)    {theirs / 1e9:6.2f} G params/s  ({theirs * 28 / 1e9:5.1f} GB/s)")
print(f"  ratio, megatrain / torch                {plain / theirs:6.2f}x")
print(f"  ratio, megatrain with the copy / torch  {copy / theirs:6.2f}x")
PY
