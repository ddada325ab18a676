#!/usr/bin/env bash
# bench/scale_round.sh - the scale benchmarks on the GPU machine, in one lease (docs/tiering.md,
# "State homes"): where the compiler's default homes put the state of each model and how fast
# it trains, against the PyTorch and DeepSpeed offloading peers.
#
#   OUT=$OUT bash bench/scale_round.sh        # binaries staged by scripts/stage_device.sh
#
# Parts (PARTS, comma-separated, default 1b3,7b,20b), each through bench/llama1b3.sh:
#   1b3  the 1.36B Llama at 16,384 tokens per step compiled with default flags (state homes
#        from the profile: all state on the GPU) and with the 16 GiB budget; megatrain only
#   7b   the Llama-2-7B shape at 16,384 tokens per step with default flags, against FSDP2 +
#        CPUOffloadPolicy (fused CPU AdamW) and DeepSpeed ZeRO-3 offload (PEERS_7B)
#   20b  the largest Llama-shaped model (SIZE_BIG, default 20b: hidden 6144, 44 layers), state
#        spilled to host and disk (DISK_MEMORY under DISK_DIR), STEPS_BIG steps
# The graph-only exports in tests/models/graphs stand for the 1.36B and 7B models (megatrain
# starts from --init normal:0.02; the peers build the same config with random weights);
# ONNX_1B3, ONNX_7B and ONNX_BIG (a .onnx or .onnx.xz) replace them, or export the big one.
# Settings (environment): BIN (default build-gpu/bin), OUT, DEEPSPEED_WHEELS, PEERS_7B
# (default fsdp2-offload,deepspeed-offload), STEPS_7B (default 8), SIZE_BIG, STEPS_BIG
# (default 6), DISK_MEMORY (default 48GiB), DISK_DIR (default /tmp/megatrain-disk),
# TOKENS_BIG (tokens per step for the big model: 16k or 64k, default 64k).
set -uo pipefail
cd "$(dirname "$0")/.."
export BIN=${BIN:-build-gpu/bin}
OUT=${OUT:-runs/scale_round}
PARTS=${PARTS:-1b3,7b,20b}
mkdir -p "$OUT"
status=0
start=$(date +%s)
part() { [[ ,$PARTS, == *,$1,* ]]; }
if part 1b3; then
  for budget in default 16GiB; do
    SIZE=1b3 SETTINGS=16k DEVICE_MEMORY=$budget SKIP_PEERS=1 GRAPH_ONLY=1 ONNX=${ONNX_1B3:-tests/models/graphs/llama_1b36_b8s2048.onnx} TRACE=0 OUT=$OUT/1b3-$budget \
      bash bench/llama1b3.sh > "$OUT/1b3-$budget.log" 2>&1 || status=1
    echo "1b3 ($budget) done at +$(( $(date +%s) - start )) s"
  done
fi
if part 7b; then
  SIZE=7b SETTINGS=16k DEVICE_MEMORY=default ONNX=${ONNX_7B:-tests/models/graphs/llama_7b_b8s2048.onnx} STEPS=${STEPS_7B:-8} MT_TIMEOUT=${MT_TIMEOUT_7B:-420} \
    PEERS=${PEERS_7B:-fsdp2-offload,deepspeed-offload} FSDP_STEPS=${FSDP_STEPS_7B:-5} PEER_TIMEOUT=${PEER_TIMEOUT_7B:-300} \
    TRACE=0 OUT=$OUT/7b bash bench/llama1b3.sh > "$OUT/7b.log" 2>&1 || status=1
  echo "7b done at +$(( $(date +%s) - start )) s"
fi
if part 20b; then
  disk=${DISK_DIR:-/tmp/megatrain-disk}
  mkdir -p "$disk"
  SIZE=${SIZE_BIG:-20b} ONNX=${ONNX_BIG:-} SETTINGS=${TOKENS_BIG:-64k} DEVICE_MEMORY=default STEPS=${STEPS_BIG:-6} WARMUP=1 \
    MT_TIMEOUT=${MT_TIMEOUT_BIG:-540} SKIP_PEERS=1 TRACE=0 \
    COMPILE_FLAGS="--disk-memory ${DISK_MEMORY:-48GiB}" RUN_FLAGS="--disk-dir $disk" OUT=$OUT/20b \
    bash bench/llama1b3.sh > "$OUT/20b.log" 2>&1 || status=1
  df -h "$disk" | tail -1 > "$OUT/20b/disk.txt" 2>&1
  rm -rf "$disk"
  echo "20b done at +$(( $(date +%s) - start )) s"
fi
echo
for p in 1b3-default 1b3-16GiB 7b 20b; do
  [[ -f $OUT/$p.log ]] || continue
  echo "== $p"
  sed -n '/^== phases/,/^## /p' "$OUT/$p.log" | grep -v '^## '
  grep -E '^\| |^megatrain step time' "$OUT/$p.log"
  grep -h -E 'bytes/param|capacities|pool bytes' "$OUT/$p"/*/inspect.txt 2>/dev/null | head -3
done
exit $status
