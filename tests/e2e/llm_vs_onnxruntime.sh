#!/usr/bin/env bash
# llm_vs_onnxruntime.sh - the forward of every committed tiny LLM export (tests/models/llm/*.onnx,
# fusion on) against onnxruntime's on the same ids: the logits megatrain computes in the first
# training step (--keep-output logits, --dump-output) must be within 1e-4 relative (max abs
# error over max abs logit) of onnxruntime's. Prints the error per model.
set -euo pipefail
BIN=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
DIR=$SRC/tests/models/llm

python3 -c "import numpy, onnx, onnxruntime" 2>/dev/null || {
  echo "llm_vs_onnxruntime.sh: needs the Python packages numpy, onnx and onnxruntime" \
       "(python3 -m pip install -r $SRC/requirements-test.txt, or bash scripts/setup.sh)"
  exit 1
}

for model in "$DIR"/*.onnx; do
  name=$(basename "$model" .onnx)
  # Exact fp32: the logits are compared with onnxruntime's.
  "$BIN/megatrain-compile" "$model" -o "$TMP/$name.plan" --keep-output logits --precision fp32 >/dev/null
  "$BIN/megatrain-run" "$TMP/$name.plan" --weights "$model" --steps 1 --quiet \
    --input "input_ids=$DIR/input_ids.npy" --dump-output "logits=$TMP/$name.npy" >/dev/null
  python3 - "$model" "$DIR/input_ids.npy" "$TMP/$name.npy" "$name" <<'PY'
import sys
import numpy as np
import onnxruntime as ort
model, ids, ours, name = sys.argv[1:5]
options = ort.SessionOptions()
options.log_severity_level = 3  # errors only
session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
feed = {session.get_inputs()[0].name: np.load(ids)}
names = [o.name for o in session.get_outputs()]
reference = session.run(None, feed)[names.index("logits")]
mine = np.load(ours)
assert mine.shape == reference.shape, (mine.shape, reference.shape)
err = float(np.max(np.abs(mine.astype(np.float64) - reference)) / np.max(np.abs(reference)))
print(f"{name}: logits vs onnxruntime rel err {err:.2e}")
if not err < 1e-4:
    sys.exit(f"{name}: logits differ from onnxruntime's by {err:.2e} (bar 1e-4)")
PY
done
echo PASS
