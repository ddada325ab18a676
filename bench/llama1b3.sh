#!/usr/bin/env bash
# bench/llama1b3.sh - megatrain against the PyTorch peers on the Llama-shaped 1.36B model, in one run.
#
# On the GPU machine (docs/hardware.md): exports the Llama-shaped 1.36B model (hidden 2048, 24 layers, 16 heads,
# intermediate 5632, vocabulary 32000; random init, seed 0) with
# frontends/python/export_hf.py, compiles it for a 16 GiB device budget for each setting,
# trains STEPS steps with megatrain-run on cuda, runs the two PyTorch peers
# (bench/peers.py: all on GPU; FSDP2 with CPUOffloadPolicy) on the same config, tokens
# per optimizer step, AdamW settings and precision, and prints the table of
# bench/bench_table.py last. Settings: 16k = one micro-batch of 8 x 2048 tokens per
# optimizer step; 64k = four (megatrain-compile --microbatches 4; gradient accumulation
# over 4 for the peers).
#
# Settings (environment):
#   SIZE       the model: 1b3 (default), 7b (the Llama-2-7B shape: hidden 4096, 32 layers, 32
#              heads, intermediate 11008), 17b (16.7B: hidden 6144, 36 layers, 48 heads,
#              intermediate 16384), 20b (the same with 44 layers), or HIDDEN,LAYERS,HEADS,INTERMEDIATE; vocabulary 32000. Every size but 1b3
#              exports graph-only (no weights in the ONNX file) and starts megatrain from
#              --init normal:0.02 (GRAPH_ONLY=0/1 overrides)
#   ONNX       an exported model to use instead of exporting (graph-only unless GRAPH_ONLY=0;
#              e.g. tests/models/graphs/llama_7b_b8s2048.onnx, or a file.onnx.xz, unpacked)
#   PLANS      a folder of plans compiled elsewhere, NAME-SETTING.plan (e.g. llama7b-16k.plan, with
#              its compile log NAME-SETTING.log), used instead of compiling here
#   COMPILE_FLAGS / RUN_FLAGS  more megatrain-compile / megatrain-run flags (word-split), e.g.
#              COMPILE_FLAGS="--disk-memory 40GiB" RUN_FLAGS="--disk-dir /tmp/mt-disk"
#   DEEPSPEED_WHEELS  packages from `bench/deepspeed_setup.sh fetch` to install DeepSpeed from
#              when the deepspeed-offload peer runs and python cannot import it
#   BIN        megatrain-compile, megatrain-run, megatrain-inspect (default build-gpu/bin
#              when it exists, else build/bin; scripts/stage_device.sh fills build-gpu)
#   OUT        logs, metrics, results and the table (default runs/llama1b3)
#   WORK       the exported model, plans and tokens: large, kept out of OUT
#              (default /tmp/megatrain-llama1b3; an export already there is reused)
#   SETTINGS   comma-separated, of 16k and 64k (default 16k,64k)
#   PRECISION  megatrain-compile --precision and the peers' precision (default bf16);
#              a compiler without the flag compiles at its default, and says so
#   DEVICE_MEMORY  megatrain-compile --device-memory (default 16GiB); "default" passes none (the
#              profile's device memory minus the margin, the compiler's default)
#   PROFILE    megatrain-compile --device-profile (default bench/profiles/h200.json)
#   STEPS      megatrain-run steps (default 12), WARMUP of them not timed (default 2)
#   PEER_STEPS / FSDP_STEPS  optimizer steps of the all-on-GPU / FSDP2 peer (default 8 / 5;
#              PEER_WARMUP of them not timed, default 2)
#   LR BETA1 BETA2 EPS WEIGHT_DECAY  AdamW, the same for all (default 1e-4 0.9 0.999 1e-8 0.01)
#   SKIP_EXPORT=1 SKIP_COMPILE=1 SKIP_MEGATRAIN=1 SKIP_PEERS=1  skip a phase (its results
#              from an earlier run in OUT still make the table); PEERS: a comma list of
#              gpu, fsdp2-offload (fused CPU AdamW), fsdp2-offload-default (torch's default
#              CPU AdamW, as a plain torch.optim.AdamW(params)), compile, deepspeed-offload;
#              default gpu,compile,fsdp2-offload,deepspeed-offload
#              runs one peer only; compile (torch.compile, all on GPU; at least 3 warm-up steps)
#              and deepspeed-offload (ZeRO-3, parameters and optimizer offloaded to the CPU) are
#              the others; REEXPORT=1 exports again even when WORK has the model
#   MT_TIMEOUT / PEER_TIMEOUT  seconds one megatrain-run / one peer may take (default 200 / 180;
#              deepspeed-offload gets DEEPSPEED_EXTRA (default 240) s more, for building its CPU AdamW)
#   TRACE      1 (default): megatrain-run --trace of the last step into OUT/<setting>/
#              trace-measured.json.gz beside megatrain-inspect's trace-predicted.json.gz
#   SMOKE=1    the whole flow at a tiny config on the CPU (megatrain-run --backend cpu, the
#              all-on-GPU peer's loop on the CPU): checks the harness where there is no GPU
# Exit status: 0 when every phase that ran succeeded.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
if [[ -z ${BIN:-} ]]; then BIN=build-gpu/bin; [[ -x $BIN/megatrain-run ]] || BIN=build/bin; fi
OUT=${OUT:-runs/llama1b3}
SETTINGS=${SETTINGS:-16k,64k}
PRECISION=${PRECISION:-bf16}
DEVICE_MEMORY=${DEVICE_MEMORY:-16GiB}
PROFILE=${PROFILE-bench/profiles/h200.json}
STEPS=${STEPS:-12}
WARMUP=${WARMUP:-2}
PEER_STEPS=${PEER_STEPS:-8}
FSDP_STEPS=${FSDP_STEPS:-5}
PEER_WARMUP=${PEER_WARMUP:-2}
PEERS=${PEERS:-gpu,compile,fsdp2-offload,deepspeed-offload}
LR=${LR:-1e-4} BETA1=${BETA1:-0.9} BETA2=${BETA2:-0.999} EPS=${EPS:-1e-8} WEIGHT_DECAY=${WEIGHT_DECAY:-0.01}
MT_TIMEOUT=${MT_TIMEOUT:-200}
PEER_TIMEOUT=${PEER_TIMEOUT:-180}
BACKEND=cuda PEER_DEVICE=cuda
SIZE=${SIZE:-1b3}
case $SIZE in
  1b3) shape=2048,24,16,5632 ;;
  7b) shape=4096,32,32,11008 ;;
  17b) shape=6144,36,48,16384 ;;
  20b) shape=6144,44,48,16384 ;;
  *,*,*,*) shape=$SIZE ;;
  *) echo "llama1b3.sh: SIZE must be 1b3, 7b, 17b, 20b or HIDDEN,LAYERS,HEADS,INTERMEDIATE, not '$SIZE'" >&2; exit 2 ;;
esac
IFS=, read -r hidden layers heads intermediate <<< "$shape"
CONFIG=(--hidden "$hidden" --layers "$layers" --heads "$heads" --intermediate "$intermediate" --vocab 32000)
GRAPH_ONLY=${GRAPH_ONLY:-$([[ $SIZE == 1b3 ]] && echo 0 || echo 1)}
NAME=llama$SIZE
[[ $SIZE == *,* ]] && NAME=llama-${SIZE//,/-}
BATCH=8 SEQ=2048 VOCAB=32000 TITLE="megatrain vs PyTorch, Llama-shaped $SIZE ($shape)"
[[ $SIZE == 1b3 ]] && TITLE="megatrain vs PyTorch, Llama-shaped 1.36B"
read -ra COMPILE_EXTRA <<< "${COMPILE_FLAGS:-}"
read -ra RUN_EXTRA <<< "${RUN_FLAGS:-}"
if [[ ${SMOKE:-0} == 1 ]]; then
  BACKEND=cpu PEER_DEVICE=cpu PEERS=gpu PROFILE=
  hidden=64 layers=2 heads=4 intermediate=176
  CONFIG=(--hidden 64 --layers 2 --heads 4 --intermediate 176 --vocab 256)
  BATCH=2 SEQ=64 VOCAB=256 TITLE="harness check: a tiny Llama on the CPU (not a benchmark)"
  WORK=${WORK:-/tmp/megatrain-llama-smoke}
  GRAPH_ONLY=0
fi
WORK=${WORK:-/tmp/megatrain-$NAME}
MODEL_ARGS=(--family llama "${CONFIG[@]}" --batch "$BATCH" --seq "$SEQ" --seed 0)
mkdir -p "$OUT" "$WORK"
OUT=$(cd "$OUT" && pwd)
WORK=$(cd "$WORK" && pwd)
MODEL=$WORK/$NAME.onnx
export_flags=(--external-data always)
weights=(--weights "$MODEL")
if [[ $GRAPH_ONLY == 1 ]]; then export_flags=(--graph-only); weights=(--init normal:0.02); fi
TOKENS=$WORK/tokens.bin
# cuBLAS comes from the machine's CUDA; the CUDA runtime is inside the binaries.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

PHASE_WIDTH=26
source bench/phases.sh
microbatches() { case $1 in 16k) echo 1 ;; 64k) echo 4 ;; *) echo "unknown setting '$1' (16k or 64k)" >&2; return 1 ;; esac; }
IFS=, read -ra settings <<< "$SETTINGS"
for s in "${settings[@]}"; do microbatches "$s" > /dev/null || exit 2; mkdir -p "$OUT/$s"; done

# GPU memory in use, sampled every 200 ms while a system runs (the one memory figure
# taken the same way for every system).
watch_start() {  # file
  watch_pid=
  command -v nvidia-smi > /dev/null || return 0
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 200 > "$1" 2> /dev/null &
  watch_pid=$!
}
watch_stop() { [[ -n ${watch_pid:-} ]] && kill "$watch_pid" 2> /dev/null; wait "$watch_pid" 2> /dev/null; watch_pid=; return 0; }

{
  echo "date    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit  $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (modified)')"
  echo "gpu     $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
  echo "host    $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), $(uname -r)"
  echo "config  settings $SETTINGS, precision $PRECISION, budget $DEVICE_MEMORY, megatrain $STEPS steps ($WARMUP warm-up), peers $PEER_STEPS / fsdp2 $FSDP_STEPS steps ($PEER_WARMUP warm-up), AdamW lr $LR betas ($BETA1, $BETA2) eps $EPS wd $WEIGHT_DECAY"
} | tee "$OUT/machine.txt"
echo "binaries $BIN; work $WORK; out $OUT"

# ---- 1. export (reused when WORK holds the same export) ----
if [[ ${SKIP_EXPORT:-0} != 1 ]]; then
  phase_start "export"
  stamp="${MODEL_ARGS[*]}"
  stamp="$stamp ${export_flags[*]}"
  if [[ -n ${ONNX:-} ]]; then
    if [[ $ONNX == *.xz ]]; then xz -dc "$ONNX" > "$MODEL"; else cp "$ONNX" "$MODEL"; fi
    rm -f "$MODEL.args"
    phase_end ok "$ONNX"
  elif [[ ${REEXPORT:-0} != 1 && -f $MODEL && $(cat "$MODEL.args" 2>/dev/null) == "$stamp" ]]; then
    phase_end ok "reused $MODEL"
  elif python3 frontends/python/export_hf.py "${MODEL_ARGS[@]}" "${export_flags[@]}" -o "$MODEL" \
      > "$OUT/export.log" 2>&1; then
    echo "$stamp" > "$MODEL.args"
    phase_end ok "$(tail -1 "$OUT/export.log")"
  else
    tail -20 "$OUT/export.log"
    phase_end FAIL "export_hf.py failed ($OUT/export.log)"
  fi
fi
if [[ ! -f $TOKENS ]]; then
  python3 bench/make_tokens.py --vocab "$VOCAB" --tokens $((1 << 22)) --out "$TOKENS" > "$OUT/tokens.log" 2>&1 \
    || { cat "$OUT/tokens.log"; failed=1; }
fi

# ---- 2. compile both settings at once (each is single-threaded) ----
compile() {  # setting
  local s=$1 n plan log flags
  n=$(microbatches "$s")
  plan=$WORK/$NAME-$s.plan
  log=$OUT/$s/compile.log
  flags=("$MODEL" -o "$plan" --shape "input_ids=${BATCH}x$SEQ" --microbatches "$n"
         --lr "$LR" --beta1 "$BETA1" --beta2 "$BETA2" --eps "$EPS" --weight-decay "$WEIGHT_DECAY" "${COMPILE_EXTRA[@]}")
  [[ $DEVICE_MEMORY != default ]] && flags+=(--device-memory "$DEVICE_MEMORY")
  [[ -n $PROFILE ]] && flags+=(--device-profile "$PROFILE")
  rm -f "$plan"
  if [[ -n ${PLANS:-} && -f $PLANS/$NAME-$s.plan ]]; then
    cp "$PLANS/$NAME-$s.plan" "$plan"
    [[ -f $PLANS/$NAME-$s.log ]] && cp "$PLANS/$NAME-$s.log" "$log"
    echo "plan $PLANS/$NAME-$s.plan compiled elsewhere (PLANS)" >> "$log"
  elif ! "$BIN/megatrain-compile" "${flags[@]}" --precision "$PRECISION" > "$log" 2>&1; then
    if grep -q "unknown option '--precision'" "$log"; then
      echo "note: this megatrain-compile has no --precision; compiled at its default precision" | tee "$OUT/$s/precision-note.txt"
      "$BIN/megatrain-compile" "${flags[@]}" >> "$log" 2>&1 || return 1
    else
      return 1
    fi
  fi
  python3 bench/plan_header.py "$plan" > "$OUT/$s/plan.json" || return 1
  "$BIN/megatrain-inspect" "$plan" --max-steps 1 > "$OUT/$s/inspect.txt" 2>&1 || true
}
if [[ ${SKIP_COMPILE:-0} != 1 ]]; then
  phase_start "compile ${SETTINGS}"
  pids=()
  for s in "${settings[@]}"; do compile "$s" & pids+=($!); done
  for i in "${!settings[@]}"; do
    s=${settings[$i]}
    if wait "${pids[$i]}"; then
      echo "$s: $(python3 -c 'import json,sys; h=json.load(open(sys.argv[1])); print("precision", h.get("precision") or "fp32", "| predicted step", round(h["predicted_step_s"], 3), "s | device arena", round(h["device_pool_bytes"] / 2**30, 2), "GiB")' "$OUT/$s/plan.json")"
    else
      tail -20 "$OUT/$s/compile.log"
      failed=1
      echo "$s: megatrain-compile failed ($OUT/$s/compile.log)"
    fi
  done
  [[ $failed == 0 ]] && phase_end ok "$(ls "$WORK"/*.plan 2>/dev/null | wc -l) plans" || phase_end FAIL "see compile.log"
fi

# ---- 3. megatrain-run on cuda ----
if [[ ${SKIP_MEGATRAIN:-0} != 1 ]]; then
  for s in "${settings[@]}"; do
    phase_start "megatrain $s ($STEPS steps)"
    plan=$WORK/$NAME-$s.plan
    if [[ ! -f $plan ]]; then phase_end FAIL "no plan $plan"; continue; fi
    rm -f "$OUT/$s/megatrain.jsonl"
    watch_start "$OUT/$s/smi-megatrain.txt"
    trace=()
    [[ ${TRACE:-1} == 1 && $BACKEND == cuda ]] && trace=(--trace "$OUT/$s/trace-measured.json")
    timeout "$MT_TIMEOUT" "$BIN/megatrain-run" "$plan" "${weights[@]}" --data "$TOKENS" --steps "$STEPS" \
      --backend "$BACKEND" "${RUN_EXTRA[@]}" --metrics "$OUT/$s/megatrain.jsonl" --log-every 1 "${trace[@]}" > "$OUT/$s/megatrain.log" 2>&1
    status=$?
    if [[ ${#trace[@]} -gt 0 && -x $BIN/megatrain-inspect ]]; then
      "$BIN/megatrain-inspect" "$plan" --trace "$OUT/$s/trace-predicted.json" > "$OUT/$s/inspect.txt" 2>&1
      gzip -f "$OUT/$s/trace-measured.json" "$OUT/$s/trace-predicted.json" 2>/dev/null
      python3 bench/trace_breakdown.py "$OUT/$s/trace-measured.json.gz" > "$OUT/$s/trace-breakdown.txt" 2>&1
      cat "$OUT/$s/trace-breakdown.txt"
      sed -n '/^trace/,/^$/p' "$OUT/$s/megatrain.log" | head -30
    fi
    watch_stop
    grep -vE '^step ' "$OUT/$s/megatrain.log" | tail -8
    grep -E '^step ' "$OUT/$s/megatrain.log" | tail -2
    if [[ $status == 0 ]]; then phase_end ok "$(grep -E '^done' "$OUT/$s/megatrain.log" | tail -1 | cut -c1-110)"
    elif [[ $status == 124 ]]; then phase_end FAIL "stopped after $MT_TIMEOUT s (MT_TIMEOUT); steps so far count"
    else phase_end FAIL "megatrain-run exit $status ($OUT/$s/megatrain.log)"; fi
  done
fi

# ---- 4. the PyTorch peers ----
if [[ ${SKIP_PEERS:-0} != 1 ]]; then
  dtype=$PRECISION
  [[ -f $OUT/${settings[0]}/precision-note.txt ]] && echo "note: peers run at $PRECISION while the compiler ran at its default"
  IFS=, read -ra peer_modes <<< "$PEERS"
  if [[ ,$PEERS, == *,deepspeed-offload,* ]] && ! python3 -c 'import deepspeed' > /dev/null 2>&1 \
      && [[ -n ${DEEPSPEED_WHEELS:-} ]]; then
    phase_start "install deepspeed"
    if bash bench/deepspeed_setup.sh install "$DEEPSPEED_WHEELS" "$WORK/deepspeed" > "$OUT/deepspeed-setup.log" 2>&1; then
      export PYTHONPATH=$WORK/deepspeed${PYTHONPATH:+:$PYTHONPATH}
      phase_end ok "$(tail -1 "$OUT/deepspeed-setup.log")"
    else
      tail -5 "$OUT/deepspeed-setup.log"; phase_end FAIL "bench/deepspeed_setup.sh ($OUT/deepspeed-setup.log)"
    fi
  fi
  for s in "${settings[@]}"; do
    n=$(microbatches "$s")
    for mode in "${peer_modes[@]}"; do
      steps=$PEER_STEPS warmup=$PEER_WARMUP limit=$PEER_TIMEOUT
      [[ $mode == fsdp2-offload* || $mode == deepspeed-offload ]] && steps=$FSDP_STEPS
      [[ $mode == deepspeed-offload ]] && limit=$((PEER_TIMEOUT + ${DEEPSPEED_EXTRA:-240}))
      if [[ $mode == compile && $warmup -lt 3 ]]; then warmup=3; (( steps < warmup + 3 )) && steps=$((warmup + 3)); fi
      phase_start "pytorch $mode $s ($steps steps)"
      rm -f "$OUT/$s/pytorch-$mode.json"
      watch_start "$OUT/$s/smi-pytorch-$mode.txt"
      timeout "$limit" python3 bench/peers.py --mode "$mode" --microbatches "$n" --steps "$steps" \
        "${CONFIG[@]}" --batch "$BATCH" --seq "$SEQ" --device "$PEER_DEVICE" \
        --warmup "$warmup" --precision "$dtype" --lr "$LR" --beta1 "$BETA1" --beta2 "$BETA2" --eps "$EPS" \
        --weight-decay "$WEIGHT_DECAY" --json "$OUT/$s/pytorch-$mode.json" > "$OUT/$s/pytorch-$mode.log" 2>&1
      status=$?
      watch_stop
      if [[ $status == 0 ]]; then
        phase_end ok "$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print("median %.3f s, %s tokens/s, peak %.1f GiB reserved" % (r["median_step_s"], format(round(r["tokens_per_s"]), ","), (r["peak_reserved_bytes"] or 0) / 2**30))' "$OUT/$s/pytorch-$mode.json")"
      else
        tail -15 "$OUT/$s/pytorch-$mode.log"
        phase_end FAIL "exit $status$([[ $status == 124 ]] && echo " after $limit s (PEER_TIMEOUT)") ($OUT/$s/pytorch-$mode.log)"
      fi
    done
  done
fi

# ---- 5. the table ----
echo
echo "== phases (total $(since "$PHASES_BEGIN") s)"
printf '%s\n' "${phases[@]}" | tee "$OUT/phases.txt"
echo
params=$(python3 -c 'import sys; sys.path.insert(0, "bench"); from peers import llama_params; print(llama_params(*map(int, sys.argv[1:])))' "$hidden" "$layers" "$intermediate" "$VOCAB")
python3 bench/bench_table.py "$OUT" --params "$params" --settings "$SETTINGS" --warmup "$WARMUP" --md "$OUT/bench.md" --title "$TITLE" || failed=1
exit $failed
