#!/usr/bin/env bash
# demo_trains.sh - the demo end to end on the CPU backend, shortened: tokenize the corpus,
# compile the bundled tiny transformer, inspect the plan, train, and require the loss to
# fall by at least 30% from its first value.
set -euo pipefail
BIN=$1
SRC=$2
STEPS=${DEMO_TEST_STEPS:-150}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
TINY=$SRC/frontends/models/tiny_transformer.onnx

python3 "$SRC/frontends/python/make_corpus.py" --out "$TMP/corpus.bin" >/dev/null
"$BIN/megatrain-compile" "$TINY" -o "$TMP/tiny.plan" --shape input_ids=8x64 \
  --loss next-token-ce --logits logits --tokens input_ids --lr 3e-3

"$BIN/megatrain-inspect" "$TMP/tiny.plan" >"$TMP/inspect.txt"
for want in "adamw" "matmul" "next_token_ce" "trainable"; do
  grep -qi -- "$want" "$TMP/inspect.txt" || { echo "inspect output lacks '$want'"; exit 1; }
done

"$BIN/megatrain-run" "$TMP/tiny.plan" --weights "$TINY" --data "$TMP/corpus.bin" \
  --steps "$STEPS" --metrics "$TMP/metrics.jsonl" --quiet
python3 - "$TMP/metrics.jsonl" "$STEPS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == int(sys.argv[2]), f"{len(rows)} metric rows"
first = rows[0]["loss"]
last = sum(r["loss"] for r in rows[-10:]) / 10
drop = 1 - last / first
print(f"first loss {first:.4f}, mean of last 10 {last:.4f}: fell {100 * drop:.1f}%")
assert drop >= 0.30, "the loss must fall by at least 30%"
PY
