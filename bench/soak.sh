#!/usr/bin/env bash
# bench/soak.sh - a soak test of megatrain-run on the Llama-shaped 1.36B model: minutes of training with
# checkpoints, a SIGKILL in the middle and a resume, in one command of at most 10 minutes.
#
# On the GPU machine: the model of bench/llama1b3.sh (hidden 2048, 24 layers, 16 heads,
# intermediate 5632, vocabulary 32000; random init, seed 0; batch 8 x seq 2048, bf16, a
# 16 GiB device budget, the h200 device profile, AdamW lr 1e-4 betas 0.9/0.999 eps 1e-8
# weight decay 0.01) trains on random tokens with megatrain-run --backend cuda for DURATION
# seconds, from the first process's start to the last one's end (bench/soak.py):
#   1. calibrate: CAL_STEPS steps from the weights, no checkpoints; their median step time
#      sets SAVE_EVERY (a checkpoint every SAVE_INTERVAL seconds of steps); its losses are
#      the fresh-start reference for run A's first steps (two processes, same losses);
#   2. run A: from the weights, --save WORK/soak-ckpt --save-every SAVE_EVERY
#      --keep-checkpoints 1; once KILL_AT seconds have passed it is killed with SIGKILL
#      KILL_AFTER steps after its newest checkpoint (when the metrics file reaches that step);
#   3. run B: --resume WORK/soak-ckpt, the same flags, to a step count that ends the soak at
#      about DURATION seconds; it recomputes the steps A did after the checkpoint.
# Checks (each a row of the table printed last; exit status 1 when one fails): every process
# did what it should (A died of our SIGKILL, the others exited 0, B resumed from A's newest
# checkpoint and reached its last step); every loss is finite; the losses B recomputed are
# bitwise equal to A's (the metrics' %.17g text, and the parsed floats), and A's first steps
# to the calibration's; one checkpoint is left, B's last; the device memory (nvidia-smi:
# the process's used_memory from --query-compute-apps, or the GPU's memory.used when the
# process is not listed) and the host memory (VmRSS of /proc/PID/status), sampled every
# SAMPLE_EVERY seconds, are flat in each process from its first checkpoint to its last step: max - min
# within FLAT_PCT percent of the max or within FLAT_MIB MiB, whichever is larger.
#
# On the H200, two device commands (each under the 10-minute limit):
#   PHASE=prepare OUT=$OUT/prepare bash bench/soak.sh   # about 1.5 min: export ~60 s, compile ~30 s
#   OUT=$OUT/soak bash bench/soak.sh                    # about DURATION + 45 s: calibration ~35 s
# One command also works: the soak then gets what BUDGET leaves after the preparation.
#
# Settings (environment):
#   BIN        megatrain-compile and megatrain-run (default build-gpu/bin when it exists,
#              else build/bin; scripts/stage_device.sh fills build-gpu)
#   OUT        results: soak.json (every figure), memory.csv, summary.txt, the metrics and
#              logs of each process (default runs/soak)
#   WORK       the exported model, the plan, the tokens and the checkpoints (soak-ckpt/, one
#              checkpoint of about 16 GB at a time, two while one is written; run B's last
#              stays afterwards): large, kept out of OUT (default /tmp/megatrain-llama1b3,
#              bench/llama1b3.sh's, whose export and tokens are reused; an export with other
#              flags is replaced)
#   PHASE      prepare: export, compile and make the tokens (each skipped when WORK has it)
#              and stop; soak (default): prepare what is missing, then soak
#   DURATION   seconds from run A's start to run B's end (default 480)
#   BUDGET     seconds the whole command may take (default 580; 0: no limit): DURATION
#              shrinks to fit what is left after prepare and calibration, and a process
#              still running near the end is killed and the soak fails, so the results
#              are always written
#   SAVE_INTERVAL  seconds of steps between checkpoints (default 60); SAVE_EVERY (steps)
#              overrides it; STEP_TIME (seconds) skips the calibration and sets SAVE_EVERY
#              from the given step time
#   CAL_STEPS  calibration steps (default 10)
#   KILL_AT    seconds after run A's start before the kill may happen (default DURATION/2)
#   KILL_AFTER steps after a checkpoint at which A is killed (default SAVE_EVERY/2)
#   SAMPLE_EVERY  seconds between memory samples (default 2)
#   FLAT_PCT FLAT_MIB  the flatness bound (default 2 % and 64 MiB)
#   PRECISION DEVICE_MEMORY PROFILE  megatrain-compile --precision, --device-memory,
#              --device-profile (default bf16, 16GiB, bench/profiles/h200.json)
#   LR BETA1 BETA2 EPS WEIGHT_DECAY  AdamW (default 1e-4 0.9 0.999 1e-8 0.01)
#   LOG_EVERY  megatrain-run --log-every (default 10)
#   REEXPORT=1 export again even when WORK has the model
#   SMOKE=1    the whole flow on the CPU (--backend cpu) with a tiny Llama (hidden 64, 2
#              layers; exported by export_hf.py when torch is installed, else the bundled
#              tests/models/llm/llama_noopt.onnx made by it; batch 2 x seq 32): DURATION 40,
#              no BUDGET, SAVE_INTERVAL DURATION/10, CAL_STEPS 30, SAMPLE_EVERY 0.5, LOG_EVERY
#              200, host memory only, WORK /tmp/megatrain-soak-smoke; checks the harness where
#              there is no GPU (ctest e2e.soak_smoke runs it with DURATION=20)
# Exit status: 0 when every phase ran and every check passed.
set -uo pipefail
start_epoch=$(date +%s.%N)
cd "$(dirname "$0")/.." || exit 1
if [[ -z ${BIN:-} ]]; then BIN=build-gpu/bin; [[ -x $BIN/megatrain-run ]] || BIN=build/bin; fi
OUT=${OUT:-runs/soak}
PHASE=${PHASE:-soak}
PRECISION=${PRECISION:-bf16}
DEVICE_MEMORY=${DEVICE_MEMORY:-16GiB}
PROFILE=${PROFILE-bench/profiles/h200.json}
LR=${LR:-1e-4} BETA1=${BETA1:-0.9} BETA2=${BETA2:-0.999} EPS=${EPS:-1e-8} WEIGHT_DECAY=${WEIGHT_DECAY:-0.01}
FLAT_PCT=${FLAT_PCT:-2}
FLAT_MIB=${FLAT_MIB:-64}
BACKEND=cuda
CONFIG=(--hidden 2048 --layers 24 --heads 16 --intermediate 5632 --vocab 32000)
BATCH=8 SEQ=2048 VOCAB=32000 TITLE="soak: Llama-shaped 1.36B on cuda"
BUNDLED=
if [[ ${SMOKE:-0} == 1 ]]; then
  BACKEND=cpu PROFILE=
  DURATION=${DURATION:-40} BUDGET=${BUDGET:-0} CAL_STEPS=${CAL_STEPS:-30}
  SAVE_INTERVAL=${SAVE_INTERVAL:-$(awk -v d="$DURATION" 'BEGIN { print d / 10 }')}
  SAMPLE_EVERY=${SAMPLE_EVERY:-0.5} LOG_EVERY=${LOG_EVERY:-200}
  WORK=${WORK:-/tmp/megatrain-soak-smoke}
  CONFIG=(--hidden 64 --layers 2 --heads 4 --kv-heads 2 --intermediate 176 --vocab 256)
  BATCH=2 SEQ=32 VOCAB=256 TITLE="soak harness check: a tiny Llama on the CPU (not the soak)"
  # Without torch, the tiny Llama that export_hf.py made with these flags, as the tests keep it.
  python3 -c 'import torch, transformers' 2>/dev/null || BUNDLED=tests/models/llm/llama_noopt.onnx
fi
DURATION=${DURATION:-480}
BUDGET=${BUDGET:-580}
SAVE_INTERVAL=${SAVE_INTERVAL:-60}
CAL_STEPS=${CAL_STEPS:-10}
SAMPLE_EVERY=${SAMPLE_EVERY:-2}
LOG_EVERY=${LOG_EVERY:-10}
WORK=${WORK:-/tmp/megatrain-llama1b3}
case $PHASE in prepare|soak) ;; *) echo "soak.sh: PHASE must be prepare or soak, not '$PHASE'" >&2; exit 2 ;; esac
MODEL_ARGS=(--family llama "${CONFIG[@]}" --batch "$BATCH" --seq "$SEQ" --seed 0)
mkdir -p "$OUT" "$WORK"
OUT=$(cd "$OUT" && pwd)
WORK=$(cd "$WORK" && pwd)
MODEL=$WORK/llama1b3.onnx
[[ ${SMOKE:-0} == 1 ]] && MODEL=$WORK/llama-tiny.onnx
PLAN=$WORK/soak.plan
TOKENS=$WORK/tokens.bin
CKPT=$WORK/soak-ckpt
# cuBLAS comes from the machine's CUDA; the CUDA runtime is inside the binaries.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

PHASES_BEGIN=$start_epoch PHASE_WIDTH=12
source bench/phases.sh

{
  echo "date    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit  $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (modified)')"
  echo "gpu     $(command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1 || echo none)"
  echo "host    $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), $(uname -r)"
  echo "disk    $(df -h "$WORK" | awk 'NR == 2 { print $4 " free of " $2 " under " $6 }')"
  echo "config  $TITLE; phase $PHASE, backend $BACKEND, precision $PRECISION, budget $DEVICE_MEMORY, duration $DURATION s, command budget $BUDGET s"
} | tee "$OUT/machine.txt"
echo "binaries $BIN; work $WORK; out $OUT"

# ---- 1. the model (reused when WORK holds the same export) ----
phase_start "export"
stamp="${MODEL_ARGS[*]}${BUNDLED:+ bundled $BUNDLED}"
if [[ ${REEXPORT:-0} != 1 && -f $MODEL && $(cat "$MODEL.args" 2>/dev/null) == "$stamp" ]] &&
   [[ -n $BUNDLED || -f $MODEL.data ]]; then
  phase_end ok "reused $MODEL"
elif [[ -n $BUNDLED ]]; then
  rm -f "$MODEL.args"
  cp "$BUNDLED" "$MODEL" && echo "$stamp" > "$MODEL.args" && phase_end ok "no torch here: $BUNDLED (export_hf.py ${CONFIG[*]} --batch $BATCH --seq $SEQ)" \
    || phase_end FAIL "cannot copy $BUNDLED"
else
  rm -f "$MODEL.args"
  if python3 frontends/python/export_hf.py "${MODEL_ARGS[@]}" --external-data always -o "$MODEL" > "$OUT/export.log" 2>&1; then
    echo "$stamp" > "$MODEL.args"
    phase_end ok "$(tail -1 "$OUT/export.log")"
  else
    tail -20 "$OUT/export.log"
    phase_end FAIL "export_hf.py failed ($OUT/export.log)"
  fi
fi

# ---- 2. the plan (reused when compiled from this model with these flags by this compiler) ----
if [[ $failed == 0 ]]; then
  phase_start "compile"
  flags=("$MODEL" -o "$PLAN" --shape "input_ids=${BATCH}x$SEQ" --device-memory "$DEVICE_MEMORY" --microbatches 1
         --lr "$LR" --beta1 "$BETA1" --beta2 "$BETA2" --eps "$EPS" --weight-decay "$WEIGHT_DECAY" --precision "$PRECISION")
  [[ -n $PROFILE ]] && flags+=(--device-profile "$PROFILE")
  plan_stamp="${flags[*]} | model $stamp | compiler $(cksum < "$BIN/megatrain-compile" 2>/dev/null)"
  if [[ -f $PLAN && $(cat "$PLAN.args" 2>/dev/null) == "$plan_stamp" ]]; then
    phase_end ok "reused $PLAN"
  else
    rm -f "$PLAN" "$PLAN.args"
    if "$BIN/megatrain-compile" "${flags[@]}" > "$OUT/compile.log" 2>&1; then
      echo "$plan_stamp" > "$PLAN.args"
      phase_end ok "$(grep -m1 'predicted step' "$OUT/compile.log" | sed 's/^ *//' | cut -c1-90)"
    else
      tail -20 "$OUT/compile.log"
      phase_end FAIL "megatrain-compile failed ($OUT/compile.log)"
    fi
  fi
  python3 bench/plan_header.py "$PLAN" > "$OUT/plan.json" 2>/dev/null || rm -f "$OUT/plan.json"
fi

# ---- 3. the tokens: 4,194,304 random ids below the vocabulary ----
if [[ $failed == 0 ]]; then
  phase_start "tokens"
  vocab_of() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab"])' "$1.json" 2>/dev/null; }
  if [[ -f $TOKENS && $(vocab_of "$TOKENS") == "$VOCAB" ]]; then
    phase_end ok "reused $TOKENS"
  elif python3 bench/make_tokens.py --vocab "$VOCAB" --tokens $((1 << 22)) --out "$TOKENS" > "$OUT/tokens.log" 2>&1; then
    phase_end ok "$(tail -1 "$OUT/tokens.log")"
  else
    cat "$OUT/tokens.log"
    phase_end FAIL "make_tokens.py failed"
  fi
fi

if [[ $PHASE == prepare || $failed == 1 ]]; then
  echo
  echo "== soak.sh $PHASE: phases (total $(since "$start_epoch") s)"
  printf '%s\n' "${phases[@]}" | tee "$OUT/phases.txt"
  exit $failed
fi

# ---- 4. the soak (bench/soak.py prints the table last) ----
if [[ ! -x $BIN/megatrain-run ]]; then echo "soak.sh: no $BIN/megatrain-run (set BIN)" >&2; exit 1; fi
printf '%s\n' "${phases[@]}" > "$OUT/phases.txt"
deadline=()
[[ $BUDGET != 0 ]] && deadline=(--deadline "$(awk -v a="$start_epoch" -v b="$BUDGET" 'BEGIN { printf "%.3f", a + b }')")
extra=()
[[ -n ${STEP_TIME:-} ]] && extra+=(--step-time "$STEP_TIME")
[[ -n ${SAVE_EVERY:-} ]] && extra+=(--save-every "$SAVE_EVERY")
[[ -n ${KILL_AT:-} ]] && extra+=(--kill-at "$KILL_AT")
[[ -n ${KILL_AFTER:-} ]] && extra+=(--kill-after "$KILL_AFTER")
exec python3 bench/soak.py --bin "$BIN" --plan "$PLAN" --weights "$MODEL" --tokens "$TOKENS" --backend "$BACKEND" \
  --out "$OUT" --ckpt "$CKPT" --duration "$DURATION" --save-interval "$SAVE_INTERVAL" --cal-steps "$CAL_STEPS" \
  --sample-every "$SAMPLE_EVERY" --flat-pct "$FLAT_PCT" --flat-mib "$FLAT_MIB" --log-every "$LOG_EVERY" \
  --title "$TITLE" --started "$start_epoch" "${deadline[@]}" "${extra[@]}"
