#!/usr/bin/env bash
# scripts/demo.sh - the README's first command: set up, build, then compile the bundled
# tiny transformer and train it on a byte-tokenized English corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-300}
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT_DIR:-runs/demo}

bash scripts/setup.sh
bash scripts/build.sh
BIN=$BUILD_DIR/bin
mkdir -p "$OUT" data

if [[ ! -f data/fortunes.bin ]]; then
  echo "== tokenizing the corpus (Debian 'fortunes', bytes -> uint16 tokens)"
  python3 frontends/python/make_corpus.py --out data/fortunes.bin
fi

# The CUDA backend when a GPU is present (and it was built), else the CPU reference.
BACKEND=${BACKEND:-cpu}
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 \
   && grep -q "^MEGATRAIN_CUDA_BUILT" "$BUILD_DIR/megatrain-features.txt" 2>/dev/null; then
  BACKEND=cuda
fi

echo "== compiling frontends/models/tiny_transformer.onnx"
$BIN/megatrain-compile frontends/models/tiny_transformer.onnx -o "$OUT/tiny_transformer.plan" \
  --shape input_ids=8x64 --loss next-token-ce --logits logits --tokens input_ids \
  --lr 3e-3 --weight-decay 0.01

echo "== training ($STEPS steps, $BACKEND backend)"
$BIN/megatrain-run "$OUT/tiny_transformer.plan" --weights frontends/models/tiny_transformer.onnx \
  --backend "$BACKEND" --data data/fortunes.bin --steps "$STEPS" --metrics "$OUT/metrics.jsonl"
echo "== metrics: $OUT/metrics.jsonl"
python3 frontends/python/plot_metrics.py "$OUT/metrics.jsonl" -o "$OUT/loss.svg" >/dev/null
echo "== loss plot: $OUT/loss.svg"
