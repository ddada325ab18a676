# cuda_pair.sh - sourced by the GPU scripts that train two plans of the tiny LLM on cuda and hold
# them to the same bits (visits_runs.sh, update_visits_runs.sh). Expects SRC and ONNX (the
# llama_opt export) and defines `fail`, `compile_llm_plan BIN DIR KIND_NAME FLAGS...` (DIR/KIND_NAME.plan
# of the export in bf16 with FLAGS, its log printed on failure) and `cuda_pair NAME BIN DIR A B`:
# trains DIR/A_NAME.plan
# and DIR/B_NAME.plan 20 steps each on cuda (the test inputs) and fails unless their 20 losses
# and trained weights are bitwise equal. PAIR_BACKEND (default cuda) checks the harness itself on
# the cpu backend of a machine without a GPU.
export MEGATRAIN_ATTENTION_DETERMINISTIC=1
fail() { echo "FAIL: $*"; exit 1; }
PAIR_TMP=$(mktemp -d)
trap 'rm -rf "$PAIR_TMP"' EXIT
compile_llm_plan() {
  local bin=$1 dir=$2 plan=$3; shift 3
  "$bin/megatrain-compile" "$ONNX" -o "$dir/$plan.plan" --precision bf16 "$@" > "$dir/$plan.log" 2>&1 ||
    { cat "$dir/$plan.log"; fail "$plan: compile"; }
  rm -f "$dir/$plan.log"
}
cuda_pair() {
  local name=$1 bin=$2 dir=$3 a=$4 b=$5 kind
  for kind in "$a" "$b"; do
    "$bin/megatrain-run" "$dir/${kind}_$name.plan" --weights "$ONNX" --backend "${PAIR_BACKEND:-cuda}" \
      --input "input_ids=$SRC/tests/models/llm/input_ids.npy" --steps 20 --quiet \
      --metrics "$PAIR_TMP/${kind}_$name.jsonl" --export-safetensors "$PAIR_TMP/${kind}_$name.safetensors" \
      > "$PAIR_TMP/${kind}_$name.log" 2>&1 || { cat "$PAIR_TMP/${kind}_$name.log"; fail "${kind}_$name: ${PAIR_BACKEND:-cuda} run"; }
  done
  python3 - "$PAIR_TMP/${a}_$name.jsonl" "$PAIR_TMP/${b}_$name.jsonl" <<'PY' || fail "$name: losses differ"
import json, sys
a, b = ([json.loads(l)['loss'] for l in open(p)] for p in sys.argv[1:])
assert len(a) == 20 and a == b, list(zip(a, b))
print(f"losses bitwise over 20 steps, first {a[0]!r}, last {a[-1]!r}")
PY
  cmp -s "$PAIR_TMP/${a}_$name.safetensors" "$PAIR_TMP/${b}_$name.safetensors" ||
    fail "$name: trained weights differ"
}
