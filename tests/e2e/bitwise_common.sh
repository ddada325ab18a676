# bitwise_common.sh - sourced by the bitwise e2e scripts (tiering_bitwise.sh,
# fold_transpose_bitwise.sh): a scratch directory, `fail`, the model's compile flags and
# feed, and `train NAME` (20 CPU steps of NAME.plan into NAME.losses, one `repr` per step,
# and NAME.safetensors).
# Expects BIN, SRC, MODEL (demo, demo_bf16, or a tests/models/llm/*.onnx stem) and
# LLM_PRECISION (the --precision of the LLM exports).
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
fail() { echo "FAIL: $*"; exit 1; }

if [[ $MODEL == demo || $MODEL == demo_bf16 ]]; then
  ONNX=$SRC/frontends/models/tiny_transformer.onnx
  PRECISION=fp32
  [[ $MODEL == demo_bf16 ]] && PRECISION=bf16
  COMPILE=(--shape input_ids=4x64 --loss next-token-ce --lr 3e-3 --precision "$PRECISION")
  python3 "$SRC/frontends/python/make_corpus.py" --out corpus.bin >/dev/null
  FEED=(--data corpus.bin)
else
  ONNX=$SRC/tests/models/llm/$MODEL.onnx
  COMPILE=(--precision "$LLM_PRECISION")
  FEED=(--input "input_ids=$SRC/tests/models/llm/input_ids.npy")
fi

train() {
  "$BIN/megatrain-run" "$1.plan" --weights "$ONNX" "${FEED[@]}" --steps 20 --quiet \
    --metrics "$1.jsonl" --export-safetensors "$1.safetensors" >/dev/null
  python3 -c "
import json
for line in open('$1.jsonl'):
    print(repr(json.loads(line)['loss']))" > "$1.losses"
}
