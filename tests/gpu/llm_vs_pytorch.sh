#!/usr/bin/env bash
# llm_vs_pytorch.sh - the committed tiny LLM exports (tests/models/llm/*_noopt.onnx) trained for
# 10 AdamW steps on one fixed batch by megatrain-run on the cuda backend, against the loss
# trajectory PyTorch recorded for the same model, weights, batch and hyper-parameters
# (tests/models/llm/manifest.json, made by tests/models/make_llm_models.py).
#
#   bash tests/gpu/llm_vs_pytorch.sh BIN SRC OUT [PRECISIONS]
#
# BIN holds megatrain-run and megatrain-compile (plans are compiled into OUT); PRECISIONS
# (default "fp32 tf32 bf16 bf16-act") picks the --precision of each compile, and bf16-act is
# --precision bf16 --bf16-activations. Bars, worst relative per-step loss error against
# PyTorch's fp32 training: fp32 1e-3 (the CPU backend is at 1e-7, e2e.llm_import), tf32
# 5e-3, bf16 and bf16-act 3e-2. Prints one row per model and precision and exits non-zero if
# any is over its bar. BACKEND (default cuda) picks megatrain-run's backend. Label: gpu (runs
# on the GPU machine); e2e.bf16_activations runs its bf16 rows on the CPU backend.
set -euo pipefail
BIN=$1
SRC=$2
OUT=$3
PRECISIONS=${4:-fp32 tf32 bf16 bf16-act}
DIR=$SRC/tests/models/llm
mkdir -p "$OUT"
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64

status=0
printf '%-14s %-8s %-12s %-12s %s\n' model prec worst_rel bar result
for model in llama mistral qwen2 gpt2; do
  onnx=$DIR/${model}_noopt.onnx
  for precision in $PRECISIONS; do
    flags=(--precision "$precision")
    case $precision in fp32) bar=1e-3 ;; tf32) bar=5e-3 ;; bf16) bar=3e-2 ;;
      bf16-act) bar=3e-2; flags=(--precision bf16 --bf16-activations) ;;
      *) echo "llm_vs_pytorch.sh: unknown precision '$precision'" >&2; exit 2 ;; esac
    plan=$OUT/${model}.$precision.plan
    "$BIN/megatrain-compile" "$onnx" -o "$plan" "${flags[@]}" >"$OUT/${model}.$precision.compile.log" 2>&1 || {
      echo "llm_vs_pytorch.sh: compiling $onnx at $precision failed:" >&2
      cat "$OUT/${model}.$precision.compile.log" >&2; status=1; continue; }
    metrics=$OUT/${model}.$precision.jsonl
    rm -f "$metrics"
    "$BIN/megatrain-run" "$plan" --weights "$onnx" --backend "${BACKEND:-cuda}" --steps 10 --quiet \
      --input "input_ids=$DIR/input_ids.npy" --metrics "$metrics" >"$OUT/${model}.$precision.run.log" 2>&1 || {
      echo "llm_vs_pytorch.sh: training $model at $precision failed:" >&2
      cat "$OUT/${model}.$precision.run.log" >&2; status=1; continue; }
    python3 - "$DIR/manifest.json" "$model" "$metrics" "$precision" "$bar" <<'PY' || status=1
import json, sys
manifest, model, metrics, precision, bar = sys.argv[1:6]
torch_losses = json.load(open(manifest))["models"][model]["losses"]
ours = [json.loads(line)["loss"] for line in open(metrics) if line.strip()]
if len(ours) != len(torch_losses):
    print(f"{model:<14} {precision:<8} got {len(ours)} losses, expected {len(torch_losses)}")
    sys.exit(1)
worst = max(abs(a - b) / abs(b) for a, b in zip(ours, torch_losses))
ok = worst <= float(bar)
print(f"{model:<14} {precision:<8} {worst:<12.3e} {bar:<12} {'pass' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
  done
done
exit $status
