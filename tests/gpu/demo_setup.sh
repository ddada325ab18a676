# demo_setup.sh - sourced by the GPU scripts that train the demo model (graph_runs.sh,
# homes_runs.sh): takes BIN and SRC from the script's arguments, moves into a scratch folder
# removed on exit, makes the token corpus (CORPUS: a token file made elsewhere, as the GPU
# machine has no fortunes database, e.g. the fortunes.bin scripts/stage_device.sh stages) and
# defines fail and compile NAME PRECISION [flags...] (the demo model at 4 x 64 tokens, next-token
# cross-entropy, lr 3e-3; the plan in NAME.plan, the log in NAME.log).
# usage, as a script's first lines: source "$(dirname "$0")/demo_setup.sh" "$@"
BIN=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
fail() { echo "FAIL: $*"; exit 1; }
ONNX=$SRC/frontends/models/tiny_transformer.onnx
if [[ -n ${CORPUS:-} ]]; then cp "$CORPUS" corpus.bin
else python3 "$SRC/frontends/python/make_corpus.py" --out corpus.bin >/dev/null; fi

compile() {  # compile NAME PRECISION [flags...]
  local name=$1 precision=$2; shift 2
  "$BIN/megatrain-compile" "$ONNX" -o "$name.plan" --shape input_ids=4x64 --loss next-token-ce --lr 3e-3 \
    --precision "$precision" "$@" > "$name.log" 2>&1 || { cat "$name.log"; fail "$name: compile"; }
}
