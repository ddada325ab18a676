#!/usr/bin/env bash
# bench/scale_round.sh - the scale benchmarks on the GPU machine, in one lease (docs/tiering.md,
# "State homes"): where the compiler's default homes put the state of each model and how fast
# it trains, against the PyTorch and DeepSpeed offloading peers.
#
#   OUT=$OUT bash bench/scale_round.sh        # binaries staged by scripts/stage_device.sh
#
# Parts (PARTS, comma-separated, default 1b3,7b,big), each through bench/llama1b3.sh:
#   1b3  the 1.36B Llama at 16,384 tokens per step compiled with default flags (state homes
#        from the profile: all state on the GPU) and with the 16 GiB budget; megatrain only
#   7b   the Llama-2-7B shape at 16,384 tokens per step with default flags, against FSDP2 +
#        CPUOffloadPolicy (fused CPU AdamW) and DeepSpeed ZeRO-3 offload (PEERS_7B)
#   big  a Llama-shaped model of 16B or more (SIZE_BIG, default 17b: 16.7B, hidden 6144, 36
#        layers) with state on the device, the host and the disk (DISK_FLAGS, default
#        "--disk-memory 8GiB --state-home disk:embed_tokens|lm_head": the embeddings' and the
#        head's moments on disk, so that the disk's share of a step is about the compute's and
#        not the only thing measured; a 20B model compiles with 37.5 GiB of moments on disk,
#        whose read and write take over a minute a step at the profile's disk rates), under
#        DISK_DIR, STEPS_BIG steps
# The graph-only exports in tests/models/graphs stand for the 1.36B and 7B models (megatrain
# starts from --init normal:0.02; the peers build the same config with random weights);
# ONNX_1B3, ONNX_7B and ONNX_BIG (a .onnx or .onnx.xz) replace them, or export the big one.
# PLANS: a folder of plans compiled on another machine (bench/llama1b3.sh), so that the lease
# spends no time compiling; the 1b3 part's are in its subfolders 1b3-default and 1b3-16GiB.
# Settings (environment): BIN (default build-gpu/bin), OUT, DEEPSPEED_WHEELS, PEERS_7B
# (default fsdp2-offload,deepspeed-offload; "none" runs megatrain only), STEPS_7B (default 8), SIZE_BIG, STEPS_BIG
# (default 6), DISK_FLAGS, DISK_DIR (default /tmp/megatrain-disk), TOKENS_BIG (tokens per step
# for the big model: 16k or 64k, default 16k), LR_BIG (its learning rate, default LR or 1e-4; a plan
# from PLANS has its own, which LR_BIG should then state), TRACE (default 0; 1: megatrain-run --trace of
# the last step and its breakdown beside the prediction, bench/trace_breakdown.py).
set -uo pipefail
cd "$(dirname "$0")/.."
export BIN=${BIN:-build-gpu/bin}
OUT=${OUT:-runs/scale_round}
PARTS=${PARTS:-1b3,7b,big}
mkdir -p "$OUT"
status=0
start=$(date +%s)
part() { [[ ,$PARTS, == *,$1,* ]]; }
if part 1b3; then
  for budget in default 16GiB; do
    PLANS=${PLANS:+$PLANS/1b3-$budget} SIZE=1b3 SETTINGS=16k DEVICE_MEMORY=$budget SKIP_PEERS=1 GRAPH_ONLY=1 ONNX=${ONNX_1B3:-tests/models/graphs/llama_1b36_b8s2048.onnx} TRACE=${TRACE:-0} OUT=$OUT/1b3-$budget \
      bash bench/llama1b3.sh > "$OUT/1b3-$budget.log" 2>&1 || status=1
    echo "1b3 ($budget) done at +$(( $(date +%s) - start )) s"
  done
fi
if part 7b; then
  peers7b=${PEERS_7B:-fsdp2-offload,deepspeed-offload}
  SKIP_PEERS=$([[ $peers7b == none ]] && echo 1 || echo 0) SIZE=7b SETTINGS=16k DEVICE_MEMORY=default ONNX=${ONNX_7B:-tests/models/graphs/llama_7b_b8s2048.onnx} STEPS=${STEPS_7B:-8} MT_TIMEOUT=${MT_TIMEOUT_7B:-420} \
    PEERS=$peers7b FSDP_STEPS=${FSDP_STEPS_7B:-5} PEER_TIMEOUT=${PEER_TIMEOUT_7B:-300} \
    TRACE=${TRACE:-0} OUT=$OUT/7b bash bench/llama1b3.sh > "$OUT/7b.log" 2>&1 || status=1
  echo "7b done at +$(( $(date +%s) - start )) s"
fi
if part big; then
  disk=${DISK_DIR:-/tmp/megatrain-disk}
  mkdir -p "$disk"
  LR=${LR_BIG:-${LR:-1e-4}} SIZE=${SIZE_BIG:-17b} ONNX=${ONNX_BIG:-} SETTINGS=${TOKENS_BIG:-16k} DEVICE_MEMORY=default STEPS=${STEPS_BIG:-6} WARMUP=1 \
    MT_TIMEOUT=${MT_TIMEOUT_BIG:-540} SKIP_PEERS=1 TRACE=${TRACE:-0} \
    COMPILE_FLAGS="${DISK_FLAGS:---disk-memory 8GiB --state-home disk:embed_tokens}" RUN_FLAGS="--disk-dir $disk" OUT=$OUT/big \
    bash bench/llama1b3.sh > "$OUT/big.log" 2>&1 || status=1
  df -h "$disk" | tail -1 > "$OUT/big/disk.txt" 2>&1
  rm -rf "$disk"
  echo "big done at +$(( $(date +%s) - start )) s"
fi
echo
for p in 1b3-default 1b3-16GiB 7b big; do
  [[ -f $OUT/$p.log ]] || continue
  echo "== $p"
  sed -n '/^== phases/,/^## /p' "$OUT/$p.log" | grep -v '^## '
  grep -E '^\| |^megatrain step time' "$OUT/$p.log"
  grep -h -E 'bytes/param|capacities|pool bytes' "$OUT/$p"/*/inspect.txt 2>/dev/null | head -3
done
exit $status
