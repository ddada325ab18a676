# bitwise_common.sh - sourced by the bitwise e2e scripts (tiering_bitwise.sh,
# fold_transpose_bitwise.sh): a scratch directory, `fail`, the model's compile flags and
# feed, `compile_plan NAME EMIT EXT FLAGS...` (NAME.plan, its log NAME.log printed on failure,
# and the same compile's --emit=EMIT output in NAME.EXT), `train NAME` (20 steps, on megatrain-run's auto backend, of
# NAME.plan into NAME.losses, one `repr` per step, and NAME.safetensors), `compile_counts`
# (below) and `expect_same_training A B` (both trained; 20 losses, bitwise equal, and equal
# weights).
# Expects BIN, SRC, MODEL (demo, demo_bf16, or a tests/models/llm/*.onnx stem) and
# LLM_PRECISION (the --precision of the LLM exports).
# On a GPU (megatrain-run's auto backend picks cuda where there is one) the two trainings
# compared must repeat bit for bit: cuDNN's default attention backward does not.
export MEGATRAIN_ATTENTION_DETERMINISTIC=1
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

compile_plan() {
  local name=$1 emit=$2 ext=$3; shift 3
  "$BIN/megatrain-compile" "$ONNX" -o "$name.plan" "${COMPILE[@]}" "$@" > "$name.log" 2>&1 ||
    { cat "$name.log"; return 1; }
  "$BIN/megatrain-compile" "$ONNX" -o "$name.$ext" --emit="$emit" "${COMPILE[@]}" "$@" > /dev/null 2>&1
}

# compile_counts NAME WHAT FLAGS...: the sourcing script's `compile NAME FLAGS...` (which prints
# the plan's counts on one line) into NAME.counts, to `read` from; fails naming WHAT, with what
# the compile printed, when it fails.
compile_counts() {
  local name=$1 what=$2; shift 2
  compile "$name" "$@" > "$name.counts" || { cat "$name.counts"; fail "compile $what"; }
}

expect_same_training() {
  train "$1"
  train "$2"
  [[ $(wc -l < "$1.losses") -eq 20 ]] || fail "expected 20 losses"
  cmp -s "$1.losses" "$2.losses" || { paste "$1.losses" "$2.losses"; fail "losses differ"; }
  cmp -s "$1.safetensors" "$2.safetensors" || fail "trained weights differ"
}
