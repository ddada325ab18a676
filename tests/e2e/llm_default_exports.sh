#!/usr/bin/env bash
# llm_default_exports.sh BIN SRC FAMILY DTYPE - a tiny LLM exported with torch.onnx.export's
# defaults (tests/models/llm_default: dynamo, no megatrain metadata, weights as external data,
# the logits output named after its node), with the exporter's optimizer on and off, compiles
# with no loss or logits flag (`megatrain-compile --precision fp32`), without a warning, and
# trains 10 AdamW steps on the CPU backend with losses within 1e-3 of PyTorch's (fp32, from the
# same weights; tests/models/make_llm_default_exports.py). DTYPE is float32, bfloat16 or (for
# llama) float16: the export's initializers; the compiler trains fp32 masters of them.
#
# llm_default_exports.sh BIN SRC merged - an export whose optimizer merged equal norm scales
# (tests/models/llm/llama_opt.onnx) gets the compile-time warning that names them and the fix.
set -euo pipefail
BIN=$1
SRC=$2
FAMILY=$3
DTYPE=${4:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
DIR=$SRC/tests/models/llm_default

if [[ $FAMILY == merged ]]; then
  "$BIN/megatrain-compile" "$SRC/tests/models/llm/llama_opt.onnx" --emit=mt -o "$TMP/mt.mlir" \
    2>"$TMP/err"
  cat "$TMP/err"
  grep -q "warning: .*initializer 'model.layers.0.input_layernorm.weight' is the scale or bias of 5 nodes" "$TMP/err"
  grep -q "they train as one parameter; export with optimize=False" "$TMP/err"
  echo PASS
  exit 0
fi

python3 -c "import numpy" 2>/dev/null || {
  echo "llm_default_exports.sh: needs the Python package numpy"; exit 1; }

for tag in noopt opt; do
  name=${FAMILY}_${DTYPE}_$tag
  model=$DIR/$name.onnx
  "$BIN/megatrain-compile" "$model" -o "$TMP/$name.plan" --precision fp32 \
    >"$TMP/$name.compile" 2>&1 || { cat "$TMP/$name.compile"; exit 1; }
  if grep -q "warning" "$TMP/$name.compile"; then
    cat "$TMP/$name.compile"
    echo "$name: unexpected warning"; exit 1
  fi
  "$BIN/megatrain-run" "$TMP/$name.plan" --weights "$model" --backend cpu --steps 10 --quiet \
    --input "input_ids=$DIR/input_ids.npy" --metrics "$TMP/$name.jsonl" >/dev/null
  python3 - "$TMP/$name.jsonl" "$DIR/${FAMILY}_${DTYPE}_losses.npy" "$name" <<'PY'
import json
import sys
import numpy as np
metrics, reference, name = sys.argv[1:4]
ours = [json.loads(line)["loss"] for line in open(metrics) if line.strip()]
ref = np.load(reference)
assert len(ours) == len(ref), (len(ours), len(ref))
err = float(np.max(np.abs(np.array(ours) - ref)))
print(f"{name}: 10 AdamW losses {ours[0]:.4f} -> {ours[-1]:.4f}, max |megatrain - PyTorch| {err:.2e}")
if not err < 1e-3:
    print("megatrain:", ours)
    print("PyTorch:  ", ref.tolist())
    sys.exit(f"{name}: losses differ from PyTorch's by {err:.2e} (bar 1e-3)")
PY
done
echo PASS
